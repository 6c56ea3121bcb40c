package analytical

import (
	"fmt"
	"math"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/collective"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/flowset"
)

// A paced AllToAll's pieces are hashed anew, each taking the longer of
// its pace and its bytes on its own path: hand-counted draws of two
// connections of one path length (ps per byte beyond the NICs).
// Draw 1 puts one on a free path (0) and one behind a collision (4),
// draw 2 both at 2: extra is the mean of the class means, (2+2)/2 = 2.
// Paced at 3, draw 1's pieces take 3 and 4 (mean 3.5), draw 2's 3 and 3:
// 3.25, where max(pace, extra) said 3.
func TestPacedExtraPieceByPiece(t *testing.T) {
	d := &demand{draws: []pieceDraw{
		{conns: []pieceConn{{b: 0, x: 1, hops: 4}, {b: 4, x: 1, hops: 4}}},
		{conns: []pieceConn{{b: 2, x: 1, hops: 4}, {b: 2, x: 1, hops: 4}}},
	}}
	var cl classSums
	for _, c := range []struct{ pace, want float64 }{{0, 2}, {3, 3.25}, {1, 2.25}, {5, 5}} {
		if got := d.pacedExtra(c.pace, &cl); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("pace %g: %g ps per byte, want %g", c.pace, got, c.want)
		}
	}
	// The slowest class paces the collective: a longer path whose one
	// connection waits 6 beats the other class's mean; so does a busier
	// NIC port (7), which a connection keeps from piece to piece.
	d = &demand{draws: []pieceDraw{{conns: []pieceConn{{b: 0, x: 3, hops: 4}, {b: 6, x: 1, hops: 6}}}}}
	if got := d.pacedExtra(1, &cl); got != 6 {
		t.Errorf("two classes: %g, want 6", got)
	}
	d.draws[0].ports = 7
	if got := d.pacedExtra(1.5, &cl); got != 7 {
		t.Errorf("busier port: %g, want 7", got)
	}
}

// The slowest connection ends a paced AllToAll (pieceDraw.tailCost): each
// of its pieces hashed anew, its pace is the mean of theirs, and the
// slowest of a class's exceeds the class mean by the draw's worst
// connection's excess over sqrt(pieces). By hand, one draw of 4
// connections at 0, 0, 0 and 8 (mean 2, worst 8): 16 pieces 2 + 6/4 =
// 3.5, 4 pieces 2 + 6/2 = 5, one piece the worst (8), no pieces counted
// the mean (2); paced at 1 (1, 1, 1, 8: mean 2.75) in 4 pieces 2.75 +
// 5.25/2 = 5.375.
func TestPacedExtraSlowestConnection(t *testing.T) {
	var cl classSums
	for _, c := range []struct {
		pieces     int
		pace, want float64
	}{{16, 0, 3.5}, {4, 0, 5}, {1, 0, 8}, {0, 0, 2}, {4, 1, 5.375}} {
		d := &demand{pieces: c.pieces, draws: []pieceDraw{{conns: []pieceConn{{b: 0, x: 1, hops: 4}, {b: 0, x: 1, hops: 4}, {b: 0, x: 1, hops: 4}, {b: 8, x: 1, hops: 4}}}}}
		if got := d.pacedExtra(c.pace, &cl); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%d pieces, pace %g: %g ps per byte, want %g", c.pieces, c.pace, got, c.want)
		}
	}
}

