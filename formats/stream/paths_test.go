package stream

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func samplePaths() *Paths {
	return &Paths{
		Template:    "dgx-a100",
		NCCLVersion: "2.27",
		Servers:     []int32{0, 2, 5},
		GPUs:        2,
		NICs:        1,
		Entries: []PathEntry{
			{SrcKind: EndpointGPU, Src: 0, DstKind: EndpointGPU, Dst: 1, Type: "NVL", BWGBps: 240, Hops: 2, P2P: true, P2PRead: true, Via: -1},
			{SrcKind: EndpointGPU, Src: 1, DstKind: EndpointGPU, Dst: 0, Type: "NVL", BWGBps: 240, Hops: 2, P2P: true, P2PRead: true, Via: -1},
			{SrcKind: EndpointGPU, Src: 0, DstKind: EndpointNIC, Dst: 0, Type: "PIX", BWGBps: 24, Hops: 3, GDR: true, Via: -1},
			{SrcKind: EndpointGPU, Src: 1, DstKind: EndpointNIC, Dst: 0, Type: "PXN", BWGBps: 24, Hops: 5, GDR: true, Via: 0},
			{SrcKind: EndpointNIC, Src: 0, DstKind: EndpointGPU, Dst: 0, Type: "PIX", BWGBps: 24, Hops: 3, GDR: true, Via: -1},
			{SrcKind: EndpointNIC, Src: 0, DstKind: EndpointGPU, Dst: 1, Type: "SYS", BWGBps: 16.5, Hops: 6, Via: -1},
		},
		GPUNICs: [][]int32{{0}, {0}},
		PXN:     []PXNProxy{{GPU: 1, NIC: 0, Proxy: 0}},
	}
}

// write builds a whole stream holding the given paths record.
func write(t *testing.T, p *Paths) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, "ncclpath test")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Paths(p); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

func TestPathsRoundTrip(t *testing.T) {
	in := samplePaths()
	r, err := NewReader(write(t, in), "test")
	if err != nil {
		t.Fatal(err)
	}
	kind, err := r.Next()
	if err != nil || kind != KindPaths {
		t.Fatalf("Next = %q, %v", kind, err)
	}
	out, err := r.Paths()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip changed the record:\n got %+v\nwant %+v", out, in)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the record: %v, want EOF (trailer counts checked)", err)
	}
	if r.Counts()[KindPaths] != 1 {
		t.Errorf("counts %v", r.Counts())
	}
}

func TestPathsAllServers(t *testing.T) {
	in := samplePaths()
	in.Servers, in.AllServers = nil, true
	r, _ := NewReader(write(t, in), "test")
	r.Next()
	out, err := r.Paths()
	if err != nil {
		t.Fatal(err)
	}
	if !out.AllServers || len(out.Servers) != 0 {
		t.Errorf("AllServers %v, Servers %v", out.AllServers, out.Servers)
	}
}

func TestPathsBadRecord(t *testing.T) {
	for _, c := range []struct {
		name  string
		edit  func(*Paths)
		field string
	}{
		{"nic out of range", func(p *Paths) { p.Entries[2].Dst = 3 }, "entries[2].dst"},
		{"bad kind", func(p *Paths) { p.Entries[0].SrcKind = "cpu" }, "entries[0].src_kind"},
		{"bad via", func(p *Paths) { p.Entries[3].Via = 7 }, "entries[3].via"},
		{"gpu nic", func(p *Paths) { p.GPUNICs[1] = []int32{4} }, "gpu_nics[1][0]"},
		{"pxn proxy", func(p *Paths) { p.PXN[0].Proxy = -1 }, "pxn[0]"},
		{"negative gpus", func(p *Paths) { p.GPUs = -1 }, "gpus"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := samplePaths()
			c.edit(p)
			r, _ := NewReader(write(t, p), "in.msgpack")
			r.Next()
			_, err := r.Paths()
			var se *Error
			if !errors.As(err, &se) || se.Field != c.field || se.Kind != KindPaths || se.Record != 1 {
				t.Fatalf("error %v (%+v), want one naming field %s of record 1", err, se, c.field)
			}
			if !strings.HasPrefix(err.Error(), "in.msgpack: record 1 (paths), field "+c.field) {
				t.Errorf("message %q", err)
			}
		})
	}
}

func TestPathsWrongKind(t *testing.T) {
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, "test")
	w.Group(&Group{ID: 1, Type: "TP", Ranks: []int32{0, 1}})
	w.Close()
	r, _ := NewReader(&buf, "test")
	r.Next()
	if _, err := r.Paths(); err == nil || !strings.Contains(err.Error(), `record is "group", not "paths"`) {
		t.Errorf("Paths on a group record: %v", err)
	}
}
