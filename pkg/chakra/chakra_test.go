package chakra

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/chakra/etpb"
)

const testdata = "../../tests/testdata/chakra"

// records counts a file's length-delimited records by walking the varint
// frames alone, without protobuf: an independent count.
func records(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 1 && b[0] == 0x1f && b[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for len(b) > 0 {
		l, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < l {
			t.Fatalf("%s: bad frame after %d records", path, n)
		}
		b = b[k+int(l):]
		n++
	}
	return n
}

// Chakra's feeder test trace (gzipped here): 3,665 records, the
// GlobalMetadata and 3,664 nodes, 3,643 COMP and 21 COMM_COLL.
func TestFeederTrace(t *testing.T) {
	p := filepath.Join(testdata, "chakra.0.et")
	if n := records(t, p); n != 3665 {
		t.Fatalf("%d records by their frames, want 3665", n)
	}
	tr, err := ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[Kind]int{}
	for _, n := range tr.Nodes {
		kinds[n.Kind]++
	}
	if len(tr.Nodes) != 3664 || kinds[Comp] != 3643 || kinds[Coll] != 21 {
		t.Fatalf("%d nodes, %v; want 3664: 3643 COMP, 21 COMM_COLL", len(tr.Nodes), kinds)
	}
}

// ASTRA-sim's microbenchmarks: one COMM_COLL node per rank of the
// collective the folder names, of 1 MiB, on every rank.
func TestMicrobenchmarks(t *testing.T) {
	want := map[string]etpb.CollectiveCommType{"all_reduce": etpb.CollectiveCommType_ALL_REDUCE, "all_gather": etpb.CollectiveCommType_ALL_GATHER,
		"all_to_all": etpb.CollectiveCommType_ALL_TO_ALL, "reduce_scatter": etpb.CollectiveCommType_REDUCE_SCATTER}
	for op, ct := range want {
		for _, n := range []int{4, 8, 16} {
			dir := filepath.Join(testdata, "microbenchmarks", op, strconv.Itoa(n)+"npus_1MB")
			trs, err := ReadPrefix(filepath.Join(dir, op))
			if err != nil {
				t.Fatal(err)
			}
			if len(trs) != n {
				t.Fatalf("%s: %d ranks, want %d", dir, len(trs), n)
			}
			for _, tr := range trs {
				if len(tr.Nodes) != 1 || tr.Nodes[0].Kind != Coll || tr.Nodes[0].CommType != ct || tr.Nodes[0].CommSize != 1<<20 {
					t.Fatalf("%s: %+v", tr.File, tr.Nodes)
				}
			}
		}
	}
}

// Every integer type of protobuf carries comm_size (astra-sim #224).
func TestIntegerVariants(t *testing.T) {
	const v = 1 << 20
	for name, a := range map[string]*etpb.AttributeProto{
		"int32": {Value: &etpb.AttributeProto_Int32Val{Int32Val: v}}, "int64": {Value: &etpb.AttributeProto_Int64Val{Int64Val: v}},
		"uint32": {Value: &etpb.AttributeProto_Uint32Val{Uint32Val: v}}, "uint64": {Value: &etpb.AttributeProto_Uint64Val{Uint64Val: v}},
		"sint32": {Value: &etpb.AttributeProto_Sint32Val{Sint32Val: v}}, "sint64": {Value: &etpb.AttributeProto_Sint64Val{Sint64Val: v}},
		"fixed32": {Value: &etpb.AttributeProto_Fixed32Val{Fixed32Val: v}}, "fixed64": {Value: &etpb.AttributeProto_Fixed64Val{Fixed64Val: v}},
		"sfixed32": {Value: &etpb.AttributeProto_Sfixed32Val{Sfixed32Val: v}}, "sfixed64": {Value: &etpb.AttributeProto_Sfixed64Val{Sfixed64Val: v}},
	} {
		a.Name = "comm_size"
		var buf bytes.Buffer
		w := NewWriter(&buf, "0.0.4")
		w.Node(&etpb.Node{Id: 7, Type: etpb.NodeType_COMM_COLL_NODE, Attr: []*etpb.AttributeProto{
			Int("comm_type", int64(etpb.CollectiveCommType_ALL_GATHER)), a}})
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		tr, err := Read(&buf, name)
		if err != nil {
			t.Fatal(err)
		}
		if got := tr.Nodes[0].CommSize; got != v {
			t.Errorf("%s comm_size read as %d, want %d", name, got, v)
		}
	}
}

// Bad input: one error naming the file, the record (and node id) and
// the field.
func TestBadInput(t *testing.T) {
	good, err := os.ReadFile(filepath.Join(testdata, "custom_ring_allreduce_8npus_1MB", "custom_allreduce.0.et"))
	if err != nil {
		t.Fatal(err)
	}
	node := func(n *etpb.Node) []byte {
		var buf bytes.Buffer
		w := NewWriter(&buf, "0.0.4")
		w.Node(&etpb.Node{Id: 1, Type: etpb.NodeType_COMP_NODE, DurationMicros: 3})
		w.Node(n)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	for _, tc := range []struct {
		name string
		data []byte
		want []string
	}{
		{"truncated", good[:len(good)-5], []string{"x.et: record 35", "field Node", "truncated"}},
		{"unknown type", node(&etpb.Node{Id: 9, Type: 42}), []string{"record 2 (node id 9)", "field type", "node type 42"}},
		{"string size", node(&etpb.Node{Id: 9, Type: etpb.NodeType_COMM_COLL_NODE, Attr: []*etpb.AttributeProto{Int("comm_type", 0), Str("comm_size", "big")}}),
			[]string{"record 2 (node id 9)", "field attr comm_size", "expected an integer, found string_val"}},
		{"no comm_type", node(&etpb.Node{Id: 9, Type: etpb.NodeType_COMM_COLL_NODE}), []string{"record 2 (node id 9)", "field attr comm_type", "missing"}},
		{"no comm_dst", node(&etpb.Node{Id: 9, Type: etpb.NodeType_COMM_SEND_NODE}), []string{"record 2 (node id 9)", "field attr comm_dst"}},
		{"huge uint64", node(&etpb.Node{Id: 9, Type: etpb.NodeType_COMP_NODE, Attr: []*etpb.AttributeProto{Uint("num_ops", 1<<63)}}), []string{"field attr num_ops", "beyond int64"}},
		{"duplicate id", node(&etpb.Node{Id: 1, Type: etpb.NodeType_COMP_NODE}), []string{"record 2 (node id 1)", "field id", "first at record 1"}},
		{"empty", nil, []string{"x.et: empty file"}},
		{"bad gzip", []byte{0x1f, 0x8b, 1}, []string{"x.et: gzip"}},
	} {
		_, err := Read(bytes.NewReader(tc.data), "x.et")
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%s: %v, want a chakra.Error", tc.name, err)
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") {
			t.Errorf("%s: more than one line: %q", tc.name, msg)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q lacks %q", tc.name, msg, w)
			}
		}
	}
}