// A paced AllToAll's connections start when their proxies post them
// (stagger): 2 servers x 2 GPUs, direct, one channel, 10 us an op. Each
// rank's connection to its round-2 peer is posted after 1 op, to its
// round-3 peer after 3 (collective.A2AStaggerOf). Per byte of the 4 MiB
// size, the 4 connections posted at 3 take 1 ps on their NICs and, ECMP
// draw 1, 2 on an uplink two of them collide on (draw 2: no collision);
// with the 4 posted at 1 as well, 2 on the NICs and the uplinks. One
// piece each: the NICs' chain is max(30 us + 4 MiB x 1, 10 us + 4 MiB x
// 2) = 34.194 us, draw 1's 30 us + 4 MiB x 2 = 38.389 us, draw 2's the
// NICs': the fabric adds (38.389 - 34.194) / 2 = 2.097 us to the delay
// (50 us), where the node took its delay alone (paced beside its bytes).
// At 8 MiB each connection moves 2 pieces of 1 MiB, 4 ops x 10 us apart
// (its proxy's round): all its bytes between the draw's loads and the even
// split's (1.5 + (2 - 1.5) / sqrt 2 = 1.854 at 3: 45.55 us, shorter), its
// last piece on the draw's path: NICs 30 + 40 + 8 MiB x 1/2 = 74.194 us,
// draw 1 30 + 40 + 8 MiB x 2/2 = 78.389 us: again 2.097 us.
func TestStaggerStartsLate(t *testing.T) {
	co := &stream.Collective{ID: 1, Op: "alltoall", Size: 4 * MiB, Algorithm: "direct", Channels: 1, PredictedPs: 20e6,
		Cut: &stream.Cut{ChunkBytes: MiB, StepInterPs: 1e6, StepProxyPs: 10e6}}
	c := &collLoad{in: &flowset.Set{Collectives: map[int64]*stream.Collective{1: co}}, fab: collective.Fabric{GPUs: 4, GPUsPerServer: 2}}
	st := &stagger{algo: collective.AlgoDirect, ranks: []int32{0, 1, 2, 3}, levels: []int32{3, 1},
		draws: []levelDraw{{all: []float64{2, 2}, nic: []float64{1, 2}}, {all: []float64{1, 2}, nic: []float64{1, 2}}}, spread: []float64{1.5, 2}}
	s, ok := c.fab.A2AStaggerOf(co, collective.AlgoDirect, st.ranks, co.Size)
	if !ok || s.OpPs != 10e6 || s.Pieces != 1 || s.Posts[0*4+2] != 1 || s.Posts[0*4+3] != 3 || s.Posts[0*4+1] != -1 {
		t.Fatalf("stagger %+v (ok %v): want 1 piece, 10 us an op, 0 to 2 after 1 op, to 3 after 3, none to 1", s, ok)
	}
	d := &demand{extra: 1.5, stag: st}
	for _, size := range []int64{4 * MiB, 8 * MiB} {
		f := &flowset.Flow{Coll: 1, Size: size, Lat: 50e6}
		if got, want := c.aloneWith(f, d), des.Time(50e6+2097152); got != want {
			t.Errorf("%d MiB: %d ps, want %d", size/MiB, got, want)
		}
	}
	if s, _ := c.fab.A2AStaggerOf(co, collective.AlgoDirect, st.ranks, 8*MiB); s.Pieces != 2 || s.IntervalPs != 40e6 {
		t.Errorf("8 MiB: %d pieces %d ps apart, want 2, 40 us", s.Pieces, s.IntervalPs)
	}
	// Without the transport's costs nothing is staggered.
	if _, ok := c.fab.A2AStaggerOf(&stream.Collective{Op: "alltoall", Size: 4 * MiB, Cut: &stream.Cut{}}, collective.AlgoDirect, st.ranks, 4*MiB); ok {
		t.Errorf("staggered without step costs")
	}
}

// newStagger puts each crossing connection at its posting level, latest
// first: on TestStaggerStartsLate's 2 servers x 2 GPUs (direct, one
// channel), rank 0's proxy posts to 2 after 1 op and to 3 after 3
// (collective.a2aPosts), so its connections to 2 and 3 sit at levels 1
// and 3, and a pair inside a server (0 to 1) or outside the group is left
// out, the latter counted (it crosses servers); a connection of two flows gives two, each half the bytes, on
// consecutive ports.
func TestNewStaggerLevels(t *testing.T) {
	co := &stream.Collective{ID: 1, Op: "alltoall", Size: 4 * MiB, Algorithm: "direct", Channels: 1, PredictedPs: 20e6,
		Cut: &stream.Cut{ChunkBytes: MiB, StepInterPs: 1e6, StepProxyPs: 10e6}}
	nodes := []stream.Node{{Server: 0}, {Server: 0}, {Server: 1}, {Server: 1}, {Server: 2}}
	c := &collLoad{in: &flowset.Set{Topology: &stream.Topology{GPUs: 5, Nodes: nodes}, Collectives: map[int64]*stream.Collective{1: co}},
		fab: collective.Fabric{GPUs: 4, GPUsPerServer: 2}}
	s, _ := c.fab.A2AStaggerOf(co, collective.AlgoDirect, []int32{0, 1, 2, 3}, co.Size)
	pairs := []pair{
		{a: 0, b: 2, x: 0.25, conns: 1, port: 0},
		{a: 0, b: 3, x: 0.5, conns: 2, port: 4},
		{a: 0, b: 1, x: 0.25, conns: 1, port: 0}, // inside server 0
		{a: 0, b: 4, x: 0.25, conns: 1, port: 0}, // rank 4 is in no group
	}
	st, skipped := c.newStagger(co, collective.AlgoDirect, [][]int32{{0, 1, 2, 3}}, pairs)
	if st == nil || skipped != 1 {
		t.Fatalf("stagger %v, %d pairs across servers left out; want one (0 to 4)", st, skipped)
	}
	want := []levelConn{{pair: 1, k: 0, a: 0, b: 3, port: 4, x: 0.25}, {pair: 1, k: 1, a: 0, b: 3, port: 5, x: 0.25}, {pair: 0, k: 0, a: 0, b: 2, port: 0, x: 0.25}}
	if fmt.Sprint(st.levels, st.ends) != "[3 1] [2 3]" || fmt.Sprint(st.conns) != fmt.Sprint(want) {
		t.Errorf("levels %v ends %v conns %+v; want [3 1] [2 3] %+v (posts 0->2 %d, 0->3 %d)", st.levels, st.ends, st.conns, want, s.Posts[2], s.Posts[3])
	}
	// A sibling inside one server (groups not aligned to servers) posts
	// no network op: the others keep their levels (it turned the stagger
	// off for every group).
	c.in.Topology.Nodes = append(nodes, stream.Node{Server: 2})
	c.in.Topology.GPUs = 6
	st2, _ := c.newStagger(co, collective.AlgoDirect, [][]int32{{0, 1, 2, 3}, {4, 5}}, pairs)
	if st2 == nil || fmt.Sprint(st2.levels, st2.ends, st2.ranks) != "[3 1] [2 3] [0 1 2 3]" {
		t.Errorf("with a sibling inside server 2: stagger %+v, want levels [3 1], ends [2 3], ranks [0 1 2 3]", st2)
	}
}

