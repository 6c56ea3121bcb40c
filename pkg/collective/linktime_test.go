package collective

import (
	"math"
	"slices"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// linkBwPs is the flows' bytes on the most loaded link over its rate:
// a ring AllReduce inside one server sends 2(n-1)/n of the size out of
// every GPU's NVLink, an AllGather (n-1)/n; a ring across two servers
// with one channel crosses each way once, so the GPU at a crossing sends
// (n-1)/n of an AllGather over its NIC, the binding link when the NIC is
// slow enough.
func TestLinkBwPs(t *testing.T) {
	const size = 64 << 20
	for _, c := range []struct {
		op       Op
		gpus, ch int
		nicGBps  float64
		want     float64 // ps
	}{
		{AllReduce, 8, 8, 50, 2 * 7.0 / 8 * size / (400 * 1e-3)},
		{AllGather, 8, 8, 50, 7.0 / 8 * size / (400 * 1e-3)},
		{AllGather, 16, 1, 10, 15.0 / 16 * size / (10 * 1e-3)},
	} {
		d, ranks := handDecomposer(c.gpus, 8, 400, 8, c.nicGBps, 0)
		co := &Coll{Rec: stream.Collective{Op: string(c.op), Size: size}, Ranks: ranks, Plan: Plan{Algo: AlgoRing, Proto: Simple, Channels: c.ch}}
		got, ok := d.linkBwPs(co)
		if !ok || math.Abs(float64(got)-c.want) > 1e-6*c.want {
			t.Errorf("%s on %d GPUs, %d channels: %d ps (ok %v), want %.0f", c.op, c.gpus, c.ch, got, ok, c.want)
		}
	}
	// No NVLink rate: NCCL's model time stays.
	d := &Decomposer{Fabric: Fabric{GPUs: 8, GPUsPerServer: 8}, Planner: &Planner{}}
	if _, ok := d.linkBwPs(&Coll{Rec: stream.Collective{Op: string(AllReduce), Size: size}, Ranks: []int32{0, 1}, Plan: Plan{Algo: AlgoRing}}); ok {
		t.Errorf("priced without an NVLink rate")
	}
}

// A queued ring's closed form (ringCyclePs), by hand: AllGather of 512
// MiB on 2 servers x 8 GPUs, 16 channels of 2 MiB chunks, no PXN. Channel
// ch enters each server at local GPU ch mod 8, so channels ch and ch+8
// run the same ring, in phase: a GPU leaving its server sends both of
// their connections over its one 50 GB/s NIC, 2 bytes per connection byte
// at 50 GB/s, 40 ps. Every other GPU's NVLink (100 GB/s) carries 14
// connections, 140 ps a byte in all, but 2 per ring, 20 ps: the rings
// are out of phase, so that only bounds the total (bw).
// Each channel moves 32 MiB, one loop of 16 x 2 MiB, 15 steps of 2 MiB:
// each waits 2 slices x 8 us of fixed work, then 2 MiB at 40 ps a byte
// (83.9 us), more than its pace (4 slots of 512 KiB x 8.5 us = 34 us). The
// first step waits the network hop's 14 us latency and 8.5 us cost
// instead of its 16 us of fixed work, after the 8.4 us base latency.
func TestRingCyclePs(t *testing.T) {
	d, ranks := handDecomposer(16, 8, 100, 8, 50, 0)
	const size = 512 << 20
	co := &Coll{Rec: stream.Collective{Op: string(AllGather), Size: size}, Ranks: ranks,
		Plan: Plan{Algo: AlgoRing, Proto: Simple, Channels: 16, Chunk: 2 << 20, Lat: LatTerms{Base: 8.4, Intra: 3.4, Inter: 14}}}
	s := stepCosts{bytes: 512 << 10, intra: 500_000, inter: 8_500_000, serial: 8_000_000, slice: sliceRuleOf(AlgoRing, Simple, 512<<10)}
	if !queuedRing(co, s) {
		t.Fatal("a Simple ring under step costs is not queued")
	}
	phase, ok := d.ringPhasePs(co)
	if !ok || math.Abs(phase-40) > 1e-9 {
		t.Fatalf("phase %v ps per byte (ok %v), want 40: two in-phase connections on a 50 GB/s NIC", phase, ok)
	}
	k := cut{f: d.Fabric}
	step := 16e6 + float64(2<<20)*2/50e-3 // ps: fixed work, then 2 MiB for each of two connections at 50 GB/s
	want := 8.4e6 + (14e6 + 8.5e6 - 16e6) + 15*step
	if got := ringCyclePs(co, k, s, 2, phase, 0); math.Abs(float64(got)-want) > 15 {
		t.Errorf("step-bound: %d ps, want %.0f", got, want)
	}
	// The link's total bytes bound it when longer (out-of-phase rings).
	if got := ringCyclePs(co, k, s, 2, phase, 3e9); math.Abs(float64(got)-(8.4e6+6.5e6+3e9)) > 1 {
		t.Errorf("bytes-bound: %d ps, want %.0f", got, 8.4e6+6.5e6+3e9)
	}
	// A pace longer than the step: 4 slots x 30 us.
	s.inter = 30_000_000
	want = 8.4e6 + (14e6 + 30e6 - 16e6) + 15*120e6
	if got := ringCyclePs(co, k, s, 2, phase, 0); math.Abs(float64(got)-want) > 15 {
		t.Errorf("paced: %d ps, want %.0f", got, want)
	}
	if queuedRing(co, stepCosts{}) {
		t.Errorf("queued without step costs: default streams would change")
	}
}

// An LL128 ring's diagonal (ringPathPs) by hand: AllGather of 491520 B
// on 2 servers x 4 GPUs, 4 channels, no PXN: a channel's 122880 B are one
// loop of 8 slices of 15360 B, 16384 wire bytes each. Channel c enters
// each server at local GPU c mod 4, so every channel is its own ring and a
// GPU sends 3 of its 4 channels over NVLink (100 GB/s: 10 ps a byte each,
// 30 in phase) and 1 over its 25 GB/s NIC (40 ps a byte). A datum crosses
// 7 hops, both network hops among them when its window omits an NVLink
// one. Each waits its slice's fixed work (5 us), or its latency and step
// cost when longer: NVLink's 1 + 0.5 us is not; the network's 4 + 4.5 us
// is (8.5 us), then 16384 B at 40 ps: 9.155 us. A datum's first 3 hops,
// before its first server crossing, run in phase: 5 us + 16384 x 30 ps =
// 5.492 us; after it the rings meet at no set offset, and each NVLink hop's
// bytes go at its own ring's share, 10 ps a byte: 5 us + 16384 x 10 ps.
// Base latency 10 us.
func TestRingPathPs(t *testing.T) {
	d, ranks := handDecomposer(8, 4, 100, 4, 25, 0)
	co := &Coll{Rec: stream.Collective{Op: string(AllGather), Size: 491520}, Ranks: ranks,
		Plan: Plan{Algo: AlgoRing, Proto: LL128, Channels: 4, Chunk: 576000, Lat: LatTerms{Base: 10, Intra: 1, Inter: 4}}}
	s := stepCosts{bytes: 614400, intra: 500_000, inter: 4_500_000, serial: 5_000_000, slice: sliceRuleOf(AlgoRing, LL128, 614400), roundPaced: true}
	k := cut{f: d.Fabric}
	early, nvHop := 5e6+16384*30.0, 5e6+16384*10.0
	netHop := 8.5e6 + 16384*40.0
	want := 10e6 + 3*early + 2*nvHop + 2*netHop
	if _, lock, _, _ := d.ringPathPs(co, k, s, 2, 0); lock != 0 {
		t.Errorf("NVLink faster than the NIC in phase: lock %d ps, want 0", lock)
	}
	if got, _, _, ok := d.ringPathPs(co, k, s, 2, 0); !ok || math.Abs(float64(got)-want) > 10 {
		t.Errorf("%d ps (ok %v), want %.0f", got, ok, want)
	}
	// Its network connection's own 7 steps, apart: each the slice's fixed
	// work and 16384 B at 40 ps, the first one's latency and cost beyond
	// the fixed work (8.5 - 5 us), and the base (no path latency here).
	if _, _, conn, _ := d.ringPathPs(co, k, s, 2, 0); math.Abs(float64(conn)-(10e6+7*(5e6+16384*40.0)+3.5e6)) > 10 {
		t.Errorf("conn %d ps, want %.0f", conn, 10e6+7*(5e6+16384*40.0)+3.5e6)
	}
	// Inside one server of 8 the 4 channels run one ring and stay in
	// phase: 7 NVLink hops of 5 us plus 16384 B for each of a GPU's 4
	// connections at 10 ps a byte.
	f1 := Fabric{GPUs: 8, GPUsPerServer: 8, NVSwitches: make([][]int32, 1)}
	d1 := &Decomposer{Fabric: f1, Planner: &Planner{M: ServerModel{CC: 90, NVLinkGBps: 100}, F: f1}}
	want = 10e6 + 7*(5e6+16384*40.0)
	if _, lock, conn, _ := d1.ringPathPs(co, cut{f: f1}, s, 1, 0); lock != 0 || conn != 0 {
		t.Errorf("one server: lock %d ps, conn %d ps, want 0", lock, conn)
	}
	if got, _, _, ok := d1.ringPathPs(co, cut{f: f1}, s, 1, 0); !ok || math.Abs(float64(got)-want) > 10 {
		t.Errorf("one server: %d ps (ok %v), want %.0f", got, ok, want)
	}
	// Simple rings and rings without step costs keep their own forms.
	if _, _, _, ok := d.ringPathPs(co, k, stepCosts{}, 2, 0); ok {
		t.Errorf("priced without step costs")
	}
	sc := *co
	sc.Plan.Proto = Simple
	if _, _, _, ok := d.ringPathPs(&sc, k, s, 2, 0); ok {
		t.Errorf("a Simple ring priced as LL128")
	}
}

// nvlsTreePs by hand: an NVLS-Tree AllReduce of 1 MiB on 2 servers x 2
// GPUs, 2 channels, NCCL's 64 KiB chunk per head: a channel's 512 KiB go
// in 4 loops of 128 KiB (a 64 KiB shard per GPU). NVLink 100 GB/s, one 50
// GB/s NIC per GPU, NVLS at 85% of NVLink's rate. The two channels run
// the two trees (server 0 the root of one, server 1 of the other), so in
// each tree stage every GPU sends one shard and receives one over its NIC.
// The first loop: upload (25 us NVLink latency, 0.5 us step cost, both
// channels' 128 KiB), the reduced shards back, the tree up and down (14 us
// network latency, 8.5 us step cost, a 64 KiB shard), then the multicast
// where a tree ends: each server ends one channel's tree after the down
// stage, storing its shard and receiving the loop. Each later loop adds
// the slowest pace, the tree connection's step cost (8.5 us, more than
// the proxy round of 2 x 2 channels x 1.6 us = 6.4 us, and than the
// loop's 4.6 us of NVLink bytes). The GPUs' proxies post channel 1's
// first tree step half a round (3.2 us) after channel 0's (proxyPhase),
// and channel 1 ends last.
func TestNVLSTreePs(t *testing.T) {
	d, _ := handDecomposer(4, 2, 100, 2, 50, 0)
	co := &Coll{Rec: stream.Collective{Op: string(AllReduce), Size: 1 << 20}, Ranks: []int32{0, 1, 2, 3},
		Plan: Plan{Algo: AlgoNVLSTree, Proto: Simple, Channels: 2, Chunk: 64 << 10, Lat: LatTerms{Intra: 25, Inter: 14}}}
	s := stepCosts{bytes: 64 << 10, intra: 500_000, inter: 8_500_000, proxyOp: 1_600_000}
	nvls := func(x float64) float64 { return math.Ceil(x/0.85) / 0.1 } // ps on NVLink at 85%
	upload := 25.5e6 + 2*nvls(128<<10)
	reduce := 2 * nvls(64<<10)
	tree := 22.5e6 + float64(64<<10)/0.05
	mc := nvls(64<<10) + nvls(128<<10)
	want := upload + reduce + 3.2e6 + 2*tree + mc + 3*8.5e6
	got, ok := d.nvlsTreePs(co, s, 2)
	if !ok || math.Abs(float64(got)-want) > 10 {
		t.Errorf("NVLS-Tree: %d ps (ok %v), want %.0f", got, ok, want)
	}
	// A proxy round longer than the step cost paces the later loops, and
	// channel 1's phase is half of it (6 us).
	s.proxyOp = 3_000_000 // 2 x 2 x 3 us = 12 us
	if got, _ := d.nvlsTreePs(co, s, 2); math.Abs(float64(got)-(want+2.8e6+3*3.5e6)) > 10 {
		t.Errorf("NVLS-Tree paced by its proxy round: %d ps, want %.0f", got, want+2.8e6+3*3.5e6)
	}
	// Without the proxy's cost the channels run in step.
	s.proxyOp = 0
	if got, _ := d.nvlsTreePs(co, s, 2); math.Abs(float64(got)-(want-3.2e6)) > 10 {
		t.Errorf("NVLS-Tree without proxy-op: %d ps, want %.0f", got, want-3.2e6)
	}
	if _, ok := d.nvlsTreePs(co, stepCosts{}, 2); ok {
		t.Errorf("priced without step costs: default streams would change")
	}
	// A loop's reduce work (8 us plus the 64 KiB shard at 0.5 ns a byte:
	// 40.768 us) longer than a loop's every other cycle paces the loops:
	// channel 0's first loop uploads, then its 4 loops' work, then the
	// last loop's bytes alone (its reduced shards on the NVLink, its
	// shard on the NIC in each of the 2 tree stages, both channels', and
	// its multicast store and download), no hop latency again; its
	// bytes, 9 us, are shorter than the work, so no loop waits on the one
	// before.
	s.proxyOp, s.serial, s.treeFs = 1_600_000, 8_000_000, 500_000
	w := 8e6 + float64(64<<10)*0.5e3
	alone := 2*nvls(64<<10) + 2*2*float64(64<<10)/0.05 + nvls(64<<10) + nvls(128<<10)
	if got, _ := d.nvlsTreePs(co, s, 2); math.Abs(float64(got)-(upload+4*w+alone)) > 10 {
		t.Errorf("NVLS-Tree paced by its loops' work: %d ps, want %.0f", got, upload+4*w+alone)
	}
}

// treePs by hand: an LL128 tree AllReduce of 256 KiB on 2 servers x 2
// GPUs, 2 channels (one per rail, both on server tree 0), NCCL's 36000-byte
// chunk. A channel's 128 KiB go in 8 pieces of 16 KiB (17477 wire bytes),
// two to an NCCL step (which share its cost). Each channel's slowest leaf
// climbs its server's chain (NVLink, 100 GB/s: 1.25 us latency, half of
// the 0.5 us step cost) and crosses to the root server (a 50 GB/s NIC:
// 8.5 us, half of 4.5 us), and the result comes back the same way. A
// hop's later pieces follow its first at the longer of their pace (the
// shared step cost) and their bytes; the last network hop's train (7 x
// 2.25 us) then only pays the last NVLink hop's bytes, and ends last.
func TestTreePs(t *testing.T) {
	d, _ := handDecomposer(4, 2, 100, 2, 50, 0)
	co := &Coll{Rec: stream.Collective{Op: string(AllReduce), Size: 256 << 10}, Ranks: []int32{0, 1, 2, 3},
		Plan: Plan{Algo: AlgoTree, Proto: LL128, Channels: 2, Chunk: 36000, Lat: LatTerms{Base: 14, Intra: 1.25, Inter: 8.5}}}
	s := stepCosts{bytes: 19200, intra: 500_000, inter: 4_500_000}
	w := 17477.0
	nvHop, netHop := 1.5e6+w/0.1, 10.75e6+w/0.05 // first piece: latency, cost share, bytes
	firstAcross := nvHop + netHop + netHop       // the first piece has crossed the last network hop
	want := 14e6 + firstAcross + 7*2.25e6 + w/0.1
	got, ok := d.treePs(co, s, linkBusy{})
	if !ok || math.Abs(float64(got)-want) > 10 {
		t.Errorf("tree: %d ps (ok %v), want %.0f", got, ok, want)
	}
	// The latencies plus the busiest NIC's bytes bound it from below.
	if got, _ := d.treePs(co, s, linkBusy{nic: 100e6}); math.Abs(float64(got)-(14e6+24.5e6+100e6)) > 10 {
		t.Errorf("tree, NIC-bound: %d ps, want %.0f", got, 14e6+24.5e6+100e6)
	}
	// The busiest NVLink's bytes overlap the latencies after the first
	// hop's: the path ends on a NVLink hop.
	if got, _ := d.treePs(co, s, linkBusy{nv: 100e6}); math.Abs(float64(got)-(14e6+1.5e6+100e6)) > 10 {
		t.Errorf("tree, NVLink-bound: %d ps, want %.0f", got, 14e6+1.5e6+100e6)
	}
	if _, ok := d.treePs(co, stepCosts{}, linkBusy{}); ok {
		t.Errorf("priced without step costs: default streams would change")
	}
}

// Under tree-ll-first=share a connection's first piece pays its share of
// the step cost and no whole-step wait (cctx.treeStep, flow granularity),
// so a stream carrying step_tree_whole beside step_tree_share (the
// planner writes one or the other; the reader takes both) prices as
// share alone, and whole alone, which waits, above it.
func TestTreePsShareSkipsWholeWait(t *testing.T) {
	d, _ := handDecomposer(4, 2, 100, 2, 50, 0)
	co := &Coll{Rec: stream.Collective{Op: string(AllReduce), Size: 256 << 10}, Ranks: []int32{0, 1, 2, 3},
		Plan: Plan{Algo: AlgoTree, Proto: LL128, Channels: 2, Chunk: 36000, Lat: LatTerms{Base: 14, Intra: 1.25, Inter: 8.5}}}
	s := stepCosts{bytes: 19200, intra: 500_000, inter: 4_500_000, serial: 4_000_000, treeFs: 30_000, treeShare: true}
	share, ok := d.treePs(co, s, linkBusy{})
	s.treeWhole = true
	both, _ := d.treePs(co, s, linkBusy{})
	s.treeShare = false
	whole, _ := d.treePs(co, s, linkBusy{})
	if !ok || both != share || whole <= share {
		t.Errorf("tree LL128 under tree-bw: share %d ps (ok %v), share and whole %d (want the same), whole %d (want more)", share, ok, both, whole)
	}
}

// treePs by hand for a Simple tree AllReduce of 16 MB on 2 servers x 4
// GPUs, 4 channels (one per rail, all on server tree 0), 1 MB chunks: 4
// pieces a channel, one step each. A piece takes 10 us on NVLink (100
// GB/s) and 20 us on the NIC (50 GB/s); a hop's first piece pays 1.5 us
// inside a server (latency 1, step cost 0.5) and 9 us across (5 + 4).
// Climbing the child server's chain, the GPU sending hop j also sends the
// later pieces of the j channels whose chains start on the rails before
// (chainPile): 1, 2 and 3 transfers share it, so the first piece reaches
// the chain's head at 3 x 1.5 + (1 + 2 + 3) x 10 = 64.5 us, not 34.5. It
// crosses up (29 us) and back down (29 us) at 122.5 us; the last network
// hop's train adds 3 x 20 us and the chain down 3 x 10 us alone:
// 10 + 122.5 + 60 + 30 = 222.5 us.
func TestTreePsSimple(t *testing.T) {
	d, ranks := handDecomposer(8, 4, 100, 4, 50, 0)
	co := &Coll{Rec: stream.Collective{Op: string(AllReduce), Size: 16e6}, Ranks: ranks,
		Plan: Plan{Algo: AlgoTree, Proto: Simple, Channels: 4, Chunk: 1e6, Lat: LatTerms{Base: 10, Intra: 1, Inter: 5}}}
	s := stepCosts{bytes: 1 << 20, intra: 500_000, inter: 4_000_000}
	if got, ok := d.treePs(co, s, linkBusy{}); !ok || got != 222_500_000 {
		t.Errorf("Simple tree: %d ps (ok %v), want 222500000", got, ok)
	}
	// One channel: nothing piles up on its chain, 30 us less.
	co.Plan.Channels, co.Rec.Size = 1, 4e6
	if got, _ := d.treePs(co, s, linkBusy{}); got != 192_500_000 {
		t.Errorf("Simple tree, one channel: %d ps, want 192500000", got)
	}
	// 2 x 2 GPUs, 4 channels of one piece: channels 0 and 2 (1 and 3) share
	// rail 0's (1's) chain, 20 us for their two pieces on NVLink, but run
	// trees 0 and 1, whose crossings go opposite ways on 2 servers: each
	// network hop carries one piece, 20 us. 10 + 2 x (1.5 + 20) + 2 x (9 +
	// 20) = 111 us (151 with both pieces on every NIC hop).
	d, ranks = handDecomposer(4, 2, 100, 2, 50, 0)
	co.Ranks, co.Plan.Channels, co.Rec.Size = ranks, 4, 4e6
	if got, _ := d.treePs(co, s, linkBusy{}); got != 111_000_000 {
		t.Errorf("Simple tree, two trees a rail: %d ps, want 111000000", got)
	}
}

// An AllToAll's closed form (allToAllPs) by hand: 4 MiB a rank on 2
// servers x 2 GPUs, NVLink 100 GB/s, one 25 GB/s NIC per GPU, one part in
// 256 KiB steps: each rank's 1 MiB for a peer goes in 4 pieces. With PXN
// a GPU relays its server-mate's share for the remote rank on its rail,
// so its one network connection carries 2 x 256 KiB a piece, and its
// proxy serves 2 sends and 2 receives a round: 4 x 10 us, more than the
// 10 us step cost. The first piece pays 4 us of latency, a 10 us step and
// its hand-off (256 KiB over NVLink, 2.62 us); each later one 40 us; the
// last 512 KiB at 25 GB/s (20.97 us). The NIC's 2 MiB (83.9 us) is
// shorter. With a 3 us proxy op the round (12 us) is shorter than the
// NIC's bytes, which then set it. Base latency 5 us. Each connection
// starts after its proxies' earlier ops (a2aPosts; NCCL's rounds: round
// r sends to rank + r, receives from rank - r): with PXN rank 0 posts
// round 1's send (1 to 2) and receive (from 3), then round 2's, and its
// connection to 2 also carries 0's own round-2 send, so it waits 2 ops
// (20 us; 6 with the 3 us op), as every connection does.
func TestAllToAllPs(t *testing.T) {
	d, _ := handDecomposer(4, 2, 100, 2, 25, 0)
	co := &Coll{Rec: stream.Collective{Op: string(AllToAll), Size: 4 << 20}, Ranks: []int32{0, 1, 2, 3},
		Plan: Plan{Algo: AlgoPXN, Proto: Simple, Channels: 1, Chunk: 256 << 10, PXN: true, Lat: LatTerms{Base: 5, Inter: 4}}}
	s := stepCosts{bytes: 256 << 10, intra: 500_000, inter: 10_000_000, proxyOp: 10_000_000}
	fill := 5e6 + 4e6 + 10e6 + float64(256<<10)/0.1
	want := fill + 20e6 + 3*40e6 + float64(512<<10)/0.025
	if got, ok := d.allToAllPs(co, s, 2); !ok || math.Abs(float64(got)-want) > 10 {
		t.Errorf("round-bound: %d ps (ok %v), want %.0f", got, ok, want)
	}
	s.proxyOp = 3_000_000
	want = fill + 6e6 + float64(2<<20)/0.025
	if got, ok := d.allToAllPs(co, s, 2); !ok || math.Abs(float64(got)-want) > 10 {
		t.Errorf("NIC-bound: %d ps (ok %v), want %.0f", got, ok, want)
	}
	// Without PXN each rank sends its 2 remote peers their 1 MiB itself,
	// 2 connections of 256 KiB pieces, and its proxy serves 2 sends and 2
	// receives a round: 3 x 40 us, then 2 x 256 KiB at 25 GB/s. Its
	// connection to 2 (round 2) waits 1 op, round 1's receive, and to 3
	// (round 3) 3, whose last piece then goes alone: 30 us + 3 x 40 us +
	// 256 KiB at 25 GB/s.
	co.Plan.Algo, co.Plan.PXN = AlgoDirect, false
	s.proxyOp = 10_000_000
	want = 5e6 + 4e6 + 10e6 + 30e6 + 3*40e6 + float64(256<<10)/0.025
	if got, ok := d.allToAllPs(co, s, 2); !ok || math.Abs(float64(got)-want) > 10 {
		t.Errorf("direct: %d ps (ok %v), want %.0f", got, ok, want)
	}
	// PXN again, with grouped receives (max-recvs 2): each proxy's 2
	// receives, from the 2 ranks of the other server through its one
	// proxy there, are one irecv, so a round is 2 sends and 1 receive,
	// 30 us: 20 us + 3 x 30 us + 20.97 us.
	co.Plan.Algo, co.Plan.PXN = AlgoPXN, true
	s.maxRecvs = 2
	want = fill + 20e6 + 3*30e6 + float64(512<<10)/0.025
	if got, ok := d.allToAllPs(co, s, 2); !ok || math.Abs(float64(got)-want) > 10 {
		t.Errorf("grouped receives: %d ps (ok %v), want %.0f", got, ok, want)
	}
	// Steps of 32 KiB (a 512 KiB AllToAll: 4 pieces of a 128 KiB share,
	// 64 KiB gathered, 2.62 us at 25 GB/s) with a 1 us proxy op (a round
	// of 4 ops, 4 us; posts 2 us): a piece every step latency (10 us)
	// without a steady pace, every round (4 us) with a 2 us one.
	co.Rec.Size, co.Plan.Chunk, s.maxRecvs, s.proxyOp = 512<<10, 32<<10, 1, 1_000_000
	fill = 5e6 + 4e6 + 10e6 + float64(32<<10)/0.1 + 2e6 + float64(64<<10)/0.025
	for _, c := range []struct{ pace, interval int64 }{{0, 10_000_000}, {2_000_000, 4_000_000}} {
		s.pace = c.pace
		want = fill + 3*float64(c.interval)
		if got, ok := d.allToAllPs(co, s, 2); !ok || math.Abs(float64(got)-want) > 10 {
			t.Errorf("pace %d ps: %d ps (ok %v), want %.0f", c.pace, got, ok, want)
		}
	}
	if _, ok := d.allToAllPs(co, stepCosts{}, 2); ok {
		t.Errorf("priced without step costs")
	}
	if _, ok := d.allToAllPs(co, s, 1); ok {
		t.Errorf("priced inside one server")
	}
}

// A group not aligned to servers, by hand (allToAllPs): 4 ranks on GPUs
// 3-6 of 4-GPU servers (1 + 3), 4 MiB, PXN, NVLink 100 GB/s, 25 GB/s of
// NIC a GPU, one part of 256 KiB steps (4 pieces of a 1 MiB share), 10 us
// a step and a proxy op. GPU 3, alone in its server, sends its own share
// to each of the 3 others (3 connections of 256 KiB pieces) and posts 3
// sends and 3 receives a round: 60 us. GPU 4 relays its server's 3 shares
// for GPU 3 (1 connection of 768 KiB pieces, after 2 x 256 KiB of
// hand-offs over NVLink) and posts 3 sends and 1 receive: 40 us. Posts
// (a2aPosts' rounds, flat schedule): round 1 3->4 and 6->3 (relayed by 4),
// round 2 3->5 (after 2 ops) and 5->3 (4: 2), round 3 3->6 (4) and 4->3
// (4: 4). GPU 3's chain: its last connection posted after 4 ops (40 us),
// then 3 x 60 us and its last 256 KiB (10.49 us): 230.49 us; GPU 4's: 40
// + 3 x 40 + 768 KiB (31.46 us) + its hand-offs (5.24 us) = 196.70; all
// bytes (3 MiB on a NIC) 125.83. With base 5, latency 4 and a 10 us step:
// 249.486 us. One class at the mean (2 ranks a server, each connection
// gathering 2 shares on a 40 us round) gave 273.3.
func TestAllToAllPsUnalignedGroup(t *testing.T) {
	d, _ := handDecomposer(8, 4, 100, 4, 25, 0)
	co := &Coll{Rec: stream.Collective{Op: string(AllToAll), Size: 4 << 20}, Ranks: []int32{3, 4, 5, 6},
		Plan: Plan{Algo: AlgoPXN, Proto: Simple, Channels: 1, Chunk: 256 << 10, PXN: true, Lat: LatTerms{Base: 5, Inter: 4}}}
	s := stepCosts{bytes: 256 << 10, intra: 500_000, inter: 10_000_000, proxyOp: 10_000_000}
	lay := a2aLayoutCached(d.Fabric.nodesOf(co.Ranks), 4, 1, true, 1)
	if want := []int32{-1, 0, 2, 4, 4, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}; !slices.Equal(lay.posts, want) {
		t.Errorf("posts %v, want %v", lay.posts, want)
	}
	if want := []int32{6, 4, 1, 1}; !slices.Equal(lay.ops, want) {
		t.Errorf("ops a round %v, want %v", lay.ops, want)
	}
	// Two classes, by hand: GPU 3 alone in its server posts its 3
	// connections at levels 0, 2 and 4 (3, 2, 2, 1, 1 posted at each level
	// or later); GPU 4 relays its server's 3 ranks on one connection,
	// posted at 4. GPUs 5 and 6 post nothing across servers.
	wantClasses := []a2aClass{{local: 1, conns: 3, ops: 6, front: []int32{3, 2, 2, 1, 1}}, {local: 3, conns: 1, ops: 4, front: []int32{1, 1, 1, 1, 1}}}
	if len(lay.classes) != len(wantClasses) {
		t.Fatalf("classes %+v, want %+v", lay.classes, wantClasses)
	}
	for i, c := range lay.classes {
		w := wantClasses[i]
		if c.local != w.local || c.conns != w.conns || c.ops != w.ops || !slices.Equal(c.front, w.front) {
			t.Errorf("class %d: %+v, want %+v", i, c, w)
		}
	}
	want := 5e6 + 4e6 + 10e6 + 40e6 + 3*60e6 + float64(256<<10)/0.025
	if got, ok := d.allToAllPs(co, s, 2); !ok || math.Abs(float64(got)-want) > 10 {
		t.Errorf("1 + 3 ranks: %d ps (ok %v), want %.0f", got, ok, want)
	}
}

// An LL128 ring whose network connections' own steps are its slower path
// (ringPathPs' conn): TestRingPathPs' 2 x 4 ring with 10 times the bytes,
// AllGather of 4915200 B: a channel's one loop of 8 slices of 153600 B,
// 163840 wire bytes each. A network connection runs its 7 steps in order,
// each its 5 us of fixed work less the path's 0.5 us of link latency (which
// a flow adds after its last byte has left, when its next step may start)
// plus 163840 B at 40 ps: 11.0536 us; the first one its latency and cost
// beyond f (3.5 us), the last one the path (0.5 us). The diagonal is
// shorter: 3 NVLink hops in phase, 5 us + 163840 x 30 ps, 2 at their own
// ring's share, 5 us + 163840 x 10 ps, and 2 network hops of 8.5 + 6.554
// us: 73.13 us.
func TestRingPathConnPs(t *testing.T) {
	d, ranks := handDecomposer(8, 4, 100, 4, 25, 500_000)
	co := &Coll{Rec: stream.Collective{Op: string(AllGather), Size: 4915200}, Ranks: ranks,
		Plan: Plan{Algo: AlgoRing, Proto: LL128, Channels: 4, Chunk: 576000, Lat: LatTerms{Base: 10, Intra: 1, Inter: 4}}}
	s := stepCosts{bytes: 614400, intra: 500_000, inter: 4_500_000, serial: 5_000_000, slice: sliceRuleOf(AlgoRing, LL128, 614400), roundPaced: true}
	want := 10e6 + 7*(4.5e6+163840*40.0) + 3.5e6 + 0.5e6
	// The connection paces it: its own steps are the time, and conn.
	if got, _, conn, ok := d.ringPathPs(co, cut{f: d.Fabric}, s, 2, 0); !ok || math.Abs(float64(got)-want) > 10 || math.Abs(float64(conn)-want) > 10 {
		t.Errorf("%d ps, conn %d ps (ok %v), want %.0f", got, conn, ok, want)
	}
	// Without the path's latency every step pays its whole fixed work.
	d.Fabric.NetPathPs = 0
	want = 10e6 + 7*(5e6+163840*40.0) + 3.5e6
	if got, _, _, _ := d.ringPathPs(co, cut{f: d.Fabric}, s, 2, 0); math.Abs(float64(got)-want) > 10 {
		t.Errorf("no path latency: %d ps, want %.0f", got, want)
	}
}

// netPathPs: the fewest-hop network path from GPU 0 to the next server's
// first GPU, by hand: 0 -NIC 500 ns- leaf -NIC 700 ns- 4 (two hops); the
// three-hop way through the spine (100 ns a link) and the NVLink links do
// not count, nor does a path relayed through another GPU.
func TestNetPathPs(t *testing.T) {
	tp := &stream.Topology{GPUs: 8, GPUsPerServer: 4, Nodes: make([]stream.Node, 11)}
	// 8: leaf, 9: other leaf, 10: spine
	tp.Links = []stream.Link{
		{A: 0, B: 8, LatencyPs: 500_000, Kind: "nic"},
		{A: 4, B: 8, LatencyPs: 700_000, Kind: "nic"},
		{A: 0, B: 9, LatencyPs: 100_000, Kind: "nic"},
		{A: 9, B: 10, LatencyPs: 100_000, Kind: "fabric"},
		{A: 10, B: 4, LatencyPs: 100_000, Kind: "fabric"},
		{A: 0, B: 4, LatencyPs: 1, Kind: "nvlink"},
		{A: 0, B: 1, LatencyPs: 1, Kind: "nic"},
		{A: 1, B: 4, LatencyPs: 1, Kind: "nic"},
	}
	if got := netPathPs(tp); got != 1_200_000 {
		t.Errorf("%d ps, want 1200000", got)
	}
	tp.GPUsPerServer = 8
	if got := netPathPs(tp); got != 0 {
		t.Errorf("one server: %d ps, want 0", got)
	}
}

// handDecomposer is a hand case's decomposer: gpus GPUs, perServer a
// server, on NVLink of nvGBps and nics NICs of nicGBps each; netPathPs is
// the network path's link latency (Fabric.NetPathPs). ranks are every GPU.
func handDecomposer(gpus, perServer int, nvGBps float64, nics int, nicGBps float64, netPathPs int64) (d *Decomposer, ranks []int32) {
	f := Fabric{GPUs: gpus, GPUsPerServer: perServer, NVSwitches: make([][]int32, gpus/perServer), NetPathPs: netPathPs}
	d = &Decomposer{Fabric: f, Planner: &Planner{M: ServerModel{CC: 90, NVLinkGBps: nvGBps, NICs: nics, NICGBps: nicGBps}, F: f}}
	ranks = make([]int32, gpus)
	for i := range ranks {
		ranks[i] = int32(i)
	}
	return d, ranks
}

// psLeave shares one link equally among the transfers sending: hand
// cases (times in units of work).
func TestPsLeave(t *testing.T) {
	for _, c := range []struct {
		arrive, work, want []float64
	}{
		{[]float64{0, 0}, []float64{1, 1}, []float64{2, 2}},          // two at once: half each
		{[]float64{0, 1}, []float64{2, 1}, []float64{3, 3}},          // the first alone for 1, then both share
		{[]float64{0, 5}, []float64{1, 1}, []float64{1, 6}},          // no overlap
		{[]float64{0, 0, 0}, []float64{1, 2, 3}, []float64{3, 5, 6}}, // three, then two, then one
		{[]float64{2, 0}, []float64{1, 4}, []float64{4, 5}},          // out of arrival order
	} {
		got := psLeave(c.arrive, c.work)
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > 1e-9 {
				t.Errorf("psLeave(%v, %v) = %v, want %v", c.arrive, c.work, got, c.want)
				break
			}
		}
	}
}

