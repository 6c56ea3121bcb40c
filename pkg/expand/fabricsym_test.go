package expand

import (
	"bytes"
	"slices"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/route"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// fabNode is a node of fabSet's stream: a collective on groups (nil: a
// transfer from src to dst), after deps.
type fabNode struct {
	groups   [][]int32
	algo     string
	pxn      bool
	src, dst int32
	deps     []int64
}

func fabSet(t *testing.T, tp *topo.Topology, nodes []fabNode) *flowset.Set {
	t.Helper()
	var buf bytes.Buffer
	w, err := stream.NewWriter(&buf, "test")
	if err != nil {
		t.Fatal(err)
	}
	w.Topology(tp)
	id := int64(0)
	first := map[int]int64{}
	for i, n := range nodes {
		if n.groups == nil {
			continue
		}
		first[i] = id
		g := &stream.Group{ID: id, Type: "EP", Ranks: n.groups[0]}
		for k := range n.groups[1:] {
			g.Siblings = append(g.Siblings, id+1+int64(k))
		}
		w.Group(g)
		for k, ranks := range n.groups[1:] {
			w.Group(&stream.Group{ID: id + 1 + int64(k), Type: "EP", Ranks: ranks})
		}
		id += int64(len(n.groups))
		w.Collective(&stream.Collective{ID: int64(i), Op: "alltoall", Size: 1 << 20, Group: first[i], Algorithm: n.algo, PXN: n.pxn,
			Protocol: "simple", PredictedPs: 1e6, Layer: -1, Microbatch: -1, Stage: -1})
	}
	for i, n := range nodes {
		f := &stream.Flow{ID: int64(i), Src: n.src, Dst: n.dst, Size: 1 << 20, Deps: n.deps, Channel: -1, ChunkCount: 1, ConnType: stream.ConnP2P}
		if n.groups != nil {
			f.Collective, f.Src, f.Dst, f.ConnType, f.DelayPs = int64(i), 0, 0, stream.ConnColl, 1e6
		}
		w.Flow(f)
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

// On Spectrum-X each rail's GPUs meet at a leaf of their own: AllToAll
// groups on one rail each (GPU k of every server) have one route per pair,
// GPU to leaf to GPU, on links no other group crosses. Such a node's first
// group stands for the rest (the model then times them all by it; the
// traces are compared with --no-symmetry in ./tests). Groups across rails
// cross the spines (a choice per flow) and run in full; so do they on a
// fat-tree. A transfer from or to a group's GPU that may run beside the
// node makes that group run for itself; one the node waits on does not.
func TestFabricSymmetry(t *testing.T) {
	gen := func(p topo.Params) *topo.Topology {
		tp, _, err := topo.Generate(p)
		if err != nil {
			t.Fatal(err)
		}
		return tp
	}
	sx := gen(topo.Params{Family: topo.SpectrumX, GPUs: 32})
	ft := gen(topo.Params{Family: topo.FatTree, GPUs: 32, K: 8})
	var rails, across, pairs [][]int32
	for k := int32(0); k < 8; k++ {
		rails = append(rails, []int32{k, 8 + k, 16 + k, 24 + k})
		across = append(across, []int32{k, 8 + (k+1)%8, 16 + (k+2)%8, 24 + (k+3)%8})
		pairs = append(pairs, []int32{2 * k, 2*k + 1}, []int32{16 + 2*k, 16 + 2*k + 1})
	}
	type want struct {
		alone, fabric bool
		run           []int32
		rep           int32
	}
	for _, c := range []struct {
		what  string
		tp    *topo.Topology
		nodes []fabNode
		want  []want // per node
	}{
		{"rails", sx, []fabNode{{groups: rails, algo: "direct"}}, []want{{true, true, nil, 0}}},
		// A ring under PXN relays hops between servers through other
		// GPUs; inside a server it has none to relay (TP pairs).
		{"ring on rails, PXN", sx, []fabNode{{groups: rails, algo: "ring", pxn: true}}, []want{{}}},
		{"ring on rails", sx, []fabNode{{groups: rails, algo: "ring"}}, []want{{true, true, nil, 0}}},
		// (A transfer inside server 0 keeps symmetry.go's servers
		// out; the pair on GPU 0 and 1 runs for itself.)
		{"TP pairs, PXN", sx, []fabNode{{src: 0, dst: 1}, {groups: pairs, algo: "ring", pxn: true}}, []want{{}, {true, true, []int32{0, 1}, 1}}},
		{"rails, PXN", sx, []fabNode{{groups: rails, algo: "pxn"}}, []want{{true, true, nil, 0}}},
		{"across rails", sx, []fabNode{{groups: across, algo: "direct"}}, []want{{}}},
		{"fat-tree", ft, []fabNode{{groups: rails, algo: "direct"}}, []want{{}}},
		// GPU 9 (group 1) and GPU 2 (group 2) send beside the node.
		{"a transfer beside", sx, []fabNode{{src: 9, dst: 2}, {groups: rails, algo: "direct"}}, []want{{}, {true, true, []int32{0, 1, 2}, 0}}},
		// Groups 0 and 1: the first clean group, 2, stands for the rest.
		{"a transfer beside group 0", sx, []fabNode{{groups: rails, algo: "direct"}, {src: 0, dst: 9}}, []want{{true, true, []int32{0, 1, 2}, 2}, {}}},
		{"a transfer before", sx, []fabNode{{src: 9, dst: 2}, {groups: rails, algo: "direct", deps: []int64{0}}}, []want{{}, {true, true, nil, 0}}},
		// A transfer beside two collectives in order overlaps the first
		// too, though it left the GPUs' latest touchers (a pipeline
		// transfer beside a stage's EP AllToAll and the TP collective
		// after it): groups 0 and 1 run for themselves in both.
		{"a transfer beside two in order", sx, []fabNode{{groups: rails, algo: "direct"}, {groups: rails, algo: "direct", deps: []int64{0}}, {src: 0, dst: 9}},
			[]want{{true, true, []int32{0, 1, 2}, 2}, {true, true, []int32{0, 1, 2}, 2}, {}}},
		{"a transfer after two in order", sx, []fabNode{{groups: rails, algo: "direct"}, {groups: rails, algo: "direct", deps: []int64{0}}, {src: 0, dst: 9, deps: []int64{1}}},
			[]want{{true, true, nil, 0}, {true, true, nil, 0}, {}}},
		// Two collectives on the same GPUs side by side: neither is alone.
		{"two side by side", sx, []fabNode{{groups: rails, algo: "direct"}, {groups: rails, algo: "direct"}}, []want{{}, {}}},
		{"two in order", sx, []fabNode{{groups: rails, algo: "direct"}, {groups: rails, algo: "direct", deps: []int64{0}}}, []want{{true, true, nil, 0}, {true, true, nil, 0}}},
		// Only group 7 is clean: nothing to stand for.
		{"one clean group", sx, []fabNode{{groups: rails, algo: "direct"}, {src: 0, dst: 9}, {src: 18, dst: 27}, {src: 4, dst: 13}, {src: 22, dst: 30}}, []want{{}, {}, {}, {}, {}}},
	} {
		in := fabSet(t, c.tp, c.nodes)
		r, err := route.New(in.Topology)
		if err != nil {
			t.Fatal(err)
		}
		s := FindSymmetry(in, r, SymmetryRules{Fabric: true})
		for i, w := range c.want {
			run, rep := s.Run(int32(i))
			if s.Alone(int32(i)) != w.alone || s.Fabric(int32(i)) != w.fabric || !slices.Equal(run, w.run) || rep != w.rep {
				t.Errorf("%s: node %d: alone %v fabric %v run %v rep %d, want %v", c.what, i, s.Alone(int32(i)), s.Fabric(int32(i)), run, rep, w)
			}
		}
		// Without the rule, no group across servers stands for others.
		if s := FindSymmetry(in, r, SymmetryRules{}); s != nil {
			t.Errorf("%s: marked %d nodes without SymmetryRules.Fabric", c.what, s.Nodes)
		}
	}
}

// PairsOf under PXN: inside a server every pair, across servers the
// destination's proxy only (the sender's server's rank at its place).
func TestPairsOf(t *testing.T) {
	tp, _, err := topo.Generate(topo.Params{Family: topo.SpectrumX, GPUs: 16})
	if err != nil {
		t.Fatal(err)
	}
	g := []int32{0, 2, 8, 10} // two ranks in each of two servers
	got := PairsOf(tp, g, true)
	want := []bool{
		false, true, true, false, // 0 -> 2 (same server), 0 -> 8 (0 is 8's proxy)
		true, false, false, true, // 2 -> 0, 2 -> 10
		true, false, false, true, // 8 -> 0, 8 -> 10
		false, true, true, false, // 10 -> 2, 10 -> 8
	}
	if !slices.Equal(got, want) {
		t.Errorf("PairsOf(%v, pxn) = %v, want %v", g, got, want)
	}
	for k, ok := range PairsOf(tp, g, false) {
		if !ok {
			t.Errorf("PairsOf without PXN: pair %d left out", k)
		}
	}
}