// A COLL node whose bytes go beside its pace (fabric_lat_ps: a tree) takes
// the longer of its delay and its fill plus the busiest link's bytes under
// an even split, then what hashing adds beyond that split; without
// fabric_lat_ps the extra adds to the delay. 100 MB, 100 us of fill, NICs
// 1 ps a byte (100 us), the even split 1.5 beyond them (150 us), hashing
// 0.2 more (20 us): a 400 us tree takes 420 us (its pace hides the
// uplinks' 350), a 300 us one 370 us (the uplinks bound it), and a ring
// of 300 us 300 + 170 = 470 us.
func TestTreeFabricBesidePace(t *testing.T) {
	tree := &stream.Collective{ID: 1, Op: "allreduce", Size: 1e8, Algorithm: "tree", FabricLatPs: 100e6}
	ring := &stream.Collective{ID: 2, Op: "allreduce", Size: 1e8, Algorithm: "ring"}
	c := &collLoad{in: &flowset.Set{Collectives: map[int64]*stream.Collective{1: tree, 2: ring}}}
	d := &demand{nic: 1, even: 1.5, extra: 1.7}
	for _, k := range []struct {
		coll      int64
		lat, want des.Time
	}{{1, 400e6, 420e6}, {1, 300e6, 370e6}, {2, 300e6, 470e6}} {
		f := &flowset.Flow{Coll: k.coll, Size: 1e8, Lat: k.lat}
		if got := c.aloneWith(f, d); math.Abs(float64(got-k.want)) > 1 {
			t.Errorf("collective %d, delay %d ps: %d ps, want %d", k.coll, k.lat, got, k.want)
		}
	}
	// Hashing's class mean below the even split (0.5 against 1.5 beyond
	// the NICs): the even split still bounds the tree's bytes, 10 us of
	// fill plus 250 us, where the 120 us pace alone is less.
	tree.FabricLatPs = 10e6
	f := &flowset.Flow{Coll: 1, Size: 1e8, Lat: 120e6}
	if got := c.aloneWith(f, &demand{nic: 1, even: 1.5, extra: 0.5}); math.Abs(float64(got-260e6)) > 1 {
		t.Errorf("tree under a class mean below the even split: %d ps, want 260000000", got)
	}
	// A ring under ecmp (drift): TestOutOfPhaseExtra's 300 us with 100 of
	// NIC bytes and 200 us of extra, 400 us out of phase; then its NVLink
	// lock when longer, then the even split's bound when longer still.
	for _, k := range []struct {
		lock, even float64
		want       des.Time
	}{{0, 0.5, 400e6}, {450e6, 0.5, 450e6}, {350e6, 0.5, 400e6}, {0, 3.5, 450e6}} {
		ring.Cut = &stream.Cut{NVLinkLockPs: int64(k.lock)}
		f := &flowset.Flow{Coll: 2, Size: 1e8, Lat: 300e6}
		if got := c.aloneWith(f, &demand{nic: 1, even: k.even, extra: 2, drift: true}); math.Abs(float64(got-k.want)) > 1 {
			t.Errorf("ring under ecmp, lock %.0f ps, even %.1f: %d ps, want %d", k.lock, k.even, got, k.want)
		}
	}
}