// NetPieces: a PXN AllToAll of 4 MiB on 128 ranks, 8 a server, one
// channel, 32 KiB steps: under the transport's costs each network
// connection moves its peers' 32 KiB shares gathered as 1 piece (one
// step of a share), not the 8 pieces of 32 KiB the hand-offs are cut into
// without them (256 KiB gathered); at 16 MiB, 4 steps of a 128 KiB share.
// A direct one's connections go in the same steps under the transport's
// costs, and as one flow a pair without them.
func TestNetPieces(t *testing.T) {
	co := &stream.Collective{Op: "alltoall", Algorithm: AlgoPXN.String(), Size: 4 << 20, Channels: 1, Cut: &stream.Cut{ChunkBytes: 32 << 10, StepInterPs: 1}}
	if got := NetPieces(co, 128, 8); got != 1 {
		t.Errorf("paced, 4 MiB: %d pieces, want 1", got)
	}
	co.Size = 16 << 20
	if got := NetPieces(co, 128, 8); got != 4 {
		t.Errorf("paced, 16 MiB: %d pieces, want 4", got)
	}
	co.Size, co.Cut.StepInterPs = 4<<20, 0
	if got := NetPieces(co, 128, 8); got != 8 {
		t.Errorf("not paced, 4 MiB: %d pieces, want 8", got)
	}
	co.Algorithm = AlgoDirect.String()
	if got := NetPieces(co, 128, 8); got != 1 {
		t.Errorf("direct, not paced: %d pieces, want 1", got)
	}
	co.Size, co.Cut.StepInterPs = 16<<20, 1
	if got := NetPieces(co, 128, 8); got != 4 {
		t.Errorf("direct, paced, 16 MiB: %d pieces, want 4", got)
	}
}

