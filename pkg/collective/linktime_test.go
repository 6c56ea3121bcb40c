package collective

import (
	"math"
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
		f := Fabric{GPUs: c.gpus, GPUsPerServer: 8, NVSwitches: make([][]int32, c.gpus/8)}
		d := &Decomposer{Fabric: f, Planner: &Planner{M: ServerModel{CC: 90, NVLinkGBps: 400, NICs: 8, NICGBps: c.nicGBps}, F: f}}
		ranks := make([]int32, c.gpus)
		for i := range ranks {
			ranks[i] = int32(i)
		}
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
	f := Fabric{GPUs: 16, GPUsPerServer: 8, NVSwitches: make([][]int32, 2)}
	d := &Decomposer{Fabric: f, Planner: &Planner{M: ServerModel{CC: 90, NVLinkGBps: 100, NICs: 8, NICGBps: 50}, F: f}}
	ranks := make([]int32, 16)
	for i := range ranks {
		ranks[i] = int32(i)
	}
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
	k := cut{f: f}
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