// An LL or LL128 ring across servers under an even split (spray,
// adaptive) pays the fabric's extra on its network steps (evenRingPs), by
// hand: a 300 us delay, 200 us of extra. Its network connection's own
// steps take 250 us and pay all 200 (450 us); the datum's path pays it on
// its network hops only, a tenth of its steps (320 us): 450 us, where the
// extra after the whole delay was 500. With a 50 us connection and half
// of the path's steps across servers, the path paces it: 300 + 100 = 400.
// Under ecmp (drift) the ring keeps processor sharing's 400 us
// (TestOutOfPhaseExtra), its connection aside.
func TestEvenRingExtraOnNetworkSteps(t *testing.T) {
	us := des.Time(1e6)
	if got := evenRingPs(300*us, 250*us, 200*us, 0.1); got != 450*us {
		t.Errorf("connection-paced: %d ps, want %d", got, 450*us)
	}
	if got := evenRingPs(300*us, 50*us, 200*us, 0.5); got != 400*us {
		t.Errorf("path-paced: %d ps, want %d", got, 400*us)
	}
	ring := &stream.Collective{ID: 2, Op: "allreduce", Size: 1e8, Algorithm: "ring", Cut: &stream.Cut{RingConnPs: 250e6}}
	c := &collLoad{in: &flowset.Set{Collectives: map[int64]*stream.Collective{2: ring}}}
	f := &flowset.Flow{Coll: 2, Size: 1e8, Lat: 300e6}
	for _, k := range []struct {
		d    demand
		want des.Time
	}{
		{demand{nic: 1, even: 2, extra: 2, netShare: 0.1}, 450e6},                // spray: on its network steps
		{demand{nic: 1, even: 2, extra: 2}, 500e6},                               // no share known: in series
		{demand{nic: 1, even: 0.5, extra: 2, netShare: 0.1, drift: true}, 400e6}, // ecmp: out of phase
		{demand{nic: 1, even: 4, extra: 4, netShare: 0.1}, 650e6},                // 250 + 400, over the bound's 500
	} {
		if got := c.aloneWith(f, &k.d); math.Abs(float64(got-k.want)) > 1 {
			t.Errorf("%+v: %d ps, want %d", k.d, got, k.want)
		}
	}
	// The share of a ring's steps a datum crosses servers on: 8 + 8 ranks,
	// AllGather 2 of 15 steps, AllReduce 4 of 30; one rank on each of 12
	// servers, every one of an AllGather's 11 steps; one server, none.
	tp := &stream.Topology{Nodes: make([]stream.Node, 16)}
	for i := range tp.Nodes {
		tp.Nodes[i].Server = int32(i / 8)
	}
	ranks := make([]int32, 16)
	for i := range ranks {
		ranks[i] = int32(i)
	}
	one := &stream.Topology{Nodes: make([]stream.Node, 12)}
	for i := range one.Nodes {
		one.Nodes[i].Server = int32(i)
	}
	for _, k := range []struct {
		op    string
		ranks []int32
		tp    *stream.Topology
		want  float64
	}{
		{"allgather", ranks, tp, 2.0 / 15}, {"allreduce", ranks, tp, 4.0 / 30},
		{"allgather", ranks[:12], one, 1}, {"allreduce", ranks[:8], tp, 0},
	} {
		if got := ringNetShare(k.op, k.ranks, k.tp); math.Abs(got-k.want) > 1e-12 {
			t.Errorf("%s on %d ranks: share %.4f, want %.4f", k.op, len(k.ranks), got, k.want)
		}
	}
}

// A pipelined collective's fabric extra out of phase (outOfPhasePs), by
// hand: 300 us alone, 100 of them its bytes on its NIC, 200 us more the
// collided links need. Its 200 us of fixed work plus its bytes at
// processor sharing's 1/(1 - rho), rho = 200 / T: T^2 - 500 T + 40000 =
// 0, T = 400 us, where in series (in phase) it was 500. No extra keeps
// t0; no fixed work (bytes alone) is the sum, as before.
func TestOutOfPhaseExtra(t *testing.T) {
	us := des.Time(1e6)
	got := outOfPhasePs(300*us, 100*us, 200*us)
	if got != 400*us {
		t.Errorf("out of phase: %d ps, want %d", got, 400*us)
	}
	// T is processor sharing's fixed point: f + nic T / (T - x).
	if fp := 200e6 + 100e6*float64(got)/float64(got-200*us); math.Abs(fp-float64(got)) > 2 {
		t.Errorf("out of phase: %d ps is not the fixed point (%.0f)", got, fp)
	}
	for _, c := range []struct{ t0, nic, x, want des.Time }{
		{300 * us, 100 * us, 0, 300 * us},        // nothing collides
		{300 * us, 300 * us, 200 * us, 500 * us}, // bytes alone: in series
		{300 * us, 0, 200 * us, 500 * us},        // no NIC bytes known: in series
		{300 * us, 400 * us, 200 * us, 500 * us}, // model faster than its NICs: in series
	} {
		if got := outOfPhasePs(c.t0, c.nic, c.x); got != c.want {
			t.Errorf("outOfPhasePs(%d, %d, %d) = %d, want %d", c.t0, c.nic, c.x, got, c.want)
		}
	}
}