// lastLoopPs by hand: loops 10 apart, 20 alone in the tree, a loop's 6 on
// its busiest NIC direction. With one loop before, the last waits for the
// share (p - 10) / p of its 6 still ahead when it comes: p = 20 + 6 (p -
// 10) / p, p^2 - 26 p + 60 = 0, p = 13 + sqrt(109); with more before, two
// are still in the tree (p < 30): p = 32 - 180 / p, p = 16 + sqrt(76).
// Loops at least their time apart never meet.
func TestLastLoopPs(t *testing.T) {
	st := []nvlsStage{{dirs: []float64{6, 1}}}
	for _, c := range []struct {
		before  int64
		w, want float64
	}{{1, 10, 13 + math.Sqrt(109)}, {5, 10, 16 + math.Sqrt(76)}, {5, 20, 20}} {
		if got := lastLoopPs(c.w, 20, c.before, st); math.Abs(got-c.want) > 1e-3 {
			t.Errorf("%d loops before, %g apart: %.4f, want %.4f", c.before, c.w, got, c.want)
		}
	}
}

// lockBytes by hand: 1000 B a step, 50 ps a byte in phase (50 ns), 10 in
// its group (10 ns), 30 on the NIC; the NVLink hop's latency 6 ns.
//   - network hop 8 ns: lag 8 + 30 - (6 + 50) = -18 ns, sooner: 50 ns;
//   - 44 ns: lag 44 + 30 - 56 = 18: 50 - 9 = 41 ns;
//   - 100 ns: lag 74: 50 - 37 = 13 ns;
//   - 200 ns: lag 174: 50 - 87 < 10: the group's 10 ns.
func TestLockBytes(t *testing.T) {
	for _, c := range []struct{ ln, want float64 }{{8000, 50000}, {44000, 41000}, {100000, 13000}, {200000, 10000}} {
		if got := lockBytes(1000, 6000, c.ln, 50, 10, 30); math.Abs(got-c.want) > 1e-6 {
			t.Errorf("network hop %g ps: %g ps, want %g", c.ln, got, c.want)
		}
	}
}
