package stream

import (
	"bytes"
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func sampleTopology() *Topology {
	return &Topology{
		Family: "spectrum-x", Params: map[string]string{"nic_bw": "400Gbps", "psw": "64"},
		GPUs: 2, GPUsPerServer: 2, NVSwitchesPerServer: 1, GPUType: "H100",
		Nodes: []Node{
			{ID: 0, Kind: NodeGPU, Role: "gpu", Tier: 0, Server: 0, Group: 0, Plane: -1},
			{ID: 1, Kind: NodeGPU, Role: "gpu", Tier: 0, Server: 0, Group: 0, Plane: -1},
			{ID: 2, Kind: NodeNVSwitch, Role: "nvswitch", Tier: 1, Server: 0, Group: 0, Plane: -1},
			{ID: 3, Kind: NodeSwitch, Role: "asw", Tier: 2, Server: -1, Group: 0, Plane: 0},
		},
		Links: []Link{
			{A: 0, B: 2, BWbps: 2.88e12, LatencyPs: 25000, Kind: LinkNVLink},
			{A: 1, B: 2, BWbps: 2.88e12, LatencyPs: 25000, Kind: LinkNVLink},
			{A: 0, B: 3, BWbps: 4e11, LatencyPs: 500000, ErrorRate: 1e-6, Kind: LinkNIC},
			{A: 1, B: 3, BWbps: 4e11, LatencyPs: 500000, Kind: LinkNIC},
		},
	}
}

// oneGPU is the smallest valid topology record body: one GPU, no links.
var oneGPU = map[string]any{"gpus": 1, "gpus_per_server": 1, "nodes": []any{[]any{0, "gpu", "gpu", 0, 0, 0, -1}}, "links": []any{}}

func sampleFlows() []Flow {
	return []Flow{
		{ID: 0, Collective: 7, Src: 0, Dst: 1, Size: 1 << 20, Deps: nil, Channel: 0, Chunk: 0, ChunkCount: 14, ConnType: ConnRing},
		{ID: 1, Collective: 7, Src: 1, Dst: 0, Size: 1 << 20, Deps: []int64{0}, Channel: 1, Chunk: 3, ChunkCount: 14, ConnType: ConnRing},
		{ID: 2, Collective: -1, Src: 0, Dst: 0, Size: 0, Deps: []int64{0, 1}, ConnType: ConnDelay, DelayPs: 556000000},
		{ID: 1 << 40, Collective: 1 << 33, Src: 1<<31 - 1, Dst: 0, Size: 1 << 50, Deps: []int64{-5}, Channel: -1, ConnType: ConnMSCCL},
	}
}

func writeSample(t testing.TB) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, "test 0")
	if err != nil {
		t.Fatal(err)
	}
	must(t, w.Topology(sampleTopology()))
	must(t, w.Group(&Group{ID: 3, Type: "DP", Ranks: []int32{0, 1}, Siblings: []int64{4, 1 << 40}}))
	must(t, w.Collective(&Collective{ID: 7, Op: "allreduce", Size: 64 << 20, Group: 3, Algorithm: "ring", Protocol: "simple", Channels: 2, PXN: true, PredictedPs: 123, FabricLatPs: 1_500_000,
		Cut: &Cut{ChunkBytes: 1 << 20, MaxChunks: 16, BaseLatPs: 6_800_000, IntraLatPs: 600_000, InterLatPs: 2_700_000, StepPacePs: 4_000_000, MaxRecvs: 8, StepTreeWhole: 1, NVLinkLockPs: 1_281_300_000, RingConnPs: 2_377_500_000, FirstFlow: new(int64(5 << 32))}}))
	for _, f := range sampleFlows() {
		f := f
		must(t, w.Flow(&f))
	}
	must(t, w.Record("future-kind", map[string]int{"x": 1}))
	must(t, w.Close())
	return buf.Bytes()
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestRoundTrip(t *testing.T) {
	data := writeSample(t)
	r, err := NewReader(bytes.NewReader(data), "mem")
	must(t, err)
	if r.Header.Producer != "test 0" || r.Header.Version != Version {
		t.Fatalf("header %+v", r.Header)
	}
	var kinds []string
	var flows []Flow
	for {
		kind, err := r.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		kinds = append(kinds, kind)
		switch kind {
		case KindTopology:
			topo, err := r.Topology()
			must(t, err)
			if !reflect.DeepEqual(topo, sampleTopology()) {
				t.Fatalf("topology differs:\n%+v\n%+v", topo, sampleTopology())
			}
		case KindGroup:
			g, err := r.Group()
			must(t, err)
			if g.ID != 3 || g.Type != "DP" || !reflect.DeepEqual(g.Ranks, []int32{0, 1}) || !reflect.DeepEqual(g.Siblings, []int64{4, 1 << 40}) {
				t.Fatalf("group %+v", g)
			}
		case KindCollective:
			c, err := r.Collective()
			must(t, err)
			if c.Size != 64<<20 || c.Algorithm != "ring" || c.Channels != 2 || c.PredictedPs != 123 || !c.PXN || c.FabricLatPs != 1_500_000 ||
				c.Cut == nil || c.Cut.FirstFlow == nil || *c.Cut.FirstFlow != 5<<32 ||
				*c.Cut != (Cut{ChunkBytes: 1 << 20, MaxChunks: 16, BaseLatPs: 6_800_000, IntraLatPs: 600_000, InterLatPs: 2_700_000, StepPacePs: 4_000_000, MaxRecvs: 8, StepTreeWhole: 1, NVLinkLockPs: 1_281_300_000, RingConnPs: 2_377_500_000, FirstFlow: c.Cut.FirstFlow}) {
				t.Fatalf("collective %+v", c)
			}
		case KindFlow:
			var f Flow
			must(t, r.Flow(&f))
			flows = append(flows, f)
		}
	}
	want := []string{KindTopology, KindGroup, KindCollective, KindFlow, KindFlow, KindFlow, KindFlow, "future-kind"}
	if !reflect.DeepEqual(kinds, want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
	if !reflect.DeepEqual(flows, sampleFlows()) {
		t.Fatalf("flows differ:\n%+v\n%+v", flows, sampleFlows())
	}
}

// A filter that forwards everything must reproduce the input byte for byte
// (same producer): records are copied raw and the trailer recounted.
func TestForwardIsIdentity(t *testing.T) {
	data := writeSample(t)
	r, err := NewReader(bytes.NewReader(data), "mem")
	must(t, err)
	var out bytes.Buffer
	w, err := NewWriter(&out, "test 0")
	must(t, err)
	for {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		must(t, w.Forward(r))
	}
	must(t, w.Close())
	if !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("forwarded stream differs (%d vs %d bytes)", out.Len(), len(data))
	}
}