// A gzipped trace reads as the plain one.
func TestGzip(t *testing.T) {
	p := filepath.Join(testdata, "custom_ring_allreduce_8npus_1MB", "custom_allreduce.3.et")
	plain, err := ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(p)
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(raw)
	zw.Close()
	gz, err := Read(&z, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(gz.Nodes) != 35 || len(plain.Nodes) != 35 {
		t.Fatalf("%d and %d nodes, want 35", len(gz.Nodes), len(plain.Nodes))
	}
	for i := range gz.Nodes {
		if gz.Nodes[i].ID != plain.Nodes[i].ID || gz.Nodes[i].CommSize != plain.Nodes[i].CommSize {
			t.Fatalf("node %d differs", i)
		}
	}
}

func TestGroups(t *testing.T) {
	g, err := ReadGroups(strings.NewReader(`{"10":[4,5],"2":[0,1,2,3]}`), "g.json", 6)
	if err != nil {
		t.Fatal(err)
	}
	if i, ok := g.Lookup("2"); !ok || i != 0 || g.Names[1] != "10" {
		t.Fatalf("names %v", g.Names)
	}
	for in, want := range map[string]string{
		`{"1":[0,9]}`: `g.json: group "1", ranks[1]: rank 9`, `{"1":[0,0]}`: `ranks[1]: rank 0 twice`, `[1]`: `g.json: not a JSON object`,
	} {
		if _, err := ReadGroups(strings.NewReader(in), "g.json", 6); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}

// FuzzRead: no input makes the reader panic, and every error it returns
// is a chakra.Error naming file, record and field.
func FuzzRead(f *testing.F) {
	for _, p := range []string{"custom_ring_allreduce_8npus_1MB/custom_allreduce.0.et", "microbenchmarks/all_to_all/4npus_1MB/all_to_all.1.et",
		"microbenchmarks/all_reduce/16npus_1MB/all_reduce.3.et"} {
		b, err := os.ReadFile(filepath.Join(testdata, p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{0x1f, 0x8b})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := Read(bufio.NewReader(bytes.NewReader(b)), "fuzz.et")
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not a chakra.Error", err)
			}
			return
		}
		for _, n := range tr.Nodes {
			_ = n.Deps()
			_ = n.DurationPicos()
		}
	})
}
