package expand

import (
	"bytes"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/route"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// symStream is a collective-granularity stream on tp: groups 0 and 1 are
// the TP groups of servers 0 and 1 (siblings), groups 2..9 the DP pairs
// {k, 8+k}; each COLL node is a collective on a group, after its deps.
type symColl struct {
	group int64
	algo  string
	deps  []int64
	pxn   bool
}

func symSet(t *testing.T, tp *topo.Topology, tpGroups [][]int32, colls []symColl) *flowset.Set {
	t.Helper()
	var buf bytes.Buffer
	w, err := stream.NewWriter(&buf, "test")
	if err != nil {
		t.Fatal(err)
	}
	w.Topology(tp)
	w.Group(&stream.Group{ID: 0, Type: "TP", Ranks: tpGroups[0], Siblings: []int64{1}})
	w.Group(&stream.Group{ID: 1, Type: "TP", Ranks: tpGroups[1]})
	dp := &stream.Group{ID: 2, Type: "DP", Ranks: []int32{0, 8}}
	for k := int32(1); k < 8; k++ {
		dp.Siblings = append(dp.Siblings, int64(2+k))
	}
	w.Group(dp)
	for k := int32(1); k < 8; k++ {
		w.Group(&stream.Group{ID: int64(2 + k), Type: "DP", Ranks: []int32{k, 8 + k}})
	}
	for i, c := range colls {
		w.Collective(&stream.Collective{ID: int64(i), Op: "allreduce", Size: 1 << 20, Group: c.group, Algorithm: c.algo,
			Protocol: "simple", PredictedPs: 1e6, Layer: -1, Microbatch: -1, Stage: -1, PXN: c.pxn})
	}
	for i, c := range colls {
		w.Flow(&stream.Flow{ID: int64(i), Collective: int64(i), Src: 0, Dst: 0, Size: 1 << 20, Deps: c.deps, Channel: -1,
			ChunkCount: 1, ConnType: stream.ConnColl, DelayPs: 1e6})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := stream.NewReader(bytes.NewReader(buf.Bytes()), "test")
	if err != nil {
		t.Fatal(err)
	}
	in, err := flowset.Read(r)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func marks(t *testing.T, in *flowset.Set, rules ...SymmetryRules) []bool {
	t.Helper()
	r, err := route.New(in.Topology)
	if err != nil {
		t.Fatal(err)
	}
	s := FindSymmetry(in, r, append(rules, SymmetryRules{})[0])
	out := make([]bool, in.DAG.Len())
	n := 0
	for i := range out {
		out[i] = s.Alone(int32(i))
		if out[i] {
			n++
		}
	}
	if s != nil && s.Nodes != n {
		t.Errorf("Nodes %d, %d marked", s.Nodes, n)
	}
	return out
}

func TestFindSymmetry(t *testing.T) {
	gen := func(p topo.Params) *topo.Topology {
		tp, _, err := topo.Generate(p)
		if err != nil {
			t.Fatal(err)
		}
		return tp
	}
	servers := [][]int32{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}}
	tp := gen(topo.Params{Family: topo.SpectrumX, GPUs: 16})
	// TP, then TP and a DP AllReduce side by side, then TP after both:
	// the DP one moves nothing inside a server, so the TP ones stay in
	// order on every server.
	ordered := []symColl{{0, "nvls", nil, false}, {0, "ring", []int64{0}, false}, {2, "ring", []int64{0}, false}, {0, "nvls", []int64{1, 2}, false}}
	for _, c := range []struct {
		what   string
		tp     *topo.Topology
		groups [][]int32
		colls  []symColl
		want   []bool
	}{
		{"TP groups in order", tp, servers, ordered, []bool{true, true, false, true}},
		// The last TP node does not wait on the one before: they could
		// overlap on the NVLinks, and no node of those servers is marked.
		{"TP groups overlapping", tp, servers, []symColl{{0, "nvls", nil, false}, {0, "ring", []int64{0}, false}, {0, "ring", []int64{0}, false}}, []bool{false, false, false}},
		// The DP ring beside the second TP node relays through other GPUs
		// of its servers (PXN), or its algorithm does: they could share
		// the TP groups' NVLinks.
		{"PXN beside TP", tp, servers, []symColl{{0, "nvls", nil, false}, {0, "ring", []int64{0}, false}, {2, "ring", []int64{0}, true}, {0, "nvls", []int64{1, 2}, false}}, make([]bool, 4)},
		{"PXN AllToAll beside TP", tp, servers, []symColl{{0, "nvls", nil, false}, {0, "ring", []int64{0}, false}, {2, "pxn", []int64{0}, false}, {0, "nvls", []int64{1, 2}, false}}, make([]bool, 4)},
		// Two NVSwitches: a pair's route depends on its flow's hash.
		{"two NVSwitches", gen(topo.Params{Family: topo.SpectrumX, GPUs: 16, NVSwitchesPerServer: 2}), servers, ordered, make([]bool, 4)},
		// A group across both servers (its pairs leave their server).
		{"groups across servers", tp, [][]int32{{0, 1, 2, 3, 8, 9, 10, 11}, {4, 5, 6, 7, 12, 13, 14, 15}}, ordered, make([]bool, 4)},
		// Ranks listed in another order: the same links, position by
		// position.
		{"ranks reordered", tp, [][]int32{{0, 1, 2, 3, 4, 5, 6, 7}, {15, 14, 13, 12, 11, 10, 9, 8}}, ordered, []bool{true, true, false, true}},
	} {
		got := marks(t, symSet(t, c.tp, c.groups, c.colls))
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: marks %v, want %v", c.what, got, c.want)
				break
			}
		}
	}

	// Server 1's NVLinks at half the bandwidth: its group would not run as
	// server 0's does.
	slow := gen(topo.Params{Family: topo.SpectrumX, GPUs: 16})
	for i := range slow.Links {
		l := &slow.Links[i]
		if slow.Nodes[l.A].Server == 1 && slow.Nodes[l.B].Server == 1 {
			l.BWbps /= 2
		}
	}
	if got := marks(t, symSet(t, slow, servers, ordered)); got[0] || got[1] || got[3] {
		t.Errorf("unequal servers: marks %v", got)
	}

	// A model's own rules: a link it cannot mirror (one with random loss,
	// say), and two groups sharing a server's NVSwitch when it models the
	// switch's buffer.
	if tp.Links[0].Kind != stream.LinkNVLink || tp.Nodes[tp.Links[0].A].Server != 0 {
		t.Fatalf("link 0 is %s, not an NVLink of server 0", tp.Links[0].Kind)
	}
	lossy := route.Directed(tp, 0, tp.Links[0].A)
	if got := marks(t, symSet(t, tp, servers, ordered), SymmetryRules{LinkOK: func(d route.DirLink) bool { return d != lossy }}); got[0] || got[1] || got[3] {
		t.Errorf("a lossy NVLink: marks %v", got)
	}
	halves := [][]int32{{0, 1, 2, 3}, {4, 5, 6, 7}}
	if got := marks(t, symSet(t, tp, halves, ordered)); !got[0] {
		t.Errorf("two groups in server 0, their own NVLinks: marks %v", got)
	}
	if got := marks(t, symSet(t, tp, halves, ordered), SymmetryRules{WholeServers: true}); got[0] || got[1] || got[3] {
		t.Errorf("two groups in server 0 sharing its NVSwitch: marks %v", got)
	}
}