// Records whose body is not read are skipped, and the trailer still checks.
func TestSkipBodies(t *testing.T) {
	r, err := NewReader(bytes.NewReader(writeSample(t)), "mem")
	must(t, err)
	n := 0
	for {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		n++
	}
	if n != 8 {
		t.Fatalf("read %d records, want 8", n)
	}
	if got := r.Counts(); got[KindFlow] != 4 || got[KindTopology] != 1 {
		t.Fatalf("counts %v", got)
	}
}

func readAll(data []byte) error {
	r, err := NewReader(bytes.NewReader(data), "in.fs")
	if err != nil {
		return err
	}
	var f Flow
	for {
		kind, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch kind {
		case KindFlow:
			err = r.Flow(&f)
		case KindTopology:
			_, err = r.Topology()
		case KindGroup:
			_, err = r.Group()
		case KindCollective:
			_, err = r.Collective()
		case KindNote:
			_, err = r.Note()
		case KindJob:
			_, err = r.Job()
		}
		if err != nil {
			return err
		}
	}
}

// rec builds a raw stream from msgpack values (each already a [kind, body]).
func rec(t *testing.T, values ...any) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	for _, v := range values {
		must(t, enc.Encode(v))
	}
	return buf.Bytes()
}

var hdr = []any{"header", map[string]any{"format": Format, "version": 1, "producer": "x"}}

