package flowset

import (
	"bytes"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// encode writes a stream of a 16-GPU Spectrum-X fabric with one TP group
// of 8, one collective and flows.
func encode(t *testing.T, flows []stream.Flow) []byte {
	t.Helper()
	tp, _, err := topo.Generate(topo.Params{Family: topo.SpectrumX, GPUs: 16})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := stream.NewWriter(&buf, "test")
	if err != nil {
		t.Fatal(err)
	}
	w.Topology(tp)
	w.Group(&stream.Group{ID: 0, Type: "TP", Ranks: []int32{0, 1, 2, 3, 4, 5, 6, 7}})
	w.Collective(&stream.Collective{ID: 0, Op: "allreduce", Size: 1 << 20, Group: 0, Algorithm: "ring", Protocol: "simple"})
	for i := range flows {
		w.Flow(&flows[i])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readSet(data []byte) (*Set, error) {
	r, err := stream.NewReader(bytes.NewReader(data), "test.stream")
	if err != nil {
		return nil, err
	}
	return Read(r)
}

// A transfer, a delay node, a join and a transfer to the next server,
// each waiting for the one before.
func chain() []stream.Flow {
	return []stream.Flow{
		{ID: 0, Collective: 0, Src: 0, Dst: 1, Size: 1000, Channel: 0, ChunkCount: 1, ConnType: stream.ConnRing, DelayPs: 2000},
		{ID: 1, Collective: -1, Src: 1, Dst: 1, Deps: []int64{0}, Channel: -1, ChunkCount: 1, ConnType: stream.ConnDelay, DelayPs: 5000},
		{ID: 2, Collective: -1, Src: 1, Dst: 1, Deps: []int64{0, 1}, Channel: -1, ChunkCount: 1, ConnType: stream.ConnDelay},
		{ID: 3, Collective: -1, Src: 1, Dst: 8, Size: 4096, Deps: []int64{2}, Channel: 0, ChunkCount: 1, ConnType: stream.ConnNet},
	}
}

func TestReadKeepsTheStream(t *testing.T) {
	in, err := readSet(encode(t, chain()))
	if err != nil {
		t.Fatal(err)
	}
	if in.Flows() != 4 {
		t.Fatalf("%d flows, want 4", in.Flows())
	}
	// Delay nodes carry their delay in Size; only transfers count as bytes.
	if got := in.TotalBytes(); got != 5096 {
		t.Errorf("total %d bytes, want 1000 + 4096", got)
	}
	for i, want := range []uint8{Transfer, Delay, Join, Transfer} {
		if k := in.Flow(int32(i)).Kind; k != want {
			t.Errorf("flow %d: kind %d, want %d", i, k, want)
		}
	}
	if f := in.Flow(0); f.Lat != 2000 || f.Size != 1000 || f.Src != 0 || f.Dst != 1 {
		t.Errorf("flow 0 read as %+v", *f)
	}
	if f := in.Flow(1); f.Size != 5000 {
		t.Errorf("delay node: %d ps, want 5000", f.Size)
	}
	if name := in.ConnName(in.Flow(3)); name != stream.ConnNet {
		t.Errorf("flow 3: connection %q, want NET", name)
	}

	// The DAG releases the chain one flow at a time.
	if r := in.DAG.Ready(); !slices.Equal(r, []int32{0}) {
		t.Fatalf("ready at start: %v, want [0]", r)
	}
	var out []int32
	run := in.DAG.NewRun()
	for i := int32(0); i < 3; i++ {
		out = run.Complete(i, out[:0])
		if !slices.Equal(out, []int32{i + 1}) {
			t.Fatalf("completing %d released %v, want [%d]", i, out, i+1)
		}
	}

	// A row carries the collective's columns; a delay's ideal is its time.
	rows := in.Rows()
	r := rows.Row(0, Result{Start: 10_000, End: 30_000, Ideal: 15_000})
	if r.FlowID != 0 || r.StartNs != 10 || r.EndNs != 30 || r.FctNs != 20 || r.IdealFctNs != 15 ||
		r.SizeBytes != 1000 || r.Op != "allreduce" || r.Algorithm != "ring" || r.GroupType != "TP" || r.NRanks != 8 || r.CollSizeBytes != 1<<20 {
		t.Errorf("row of flow 0: %+v", r)
	}
	if d := rows.Row(1, Result{Start: 30_000, End: 35_000}); d.IdealFctNs != 5 || d.SizeBytes != 0 {
		t.Errorf("row of the delay node: ideal %d ns, size %d, want 5 and 0", d.IdealFctNs, d.SizeBytes)
	}
	if in.RefuseColl("x") != nil || in.RefuseEmpty("x") != nil {
		t.Error("a flow stream refused")
	}
}

// The flow table's record is 56 bytes (the comment on Set says so, and the
// backends' 200-400 bytes per flow budgets include it; a run's release
// times are the backend's, 8 bytes a flow): a field added to Flow must be
// paid for knowingly.
func TestFlowRecordSize(t *testing.T) {
	if s := unsafe.Sizeof(Flow{}); s != 56 {
		t.Errorf("a flow record takes %d bytes, not 56", s)
	}
}

// Bad flows are refused naming the record (the header, topology, group
// and collective come first: records 0-3) and the field.
func TestReadRefusesBadFlows(t *testing.T) {
	for _, c := range []struct {
		name   string
		mutate func(f []stream.Flow) []stream.Flow
		field  string
		record string
	}{
		{"dep on a later flow", func(f []stream.Flow) []stream.Flow { f[1].Deps = []int64{2}; return f }, "deps", "record 5"},
		{"dep on a missing flow", func(f []stream.Flow) []stream.Flow { f[3].Deps = []int64{99}; return f }, "deps", "record 7"},
		{"src beyond the GPUs", func(f []stream.Flow) []stream.Flow { f[3].Src = 10000; return f }, "src", "record 7"},
		{"send to itself", func(f []stream.Flow) []stream.Flow { f[0].Dst = 0; return f }, "dst", "record 4"},
		{"sized delay", func(f []stream.Flow) []stream.Flow { f[1].Size = 7; return f }, "size", "record 5"},
		{"unknown connection", func(f []stream.Flow) []stream.Flow { f[3].ConnType = "QUIC"; return f }, "conn_type", "record 7"},
		{"duplicate id", func(f []stream.Flow) []stream.Flow { f[3].ID = 0; f[3].Deps = nil; return f }, "id", "record 7"},
	} {
		_, err := readSet(encode(t, c.mutate(chain())))
		var se *stream.Error
		if err == nil || !errors.As(err, &se) {
			t.Errorf("%s: error %v, want a stream.Error", c.name, err)
			continue
		}
		msg := err.Error()
		if se.Field != c.field || !strings.Contains(msg, "test.stream") || !strings.Contains(msg, c.record) || strings.Contains(msg, "\n") {
			t.Errorf("%s: %q (field %q), want one line naming test.stream, %s and field %s", c.name, msg, se.Field, c.record, c.field)
		}
	}
	if in, err := readSet(encode(t, nil)); err != nil || in.RefuseEmpty("flowsim-x") == nil {
		t.Errorf("a stream without flows: read error %v, and it was not refused", err)
	}
}

// Each source numbers its connections (collective, destination, channel)
// 0, 1, ... in stream order, wrapping at 256, whether its sources are
// numbered on one core or split between several.
func TestAssignPortsSplit(t *testing.T) {
	var flows []stream.Flow
	type conn struct{ src, dst, ch int32 }
	want := map[int64]uint8{}
	seen := map[conn]int{}
	perSrc := map[int32]int{}
	for i := range 12000 {
		src := int32(i*7) % 16
		dst := (1-src/8)*8 + int32(i/16)%8 // always the other server
		ch := int32(i*13) % 41
		flows = append(flows, stream.Flow{ID: int64(i), Collective: 0, Src: src, Dst: dst, Size: 4096, Channel: ch, ChunkCount: 1, ConnType: stream.ConnNet})
		k := conn{src, dst, ch}
		if _, ok := seen[k]; !ok {
			seen[k] = perSrc[src]
			perSrc[src]++
		}
		want[int64(i)] = uint8(seen[k])
	}
	if perSrc[0] <= 256 {
		t.Fatalf("source 0 has %d connections: the test should wrap past 256", perSrc[0])
	}
	data := encode(t, flows)
	defer func(n, p int) { parallelPortFlows = n; runtime.GOMAXPROCS(p) }(parallelPortFlows, runtime.GOMAXPROCS(4))
	for _, limit := range []int{1 << 30, 0} {
		parallelPortFlows = limit
		in, err := readSet(data)
		if err != nil {
			t.Fatal(err)
		}
		for i := int32(0); i < int32(in.Flows()); i++ {
			f := in.Flow(i)
			if f.Port != want[f.ID] {
				t.Fatalf("split from %d flows: flow %d (%d->%d ch %d) has port %d, want %d", limit, f.ID, f.Src, f.Dst, f.Channel, f.Port, want[f.ID])
			}
		}
	}
}