func TestBadInput(t *testing.T) {
	good := writeSample(t)
	cases := []struct {
		name string
		data []byte
		want []string // substrings of the error
	}{
		{"empty", nil, []string{"in.fs: record 0", "empty input"}},
		{"garbage", []byte("hello world, not msgpack"), []string{"record 0", "not a fabricsim stream"}},
		{"truncated at a record boundary", good[:bytes.LastIndex(good, []byte("trailer"))-2], []string{"without a trailer"}},
		{"truncated mid record", good[:len(good)/2], []string{"unexpected end of input"}},
		{"unknown version", rec(t, []any{"header", map[string]any{"format": Format, "version": 9, "producer": "x"}}), []string{"field version", "unknown version 9"}},
		{"wrong format", rec(t, []any{"header", map[string]any{"format": "other", "version": 1}}), []string{"field format"}},
		{"no header", rec(t, []any{"flow", []any{}}), []string{"first record is \"flow\""}},
		{"flow with string deps", rec(t, hdr, []any{"flow", []any{1, 2, 3, 4, 5, "x", 0, 0, 1, "RING"}}),
			[]string{"record 1 (flow), field deps", "expected an array, found a string"}},
		{"flow too short", rec(t, hdr, []any{"flow", []any{1, 2, 3}}), []string{"record 1 (flow)", "3 fields"}},
		{"flow nil src", rec(t, hdr, []any{"flow", []any{1, 2, nil, 4, 5, []int{}, 0, 0, 1, "RING"}}), []string{"field src", "found nil"}},
		{"flow negative size", rec(t, hdr, []any{"flow", []any{1, 2, 3, 4, -5, []int{}, 0, 0, 1, "RING"}}), []string{"field size", "negative"}},
		{"topology bad link", rec(t, hdr, []any{"topology", map[string]any{"links": []any{[]any{0, 1, "fast", 1, 0, "nic"}}}}),
			[]string{"record 1 (topology), field links[0].bw_bps", "expected a number"}},
		{"trailer count mismatch", rec(t, hdr, []any{"trailer", map[string]any{"counts": map[string]int{"flow": 3}}}),
			[]string{"field counts.flow", "trailer says 3 flow records, the stream held 0"}},
		{"data after trailer", append(rec(t, hdr, []any{"trailer", map[string]any{"counts": map[string]int{}}}), 0x01),
			[]string{"data after the trailer"}},
		{"record not a pair", rec(t, hdr, []any{"flow"}), []string{"record 1", "1 elements"}},
		{"cut chunk negative", rec(t, hdr, []any{"collective", map[string]any{"id": 1, "cut": map[string]any{"chunk_bytes": -1}}}),
			[]string{"record 1 (collective), field cut.chunk_bytes", "-1 is out of range (0 to 1099511627776)"}},
		{"cut latency beyond a second", rec(t, hdr, []any{"collective", map[string]any{"id": 1, "cut": map[string]any{"future": "x", "inter_lat_ps": int64(2e12)}}}),
			[]string{"field cut.inter_lat_ps", "out of range"}},
		{"cut first flow negative", rec(t, hdr, []any{"collective", map[string]any{"id": 1, "cut": map[string]any{"first_flow": -1}}}),
			[]string{"field cut.first_flow", "out of range"}},
		{"fabric latency negative", rec(t, hdr, []any{"collective", map[string]any{"id": 1, "fabric_lat_ps": -1}}),
			[]string{"record 1 (collective), field fabric_lat_ps", "-1 is out of range"}},
		{"cut nvlink lock beyond 2^56", rec(t, hdr, []any{"collective", map[string]any{"id": 1, "cut": map[string]any{"nvlink_lock_ps": int64(1) << 57}}}),
			[]string{"field cut.nvlink_lock_ps", "out of range"}},
		{"cut ring conn beyond 2^56", rec(t, hdr, []any{"collective", map[string]any{"id": 1, "cut": map[string]any{"ring_conn_ps": int64(1) << 57}}}),
			[]string{"field cut.ring_conn_ps", "out of range"}},
		{"cut not a map", rec(t, hdr, []any{"collective", map[string]any{"id": 1, "cut": 5}}),
			[]string{"field cut", "expected a map"}},
		{"second topology", rec(t, hdr, []any{"topology", oneGPU}, []any{"group", map[string]any{}}, []any{"topology", oneGPU}),
			[]string{"in.fs: record 3 (topology)", "second topology record"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := readAll(c.data)
			if err == nil {
				t.Fatal("no error")
			}
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a *stream.Error", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

// DecodeRaw reads a body kept from Reader.Raw as the stream would have:
// same values, and errors located at the original record.
func TestDecodeRaw(t *testing.T) {
	r, err := NewReader(bytes.NewReader(writeSample(t)), "mem")
	must(t, err)
	_, err = r.Next()
	must(t, err)
	raw, err := r.Raw()
	must(t, err)
	top, err := DecodeRaw(KindTopology, raw, "mem", 5, (*Reader).Topology)
	must(t, err)
	if !reflect.DeepEqual(top, sampleTopology()) {
		t.Fatalf("topology differs:\n%+v\n%+v", top, sampleTopology())
	}

	bad := rec(t, map[string]any{"links": []any{[]any{0, 1, "fast", 1, 0, "nic"}}})
	for _, c := range []struct {
		name string
		raw  []byte
		want string
	}{
		{"bad field", bad, "in.fs: record 7 (topology), field links[0].bw_bps: expected a number, found a string"},
		{"truncated", raw[:len(raw)-3], "in.fs: record 7 (topology), field links[3].kind: unexpected end of input"},
		{"trailing data", append(rec(t, oneGPU), 0x01), "in.fs: record 7 (topology): data after the record body"},
	} {
		_, err := DecodeRaw(KindTopology, c.raw, "in.fs", 7, (*Reader).Topology)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}

// A topology record every consumer would trip on is refused by the reader,
// naming the field: GPU counts that do not fit the nodes (a -1 once
// indexed out of range in simccl-decompose), GPUs not first, links to
// nowhere, bandwidths that are not positive and finite.
func TestTopologyChecks(t *testing.T) {
	for _, c := range []struct {
		field  string
		mutate func(*Topology)
	}{
		{"field gpus:", func(t *Topology) { t.GPUs = -1 }},
		{"field gpus:", func(t *Topology) { t.GPUs = 1 << 30 }},
		{"field gpus_per_server:", func(t *Topology) { t.GPUsPerServer = 0 }},
		{"field gpus_per_server:", func(t *Topology) { t.GPUsPerServer = 3 }},
		{"field nodes[1].kind:", func(t *Topology) { t.Nodes[1].Kind = NodeSwitch }},
		{"field nodes[2].id:", func(t *Topology) { t.Nodes[2].ID = 7 }},
		{"field links[0].b:", func(t *Topology) { t.Links[0].B = 99 }},
		{"field links[1].b:", func(t *Topology) { t.Links[1].B = t.Links[1].A }},
		{"field links[2].bw_bps:", func(t *Topology) { t.Links[2].BWbps = math.NaN() }},
		{"field links[2].bw_bps:", func(t *Topology) { t.Links[2].BWbps = 0 }},
		{"field links[3].latency_ps:", func(t *Topology) { t.Links[3].LatencyPs = -1 }},
		{"field links[3].error_rate:", func(t *Topology) { t.Links[3].ErrorRate = 1 }},
	} {
		top := sampleTopology()
		c.mutate(top)
		var buf bytes.Buffer
		w, err := NewWriter(&buf, "test 0")
		must(t, err)
		must(t, w.Topology(top))
		must(t, w.Close())
		r, err := NewReader(&buf, "bad.stream")
		must(t, err)
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Topology(); err == nil || !strings.Contains(err.Error(), "bad.stream: record 1 (topology), "+c.field) {
			t.Errorf("%s: %v", c.field, err)
		}
	}
}
