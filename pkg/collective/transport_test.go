package collective

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// NCCL's ring cuts a Simple chunk into SlicePerChunk (2) slices of
// sliceSteps (2) steps, each at least 1/32 of a full slice
// (prims_simple.h: sliceSize = max(divUp(nelem, 16*SlicePerChunk)*16,
// sliceSize/32)); LL and LL128 chunks are one step each.
func TestRingSlices(t *testing.T) {
	simple := stepCosts{bytes: 512 << 10, slice: sliceRuleOf(AlgoRing, Simple, 512<<10)}
	for _, c := range []struct{ b, want int64 }{
		{2 << 20, 2},   // a full chunk: two 1 MiB slices
		{256 << 10, 2}, // two 128 KiB slices
		{64 << 10, 2},  // two slices of the 32 KiB minimum
		{40 << 10, 2},  // 32 KiB and 8 KiB
		{32 << 10, 1},  // one slice of the minimum
		{1, 1},
	} {
		if got := simple.slices(c.b); got != c.want {
			t.Errorf("Simple ring chunk of %d B: %d slices, want %d", c.b, got, c.want)
		}
	}
	ll128 := stepCosts{bytes: 614400, slice: sliceRuleOf(AlgoRing, LL128, 614400)}
	if got := ll128.slices(8 << 10); got != 1 {
		t.Errorf("LL128 chunk of 8 KiB: %d slices, want 1", got)
	}
	if got := ll128.slices(614401); got != 2 {
		t.Errorf("LL128 chunk of a step and a byte: %d slices, want 2", got)
	}
}

// A ring chunk waits its slices' fixed work, or on its connection's first
// chunk the longer of that and the hop's latency plus step cost.
func TestRingHopSerial(t *testing.T) {
	c := &cctx{f: Fabric{GPUs: 16, GPUsPerServer: 8}, intra: 3_400_000, inter: 14_000_000,
		step: stepCosts{bytes: 512 << 10, intra: 500_000, inter: 8_500_000, serial: 8_000_000, slice: sliceRuleOf(AlgoRing, Simple, 512<<10)}}
	for _, x := range []struct {
		k        int
		src, dst int32
		want     int64
	}{
		{0, 0, 1, 16_000_000}, // 2 slices x 8 us > 3.4 + 0.5 us
		{1, 0, 1, 16_000_000}, // later chunks: the slices' work alone
		{0, 0, 8, 22_500_000}, // across servers: 14 + 8.5 us > 16 us
		{1, 0, 8, 16_000_000}, // ... and the slices after the first chunk
	} {
		if got := c.ringHop(x.k, x.src, x.dst, 256<<10); got != x.want {
			t.Errorf("chunk %d, %d -> %d: delay %d ps, want %d", x.k, x.src, x.dst, got, x.want)
		}
	}
	var bad Transport = DefaultTransport()
	if err := bad.Set("slice-simple=-1"); err == nil {
		t.Errorf("slice-simple=-1 accepted")
	}
	bad.SliceUs[LL] = -1
	if err := bad.Validate(); err == nil {
		t.Errorf("a negative slice cost validates")
	}
}

// A GPU's proxy round is a send and a receive per channel carrying data,
// whatever the server's place in the tree.
func TestProxyRound(t *testing.T) {
	const op = 1_000_000 // 1 us
	for _, x := range []struct {
		channels   int
		size, want int64
	}{
		{16, 1 << 30, 32 * op},
		{1, 1 << 30, 2 * op},
		{16, 4, 8 * op}, // 4 bytes: 4 channels carry data
		{16, 0, 0},
	} {
		if got := proxyRound(x.channels, x.size, op); got != x.want {
			t.Errorf("%d channels, %d B: round %d ps, want %d", x.channels, x.size, got, x.want)
		}
	}
	if proxyRound(16, 1<<20, 0) != 0 {
		t.Errorf("no proxy cost: want no round")
	}
	// Channel 5's first step is posted 5 sends and 5 receives after
	// channel 0's.
	if got := proxyPhase(5, op); got != 10*op || proxyPhase(0, op) != 0 || proxyPhase(5, 0) != 0 {
		t.Errorf("channel 5's phase %d ps, want %d (0 for channel 0 and without the cost)", got, 10*op)
	}
	// The round paces a tree transfer by its steps when longer than its
	// pace: 300 KiB is 3 steps of 128 KiB.
	c := &cctx{step: stepCosts{bytes: 128 << 10}, pace: 10}
	if c.proxyPace(300<<10, 32*op); c.pace != 96*op {
		t.Errorf("pace %d ps, want %d", c.pace, 96*op)
	}
	if c.proxyPace(300<<10, op); c.pace != 96*op {
		t.Errorf("a shorter round changed the pace to %d ps", c.pace)
	}
	var bad Transport = DefaultTransport()
	for _, kv := range []string{"proxy-op=-1", "p2p-op=-1", "nvls-tree-op=-1", "nvls-tree-bw=-1", "nvls-tree-bw=1e-9", "nvls-chunk=0", "nvls-chunk=-5", "p2p-chunk=0", "p2p-chunk=-1"} {
		if err := bad.Set(kv); err == nil {
			t.Errorf("%s accepted", kv)
		}
	}
	for what, set := range map[string]func(*Transport){
		"proxy-op":     func(t *Transport) { t.ProxyOpUs = -1 },
		"p2p-op":       func(t *Transport) { t.P2POpUs = -1 },
		"nvls-tree-op": func(t *Transport) { t.NVLSTreeLoopUs = -1 },
		"nvls-tree-bw": func(t *Transport) { t.NVLSTreeGBps = -1 },
	} {
		b := DefaultTransport()
		if set(&b); b.Validate() == nil {
			t.Errorf("a negative %s validates", what)
		}
	}
}

// Under the transport, a Simple ring's first-loop steps go out in their
// connection's order (a queue pair's writes), yet each still waits its
// step latency from its data alone: step s > 0 of a connection waits for
// the connection's previous flow and for a delay node on its sender that
// waits, after the data, the latency the connection's first step pays
// (less the slices' work, which stays in series on the flow). Without the
// transport the first loop's steps do not wait on their connection.
func TestRingFirstLoopQueued(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "H100"})
	ib := DefaultTransport()
	if err := ib.Set("preset=h100-ib"); err != nil {
		t.Fatal(err)
	}
	st := Step{Op: AllGather, Size: 4 << 20, Group: DP}
	l := Layout{TP: 1, DP: 16, PP: 1, EP: 1}
	for _, tr := range []*Transport{nil, &ib} {
		c, _ := s.run(t, Options{LaunchLatency: true, Algo: "ring", Proto: "simple", PXN: "on", RingChannels: 2, Transport: tr}, l, one(st))
		byID := map[int64]stream.Flow{}
		type conn struct{ src, dst, ch int32 }
		first := map[conn]stream.Flow{}
		prev := map[conn]int64{}
		checked, relayed := 0, 0
		for _, f := range c.flows {
			byID[f.ID] = f
			if f.Size == 0 || f.ConnType == stream.ConnDelay || f.ConnType == stream.ConnPXNInit || f.Chunk != 0 {
				continue
			}
			k := conn{f.Src, f.Dst, f.Channel}
			p0, seen := first[k]
			if !seen {
				first[k], prev[k] = f, f.ID
				continue
			}
			waitsConn, delay := false, int64(-1)
			for _, d := range f.Deps {
				if d == prev[k] {
					waitsConn = true
				}
				if g := byID[d]; g.ConnType == stream.ConnDelay {
					delay = g.DelayPs
				}
			}
			prev[k] = f.ID
			checked++
			if f.ConnType == stream.ConnNet {
				relayed++
			}
			if tr == nil {
				if waitsConn || delay >= 0 || f.DelayPs != p0.DelayPs {
					t.Fatalf("no transport: flow %d waits on its connection (%v) or a delay node (%d ps), delay %d ps vs first step's %d", f.ID, waitsConn, delay, f.DelayPs, p0.DelayPs)
				}
				continue
			}
			if !waitsConn || delay < 0 {
				t.Fatalf("flow %d (%s %d->%d ch %d): waits on its connection %v, latency node %d ps", f.ID, f.ConnType, f.Src, f.Dst, f.Channel, waitsConn, delay)
			}
			if delay+f.DelayPs != p0.DelayPs {
				t.Errorf("flow %d: latency node %d ps + flow %d ps, want the first step's %d ps", f.ID, delay, f.DelayPs, p0.DelayPs)
			}
		}
		if checked < 2*16*14 || relayed == 0 {
			t.Fatalf("%d first-loop later steps checked (%d relayed by PXN), want every connection's", checked, relayed)
		}
	}
}

// A process driving several GPUs (gpus-per-process) launches each
// collective on them in turn: 8 GPUs at 4 us a launch take at least 32 us.
// Every rank then has one delay node of 32 us from its entry, which the
// join ending its part waits for; with one GPU per process, or under
// SimAI replay, there is none.
func TestLaunchFloor(t *testing.T) {
	tr := DefaultTransport()
	for _, kv := range []string{"launch=4", "gpus-per-process=8"} {
		if err := tr.Set(kv); err != nil {
			t.Fatal(err)
		}
	}
	if got := tr.LaunchFloorPs(); got != 32_000_000 {
		t.Fatalf("floor %d ps, want 8 x 4 us", got)
	}
	for _, kv := range []string{"gpus-per-process=0", "gpus-per-process=x", "launch=-1", "ll-bw=-3", "ll-bw=NaN"} {
		bad := tr
		if err := bad.Set(kv); err == nil {
			t.Errorf("%s accepted", kv)
		}
	}
	// One byte a slot at least, in code (Validate) and from flags (Set,
	// naming the key that broke it): 8 slots fit an 8-byte buffer, not a
	// 7-byte one, nor 9 slots in 8 bytes.
	for _, kv := range []string{"buffsize=7", "ll-buffsize=7", "ll128-buffsize=7", "slots=9"} {
		bad := Transport{Slots: 8, BuffSimple: 8, BuffLL: 8, BuffLL128: 8}
		if err := bad.Validate(); err != nil {
			t.Fatalf("8 slots of 8-byte buffers refused: %v", err)
		}
		if err := bad.Set(kv); err == nil || !strings.HasPrefix(err.Error(), "--transport "+strings.Split(kv, "=")[0]+"=") {
			t.Errorf("%s on 8-byte buffers: %v, want refused naming the key", kv, err)
		}
	}
	for _, bad := range []Transport{{Slots: 8, BuffSimple: 7, BuffLL: 8, BuffLL128: 8}, {Slots: 8, BuffSimple: 8, BuffLL: 7, BuffLL128: 8}, {Slots: 8, BuffSimple: 8, BuffLL: 8, BuffLL128: 7}, {Slots: 9, BuffSimple: 8, BuffLL: 8, BuffLL128: 8}, {Slots: 8, BuffSimple: 8, BuffLL: 8, BuffLL128: 8, LaunchUs: -1}, {Slots: 8, BuffSimple: 8, BuffLL: 8, BuffLL128: 8, LLBusGBps: -1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v validates", bad)
		}
	}
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 8, GPUType: "A100"})
	st := Step{Op: AllReduce, Size: 8, Group: TP}
	l := Layout{TP: 8, DP: 1, PP: 1, EP: 1}
	one1 := tr
	one1.GPUsPerProcess = 1
	for _, x := range []struct {
		opt  Options
		want int
	}{
		{Options{LaunchLatency: true, Transport: &tr}, 8},
		{Options{LaunchLatency: true, Transport: &one1}, 0},
		{Options{LaunchLatency: true, Transport: &tr, SendLatPs: 3_000_000}, 0},
	} {
		c, _ := s.run(t, x.opt, l, one(st))
		checkDAG(t, c.flows)
		floors := map[int64]bool{}
		for _, f := range c.flows {
			if f.ConnType == stream.ConnDelay && f.DelayPs == 32_000_000 {
				floors[f.ID] = true
			}
		}
		if len(floors) != x.want {
			t.Fatalf("%+v: %d launch-floor nodes, want %d", x.opt, len(floors), x.want)
		}
		ended := 0
		for _, f := range c.flows {
			for _, d := range f.Deps {
				if floors[d] && f.ConnType == stream.ConnDelay && f.DelayPs == 0 {
					ended++
				}
			}
		}
		if ended != x.want {
			t.Errorf("%+v: %d ranks' ends wait for their floor, want %d", x.opt, ended, x.want)
		}
	}
}

// An LL128 ring's first loop keeps its connections' order as a Simple
// ring's does, and its network hops carry no pace: the ring's proxy round
// in series with each slice paces them (cctx.ringHop). Its NVLink hops
// keep the GPU's step as their pace.
func TestLLRingPacedByRound(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "H100"})
	ib := DefaultTransport()
	if err := ib.Set("preset=h100-ib"); err != nil {
		t.Fatal(err)
	}
	st := Step{Op: AllGather, Size: 4 << 20, Group: DP}
	c, _ := s.run(t, Options{LaunchLatency: true, Algo: "ring", Proto: "ll128", PXN: "off", RingChannels: 2, Transport: &ib}, Layout{TP: 1, DP: 16, PP: 1, EP: 1}, one(st))
	type conn struct{ src, dst, ch int32 }
	prev := map[conn]int64{}
	ordered, net, intra := 0, 0, 0
	for _, f := range c.flows {
		if f.Size == 0 || f.ConnType == stream.ConnDelay {
			continue
		}
		k := conn{f.Src, f.Dst, f.Channel}
		if p, ok := prev[k]; ok && slices.Contains(f.Deps, p) {
			ordered++
		}
		prev[k] = f.ID
		if s.fab.server(f.Src) != s.fab.server(f.Dst) {
			net++
			if f.PacePs != 0 {
				t.Fatalf("network flow %d (%d->%d): pace %d ps, want none", f.ID, f.Src, f.Dst, f.PacePs)
			}
		} else if f.PacePs > 0 {
			intra++
		}
	}
	// 16 connections a channel, 14 later steps each in the first loop
	if ordered < 2*16*14 || net == 0 || intra == 0 {
		t.Fatalf("%d later steps wait on their connection (want at least %d), %d network flows, %d paced NVLink flows", ordered, 2*16*14, net, intra)
	}
}

// FuzzTransportSet: any --transport KEY=VALUE either fails with an error
// naming the flag or leaves a transport that Validate accepts; never a
// panic.
func FuzzTransportSet(f *testing.F) {
	for _, s := range []string{"preset=h100-efa", "preset=a100", "ll128-tail=131072", "ll128-tail=0", "tuner=aws-p5", "tuner=nccl", "p2p-chunk=524288", "p2p-chunk=0",
		"host-cpu=amd", "net-latency=75", "net-latency=NaN", "slots=0", "ring-op=1e7", "ll-bw=-1", "tree-op=7", "tree-bw=36.7", "tree-bw=-1", "tree-ll-bw=4", "tree-ll-first=share", "channel-split=cells", "channel-split=even", "tree-lat=legacy", "preset=a100-roce", "net-shared-buffers=0", "net-shared-buffers=2", "tree-ll128-send=whole", "tree-ll128-send=x", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, kv string) {
		tr := DefaultTransport()
		if err := tr.Set(kv); err != nil {
			if !strings.Contains(err.Error(), "--transport") {
				t.Fatalf("%q: error %q does not name the flag", kv, err)
			}
			return
		}
		if err := tr.Validate(); err != nil {
			t.Fatalf("%q accepted, then invalid: %v", kv, err)
		}
	})
}

// NCCL's grouped sends and receives (NCCL 2.28.7 enqueue.cc
// addP2pToPlan, paths.cc ncclTopoGetNchannels) by hand, with one NIC a
// GPU and AWS's 512 KiB step. 32 ranks on 32 p2p channels: channels per
// peer start at 2 and stay (2 x 32 ranks is not above 4 x 32); a 1 MiB
// share starts as one part (32 ranks leave each one channel of 32),
// doubled once to two parts of a step, in half steps (below 8 steps); 64
// MiB also in two parts (the per-peer cap), in full steps; 128 KiB, below
// the 256 KiB a part must exceed, is one part in quarter steps. NCCL's
// default 128 KiB step: 1 MiB in 2 parts, in full steps (8 steps of
// bytes). 64 ranks on 16 p2p channels (p5's 8 x 8: 2 x 8 ring channels):
// 2 x 64 is above 4 x 16, so one channel per peer and 64 MiB in one part.
func TestP2PPlan(t *testing.T) {
	aws := DefaultTransport()
	if err := aws.Set("p2p-chunk=524288"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tr          Transport
		bytes       int64
		n, channels int
		parts       int
		chunk       int64
	}{
		{aws, 1 << 20, 32, 32, 2, 256 << 10},
		{aws, 64 << 20, 32, 32, 2, 512 << 10},
		{aws, 128 << 10, 32, 32, 1, 128 << 10},
		{DefaultTransport(), 1 << 20, 32, 32, 2, 128 << 10},
		{aws, 64 << 20, 64, 16, 1, 512 << 10},
		{aws, 64 << 20, 16, 16, 2, 512 << 10},
	} {
		parts, chunk := c.tr.P2PPlan(c.bytes, c.n, 1, c.channels)
		if parts != c.parts || chunk != c.chunk {
			t.Errorf("%d B on %d ranks, %d channels, with %d B steps: %d parts of %d B steps, want %d of %d", c.bytes, c.n, c.channels, c.tr.P2PChunk, parts, chunk, c.parts, c.chunk)
		}
	}
}

// NCCL 2.23's spread of a lone collective over its channels
// (enqueue.cc scheduleCollTasksToPlan) by hand. AllReduce: cells of 8
// KiB (16 KiB of traffic, two a byte), a channel at least one: 8 KiB on
// the threshold's 2 channels takes 1, 16 KiB on 4 takes 2, 128 KiB on 16
// takes 16; 1 MiB on 16 (128 KiB of traffic a channel, 8 cells) takes 16;
// 24 KiB on 6 takes 3; 20 KiB on 4 (3 cells, the last short) takes 3.
// AllGather of 64 KiB on 32 ranks (2 KiB a rank, traffic 64 KiB; cells
// of 512 B a rank): on 8 channels 8 KiB of traffic a channel is under 16
// KiB, so a channel takes one cell, 512 B a rank: 4 channels.
// Broadcast: cells of 16 KiB, 48 KiB on 12 takes 3. One channel stays one.
func TestChannelCells(t *testing.T) {
	for _, c := range []struct {
		op       Op
		n        int
		size     int64
		nc, want int
	}{
		{AllReduce, 32, 8 << 10, 2, 1},
		{AllReduce, 32, 16 << 10, 4, 2},
		{AllReduce, 32, 128 << 10, 16, 16},
		{AllReduce, 32, 1 << 20, 16, 16},
		{AllReduce, 32, 24 << 10, 6, 3},
		{AllReduce, 32, 20 << 10, 4, 3},
		{AllGather, 32, 64 << 10, 8, 4},
		{Broadcast, 8, 48 << 10, 12, 3},
		{AllReduce, 32, 4 << 10, 1, 1},
	} {
		if got := channelCells(c.op, c.n, c.size, c.nc); got != c.want {
			t.Errorf("%v of %d B on %d ranks, %d channels: %d channels, want %d", c.op, c.size, c.n, c.nc, got, c.want)
		}
	}
}

// An LL128 ring's proxy round by hand (Plan.RingRoundPs), AllGather of 32
// MiB on 4 servers of 8 H100s with 8 x 400G NICs, 16 channels: a 64 KiB
// step, each GPU's proxy serving ceil(2 x 16 / 8) = 4 network ops a ring
// step. h100-efa: 4 x 2.4 us (its proxy op, fitted on NVLS-Tree) and the
// step's copy wholly behind the wire (ll128-tail 0; at NCCL's 36.7 GB/s a
// channel against the NICs' 25 GB/s share it adds nothing): 9.6 us, what
// a p5 LL128 ring step costs beyond its wire bytes at 32-256 KiB.
// h100-ib: 4 x (0.5 + 0.7 AR) us plus the step's first 128 KiB copied in
// series, 64 KiB / 36.7 GB/s (perChMaxRingLL128Bw).
func TestEFARingRound(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 32, GPUType: "H100", NICBW: 400e9})
	ranks := ranks32(32)
	for _, c := range []struct {
		preset string
		wantUs float64
	}{
		{"h100-efa", 4 * 2.4},
		{"h100-ib", 4*(0.5+0.7) + 65536/36.7e3},
	} {
		tr := DefaultTransport()
		if err := tr.Set("preset=" + c.preset); err != nil {
			t.Fatal(err)
		}
		pl, err := NewPlanner(s.m, s.fab, Options{LaunchLatency: true, Algo: "ring", Proto: "ll128", Transport: &tr})
		if err != nil {
			t.Fatal(err)
		}
		p, err := pl.Plan(AllGather, 32<<20, DP, ranks)
		if err != nil || p.Channels != 16 {
			t.Fatalf("%s: plan %+v, %v; want 16 channels", c.preset, p, err)
		}
		if got := float64(p.RingRoundPs) / 1e6; got < c.wantUs*0.995 || got > c.wantUs*1.005 {
			t.Errorf("%s: ring round %.3f us a step, want %.3f", c.preset, got, c.wantUs)
		}
	}
}

// A single-server NVLS channel's GPU work per NCCL chunk of x bytes is
// nvls-op plus x at nvls-bw, none from NCCL's full 128 KiB chunk up, a
// transfer's being its chunks' (4 for 256 KiB of 64 KiB chunks), and it
// paces the channel's uploads: a 256 MiB AllReduce on 8 H100s runs 16
// channels of 16 MiB in NCCL's 64 KiB chunk below 1 GiB, 256 a channel.
// Each upload is 64 KiB / 0.85 = 77102 wire bytes, 2 steps of 64 KiB at
// h100-ib's 0.5 us GPU step, and a chunk of work, 0.2 us + 65536 B / 20
// GB/s = 3.4768 us: a pace of 1 + 3.4768 us. The first chunk's work
// precedes its bytes (in its delay); later chunks' uploads delay nothing.
func TestNVLSWorkPaces(t *testing.T) {
	tr := DefaultTransport()
	for _, kv := range []string{"preset=h100-ib", "nvls-op=0.2", "nvls-bw=20"} {
		if err := tr.Set(kv); err != nil {
			t.Fatal(err)
		}
	}
	for _, x := range []struct{ b, want int64 }{{32 << 10, 1_838_400}, {64 << 10, 3_476_800}, {128 << 10, 0}, {0, 0}} {
		if got := tr.nvlsWorkPs(x.b); got != x.want {
			t.Errorf("work of a %d B chunk: %d ps, want %d", x.b, got, x.want)
		}
	}
	if got := nvlsChunkPs(256<<10, 64<<10, 3_476_800); got != 4*3_476_800 {
		t.Errorf("work of 256 KiB in 64 KiB chunks: %d ps, want 4 chunks'", got)
	}
	// A transfer of 1.25 chunks stands for 1.25 chunks' work, one under a
	// chunk for a whole chunk's.
	if got := nvlsChunkPs(80<<10, 64<<10, 3_476_800); got != 4_346_000 {
		t.Errorf("work of 80 KiB in 64 KiB chunks: %d ps, want 1.25 chunks' (4346000)", got)
	}
	if got := nvlsChunkPs(16<<10, 64<<10, 3_476_800); got != 3_476_800 {
		t.Errorf("work of 16 KiB in 64 KiB chunks: %d ps, want one chunk's", got)
	}
	for _, kv := range []string{"nvls-bw=-1", "nvls-bw=x", "nvls-op=-1"} {
		bad := tr
		if err := bad.Set(kv); err == nil {
			t.Errorf("%s accepted", kv)
		}
	}
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 8, GPUType: "H100"})
	c, _ := s.run(t, Options{LaunchLatency: true, Transport: &tr}, Layout{TP: 8, DP: 1, PP: 1, EP: 1}, one(Step{Op: AllReduce, Size: 256 << 20, Group: TP}))
	checkDAG(t, c.flows)
	const pace = 1_000_000 + 3_476_800
	var first, later int
	for _, f := range c.flows {
		if f.ConnType != stream.ConnNVLS || f.Src >= 8 || f.Size != 77102 {
			continue // not an upload
		}
		if f.ChunkCount != 256 {
			t.Fatalf("uploads in %d chunks, want 256", f.ChunkCount)
		}
		if f.PacePs != pace {
			t.Errorf("chunk %d: pace %d ps, want %d", f.Chunk, f.PacePs, pace)
		}
		switch {
		case f.Chunk == 0 && f.DelayPs >= 3_476_800:
			first++
		case f.Chunk > 0 && f.DelayPs == 0:
			later++
		default:
			t.Errorf("chunk %d: delay %d ps", f.Chunk, f.DelayPs)
		}
	}
	if first != 16*8 || later != 16*8*255 {
		t.Errorf("%d first and %d later uploads, want %d and %d", first, later, 16*8, 16*8*255)
	}
}

// A tree LL128 AllReduce under h100-efa (tree-op 4 us, tree-bw 30 GB/s,
// tree-ll128-send=whole): each later piece across servers holds its connection for the
// sender's runTreeSplit step, by hand on 2 servers of 8 (a server's
// chain enters at one GPU, the head): the child server's head reduces
// its chain child's lines and its own with 70% of its block (2 inputs)
// and sends up; the root's head reduces its chain child, the remote
// child and its own with its whole block (3 inputs) and sends down. 8
// MiB on 16 channels: NCCL's 72000-byte chunk, pieces of 64 KiB (69905
// wire bytes), one step each. The first piece pays the step's whole
// cost (0.5 us GPU + 18 us send proxy) after the hop latency, and before
// that its sender's work on the whole step (its own pace: the step leaves
// once the block has written all of it).
func TestTreeLL128StepPace(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "H100", NICBW: 400e9})
	efa := DefaultTransport()
	if err := efa.Set("preset=h100-efa"); err != nil {
		t.Fatal(err)
	}
	st := Step{Op: AllReduce, Size: 8 << 20, Group: DP}
	c, _ := s.run(t, Options{LaunchLatency: true, Algo: "tree", Proto: "ll128", Transport: &efa}, Layout{TP: 1, DP: 16, PP: 1, EP: 1}, one(st))
	w := 65536.0 * 16 / 15
	up := 4 + 2*w/(0.7*30e3)   // us
	down := 4 + 3*w/(1.0*30e3) // us
	seen := map[string]int{}
	for _, f := range c.flows {
		if f.ConnType != stream.ConnTree || s.fab.server(f.Src) == s.fab.server(f.Dst) {
			continue
		}
		if f.Chunk == 0 {
			if work := float64(f.PacePs) / 1e6; f.DelayPs < usToPs(18.5+work) || math.Abs(work-up) > 0.005*up && math.Abs(work-down) > 0.005*down {
				t.Errorf("first network piece %d: delay %.2f us, pace %.2f: want the step's 18.5 after its whole step's work, %.3f (up) or %.3f (down)", f.ID, float64(f.DelayPs)/1e6, work, up, down)
			}
			continue
		}
		got := float64(f.PacePs) / 1e6
		switch {
		case math.Abs(got-up) < 0.005*up:
			seen["up"]++
		case math.Abs(got-down) < 0.005*down:
			seen["down"]++
		default:
			t.Fatalf("network piece %d (%d->%d, chunk %d): pace %.3f us, want %.3f (up) or %.3f (down)", f.ID, f.Src, f.Dst, f.Chunk, got, up, down)
		}
	}
	if seen["up"] == 0 || seen["down"] == 0 || seen["up"] != seen["down"] {
		t.Fatalf("later network pieces: %v, want as many up as down, some of each", seen)
	}
}

// A tree LL AllReduce under a100 (tree-ll-bw 4 GB/s, no fixed work): a
// later piece across servers holds its connection for its sender's
// inputs' wire bytes at the block's share of 4 GB/s (the child server's
// head: its chain child's and its own with 70% of the block; the root's
// head: three inputs with all of it), and a connection's first piece
// pays the step's whole cost (0.5 us GPU + 4 us send proxy) after the
// hop latency, where without the LL rate (tree-ll-bw=0) it pays its
// share: 128 KiB on 2 servers of 8 A100s, LL forced, 16 channels of 8
// KiB, each one LL step of 16 KiB wire bytes cut into 8 pieces of 2 KiB,
// so the first piece's delay grows by 4.5 x 7/8 us; with
// tree-ll-first=share it stays its share, the pace the same.
func TestTreeLLStepPace(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "A100", NICBW: 200e9})
	st := Step{Op: AllReduce, Size: 128 << 10, Group: DP}
	run := func(kv ...string) []stream.Flow {
		tr := DefaultTransport()
		for _, k := range kv {
			if err := tr.Set(k); err != nil {
				t.Fatal(err)
			}
		}
		c, _ := s.run(t, Options{LaunchLatency: true, Algo: "tree", Proto: "ll", Transport: &tr}, Layout{TP: 1, DP: 16, PP: 1, EP: 1}, one(st))
		var net []stream.Flow
		for _, f := range c.flows {
			if f.ConnType == stream.ConnTree && s.fab.server(f.Src) != s.fab.server(f.Dst) {
				net = append(net, f)
			}
		}
		return net
	}
	type conn struct{ src, dst, ch int32 }
	share := map[conn]int64{}
	for _, f := range run("preset=a100", "tree-ll-bw=0") {
		if f.Chunk == 0 {
			share[conn{f.Src, f.Dst, f.Channel}] = f.DelayPs
		}
	}
	seen := map[string]int{}
	pace := map[int64]int64{}
	for _, f := range run("preset=a100") {
		pace[f.ID] = f.PacePs
		if f.Chunk == 0 {
			if f.Size != 2048 {
				t.Fatalf("first network piece %d: %d B, want 2048", f.ID, f.Size)
			}
			if d := f.DelayPs - share[conn{f.Src, f.Dst, f.Channel}]; d != usToPs(4.5)*7/8 {
				t.Errorf("first network piece %d: delay %.4f us over its share's, want the rest of the step's 4.5 us, %.4f", f.ID, float64(d)/1e6, 4.5*7/8)
			}
			continue
		}
		up := 2 * float64(f.Size) / (0.7 * 4e3)   // us
		down := 3 * float64(f.Size) / (1.0 * 4e3) // us
		switch got := float64(f.PacePs) / 1e6; {
		case math.Abs(got-up) < 0.005*up:
			seen["up"]++
		case math.Abs(got-down) < 0.005*down:
			seen["down"]++
		default:
			t.Fatalf("network piece %d (%d->%d, chunk %d, %d B): pace %.3f us, want %.3f (up) or %.3f (down)", f.ID, f.Src, f.Dst, f.Chunk, f.Size, got, up, down)
		}
	}
	if len(share) != 2*16 || seen["up"] == 0 || seen["up"] != seen["down"] {
		t.Fatalf("%d first network pieces (want 32), later ones %v: want as many up as down, some of each", len(share), seen)
	}
	// tree-ll-first=share (h100-ib's): the same pieces at the same pace,
	// a connection's first piece paying only its share of the step
	n := 0
	for _, f := range run("preset=a100", "tree-ll-first=share") {
		p, ok := pace[f.ID]
		if f.Chunk == 0 && f.DelayPs != share[conn{f.Src, f.Dst, f.Channel}] || !ok || f.PacePs != p {
			t.Fatalf("tree-ll-first=share: network piece %d (chunk %d): delay %d ps, pace %d, want %d and %d", f.ID, f.Chunk, f.DelayPs, f.PacePs, share[conn{f.Src, f.Dst, f.Channel}], p)
		}
		n++
	}
	if n != len(pace) {
		t.Fatalf("tree-ll-first=share: %d network pieces, want %d", n, len(pace))
	}
}

// A Simple ring's chunk is NCCL_STEPS/2 of the Simple buffer's steps
// (enqueue.cc calcCollChunking: chunkSize = buffSize/NCCL_STEPS x
// chunkSteps), so it follows buffsize: 2 MiB at NCCL's 4 MiB buffer, 4
// MiB at the 8 MiB aws-ofi-nccl sets on AWS (h100-efa). 16 ranks on 2
// channels with 8 MiB a rank and channel move it in 4, 2 and 1 loops of
// such chunks, every ring flow one chunk.
func TestRingSimpleChunkFollowsBuffer(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "H100"})
	st := Step{Op: AllGather, Size: 16 * 2 * 8 << 20, Group: DP}
	l := Layout{TP: 1, DP: 16, PP: 1, EP: 1}
	for _, c := range []struct {
		kv    []string
		chunk int64
	}{{nil, 2 << 20}, {[]string{"preset=h100-ib"}, 2 << 20}, {[]string{"preset=h100-efa"}, 4 << 20}, {[]string{"preset=h100-ib", "buffsize=16777216"}, 8 << 20}} {
		tr := DefaultTransport()
		for _, kv := range c.kv {
			if err := tr.Set(kv); err != nil {
				t.Fatal(err)
			}
		}
		got, _ := s.run(t, Options{LaunchLatency: true, Algo: "ring", Proto: "simple", PXN: "off", RingChannels: 2, Transport: &tr}, l, one(st))
		sizes := map[int64]int{}
		for _, f := range got.flows {
			if f.ConnType == stream.ConnRing || f.ConnType == stream.ConnNet {
				sizes[f.Size]++
			}
		}
		if len(sizes) != 1 || sizes[c.chunk] != 16*2*15*int(8<<20/c.chunk) {
			t.Errorf("%v: ring flow sizes %v, want %d flows of %d B", c.kv, sizes, 16*2*15*int(8<<20/c.chunk), c.chunk)
		}
	}
}

// The default transport is the preset of the GPU's generation and the
// NICs' network; keys go on top of it, and preset=none undoes it back to
// DefaultTransport.
func TestNewTransportPresetFor(t *testing.T) {
	for _, c := range []struct{ gpu, network, want string }{
		{"A100", "", "a100"}, {"A800", "", "a100"}, {"H100", "", "h100-ib"}, {"H800", "", "h100-ib"}, {"H20", "", "h100-ib"}, {"B200", "", "h100-ib"}, {"X9", "", "none"},
		{"A100", topo.NetIB, "a100"}, {"A800", topo.NetRoCE, "a100-roce"}, {"A100", topo.NetEFA, "a100-efa"},
		{"H100", topo.NetIB, "h100-ib"}, {"H800", topo.NetRoCE, "h100-roce"}, {"H100", topo.NetEFA, "h100-efa"}, {"B200", topo.NetEFA, "h100-efa"}, {"X9", topo.NetEFA, "none"},
	} {
		if got := PresetFor(c.gpu, c.network); got != c.want {
			t.Errorf("PresetFor(%s, %q) = %s, want %s", c.gpu, c.network, got, c.want)
		}
		tr, err := NewTransport(c.gpu, c.network, nil)
		ref := DefaultTransport()
		if err2 := ref.Set("preset=" + c.want); err != nil || err2 != nil || tr != ref {
			t.Errorf("NewTransport(%s, %q) = %+v, %v; want preset %s's %+v", c.gpu, c.network, tr, err, c.want, ref)
		}
		if tr, err := NewTransport(c.gpu, c.network, []string{"preset=none"}); err != nil || tr != DefaultTransport() {
			t.Errorf("NewTransport(%s, %q, preset=none) = %+v, %v; want DefaultTransport", c.gpu, c.network, tr, err)
		}
	}
	tr, err := NewTransport("H100", "", []string{"slots=4"})
	if err != nil || tr.Slots != 4 || tr.SendProxyUs != 4 {
		t.Errorf("NewTransport(H100, slots=4) = %+v, %v; want h100-ib's costs with 4 slots", tr, err)
	}
	if _, err := NewTransport("H100", "", []string{"preset=h200"}); err == nil || !strings.Contains(err.Error(), "preset") {
		t.Errorf("preset=h200: error %v, want one naming the key", err)
	}
}

// A RoCE preset is its InfiniBand one without adaptive routing's extra
// message (NCCL enables it only on an InfiniBand link layer), and nothing
// else.
func TestRoCEPresetsDropAdaptiveRouting(t *testing.T) {
	for ib, roce := range map[string]string{"h100-ib": "h100-roce", "a100": "a100-roce"} {
		a, b := DefaultTransport(), DefaultTransport()
		if err := errors.Join(a.Set("preset="+ib), b.Set("preset="+roce)); err != nil {
			t.Fatal(err)
		}
		if a.AROpUs == 0 || a.ARThreshold == 0 || b.AROpUs != 0 || b.ARThreshold != 0 {
			t.Errorf("%s: ar-op %g above %d B; %s: %g above %d B", ib, a.AROpUs, a.ARThreshold, roce, b.AROpUs, b.ARThreshold)
		}
		a.AROpUs, a.ARThreshold = 0, 0
		if a != b {
			t.Errorf("%s without adaptive routing %+v, %s %+v", ib, a, roce, b)
		}
	}
}

// The summary's transport line names the preset in force and the keys
// set after it.
func TestTransportLabel(t *testing.T) {
	for _, c := range []struct {
		keys []string
		want string
	}{
		{nil, "h100-ib (auto: H100)"},
		{[]string{"preset=auto"}, "h100-ib (auto: H100)"},
		{[]string{"slots=4"}, "h100-ib (auto: H100) slots=4"},
		{[]string{"slots=4", "preset=h100-efa", "launch=2"}, "h100-efa launch=2"},
		{[]string{"preset=none", "preset=auto"}, "h100-ib (auto: H100)"},
	} {
		if got := TransportLabel("H100", "", c.keys); got != c.want {
			t.Errorf("TransportLabel(H100, %q) = %q, want %q", c.keys, got, c.want)
		}
	}
	if got, want := TransportLabel("H100", topo.NetEFA, []string{"slots=4"}), "h100-efa (auto: H100, efa) slots=4"; got != want {
		t.Errorf("TransportLabel(H100, efa, slots=4) = %q, want %q", got, want)
	}
}

// An LL128 ring step's copy beyond its first ll128-tail bytes overlaps the
// wire at the channel's share of the NICs its ring's ranks send through
// out of a server. Hand-computed on HGX H100 (8 x 50 GB/s NICs, 8 GPUs), a
// 576000-byte step (444928 bytes past the 131072-byte tail, 474590 on the
// wire), 4 channels, the copy at 36.7 GB/s: the tail 3571.444 ns in
// series; past it 12123.379 ns of copy against the wire at the channel's
// share: 100 GB/s for a full server's ring (4745.9 ns: 7377.479 ns left in
// series), 50 GB/s for 4 ranks a server (9491.8 ns: 2631.579 left) and
// 12.5 GB/s for a data-parallel ring of one GPU a server (its own NIC:
// 37967.2 ns, the copy wholly behind the wire).
func TestLL128CopyBehindTheRingsNICs(t *testing.T) {
	m := ServerModel{GPUs: 8, NICs: 8, NICGBps: 50}
	for _, c := range []struct {
		ppn  int
		nics float64
		copy int64
	}{
		{8, 400, 3571444 + 7377479},
		{4, 200, 3571444 + 2631579},
		{1, 50, 3571444},
	} {
		nics := ringNICsGBps(m, c.ppn, 8)
		if nics != c.nics {
			t.Errorf("%d ranks a server: NICs %v GB/s, want %v", c.ppn, nics, c.nics)
		}
		if got := ll128CopyPs(576000, 131072, 36.7, nics, 4); absPs(got-c.copy) > 2 {
			t.Errorf("%d ranks a server: copy in series %d ps, want %d", c.ppn, got, c.copy)
		}
	}
	// No NIC rate in the model: the whole copy in series.
	if got := ll128CopyPs(576000, 131072, 36.7, ringNICsGBps(ServerModel{GPUs: 8}, 1, 8), 4); absPs(got-15694823) > 2 {
		t.Errorf("no NIC rate: %d ps, want the whole copy, 15694823", got)
	}
}

// The copy hides behind the slower of the links a step crosses: the NICs
// out of a server or, with several ranks a server, the NVLink of the GPU
// with most of the ring's connections (channels - channels/ppn of them).
// Hand-computed: 8 A100s (NVLink 240 GB/s) with 8 x 800G NICs (100 GB/s)
// on a full server's ring of 22 channels: 20 connections a GPU at 12 GB/s,
// 264 GB/s over the channels, under the NICs' 800; a 576000-byte LL128
// step (tail 0, copied at 20 GB/s: 28800 ns) then crosses in 614400 /
// 12 = 51200 ns and its copy adds nothing, where against the NICs' 36.4
// GB/s a channel (16896 ns) 11904 ns were in series. With 200G NICs the
// NICs' 200 GB/s are the slower; 8 H100s (NVLink 370.8) at 8 x 400G and 16
// channels: 14 connections, 423.8 GB/s, the NICs' 400; one rank a
// server: its NIC alone.
func TestLL128CopyBehindTheSlowerLink(t *testing.T) {
	a100 := func(nic float64) ServerModel { return ServerModel{GPUs: 8, NICs: 8, NICGBps: nic, NVLinkGBps: 240} }
	h100 := ServerModel{GPUs: 8, NICs: 8, NICGBps: 50, NVLinkGBps: 370.8}
	for _, c := range []struct {
		name          string
		m             ServerModel
		ppn, channels int
		want          float64
	}{
		{"A100 800G", a100(100), 8, 22, 264},
		{"A100 200G", a100(25), 8, 22, 200},
		{"H100 400G", h100, 8, 16, 400},
		{"H100 one rank a server", h100, 1, 16, 50},
		{"no NIC rate", ServerModel{GPUs: 8, NVLinkGBps: 240}, 8, 22, 0},
	} {
		if got := ringWireGBps(c.m, c.ppn, 8, c.channels); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: %v GB/s, want %v", c.name, got, c.want)
		}
	}
	if got := ll128CopyPs(576000, 0, 20, ringWireGBps(a100(100), 8, 8, 22), 22); got != 0 {
		t.Errorf("A100 800G: copy in series %d ps, want 0 (behind the NVLink)", got)
	}
	if got := ll128CopyPs(576000, 0, 20, ringNICsGBps(a100(100), 8, 8), 22); absPs(got-11904000) > 2 {
		t.Errorf("A100 800G against the NICs alone: %d ps, want 11904000", got)
	}
}

func absPs(x int64) int64 { return max(x, -x) }

// An NVLS-Tree loop's reduce work (nvls-tree-op, nvls-tree-bw) rides on
// each GPU's reduced shard, the switch's transfer to it: 16 MiB on 2 x 8
// H100 run in 64 KiB shards (NCCL's 128 KiB chunk per head cut below 4 x
// channels x heads chunks), so 2 us plus 65536 B at 1.3 GB/s, 52.41 us,
// holds the GPU's next shard (pace_ps) and delays the first (delay_ps);
// the loop's downloads from the switch carry none of it, and without the
// keys nothing does.
func TestNVLSTreeLoopWork(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "H100"})
	st := Step{Op: AllReduce, Size: 16 << 20, Group: DP}
	l := Layout{TP: 1, DP: 16, PP: 1, EP: 1}
	const w = 2e6 + 65536*1e3/1.3 // ps
	for _, keys := range [][]string{{"preset=h100-ib", "nvls-tree-op=2"}, {"preset=h100-ib", "nvls-tree-bw=0"}} {
		tr := DefaultTransport()
		for _, kv := range keys {
			if err := tr.Set(kv); err != nil {
				t.Fatal(err)
			}
		}
		want := w
		if tr.NVLSTreeGBps == 0 {
			want = 0
		}
		c, _ := s.run(t, Options{LaunchLatency: true, Algo: "nvls-tree", Transport: &tr}, l, one(st))
		shards := map[int32]int{} // reduced shards by loop
		for _, f := range c.flows {
			if f.ConnType != stream.ConnNVLS || f.Src < int32(s.fab.GPUs) {
				continue
			}
			if f.Size != 77102 { // a loop's download, not the 64 KiB shard at NVLS's 85%
				if f.PacePs != 0 || f.DelayPs != 0 {
					t.Fatalf("%v: download %d (%d -> %d, %d B) carries pace %d, delay %d ps", keys, f.ID, f.Src, f.Dst, f.Size, f.PacePs, f.DelayPs)
				}
				continue
			}
			shards[f.Chunk]++
			first := 0.0
			if f.Chunk == 0 {
				first = want
			}
			if math.Abs(float64(f.PacePs)-want) > 100 || math.Abs(float64(f.DelayPs)-first) > 100 {
				t.Fatalf("%v: loop %d's shard to GPU %d: pace %d, delay %d ps, want %.0f and %.0f", keys, f.Chunk, f.Dst, f.PacePs, f.DelayPs, want, first)
			}
		}
		if len(shards) != 2 || shards[0] != shards[1] || shards[0] < 16 {
			t.Errorf("%v: reduced shards by loop %v, want 2 loops alike, 16 GPUs x channels each", keys, shards)
		}
	}
}

// A network step's steady interval is its slowest stage, its latency the
// stages' sum (StepPacePs, StepPs), by hand: h100-ib's Simple step is
// 0.5 us of GPU, 4 of send and 4 of receive proxy (8.5 us of latency), so
// its connection steps every 4 us; the credit loop, (8.5 + 20) / 8 =
// 3.5625 us a slot, is shorter. h100-efa's 18 us proxies: 36.5 and 18. With
// 2 slots the loop, 14.25 us, binds; LL's steps skip the receive proxy
// (4.5 us of latency, 4 a step); inside a server only the GPU's 0.5 us.
func TestStepPace(t *testing.T) {
	for _, c := range []struct {
		keys          []string
		p             Proto
		inter         bool
		latency, pace int64
	}{
		{[]string{"preset=h100-ib"}, Simple, true, 8_500_000, 4_000_000},
		{[]string{"preset=h100-efa"}, Simple, true, 36_500_000, 18_000_000},
		{[]string{"preset=h100-ib", "slots=2"}, Simple, true, 14_250_000, 14_250_000},
		{[]string{"preset=h100-ib"}, LL, true, 4_500_000, 4_000_000},
		{[]string{"preset=h100-ib"}, Simple, false, 500_000, 500_000},
	} {
		tr := DefaultTransport()
		for _, kv := range c.keys {
			if err := tr.Set(kv); err != nil {
				t.Fatal(err)
			}
		}
		if got := tr.StepPs(c.p, c.inter); got != c.latency {
			t.Errorf("%v %v inter %v: step latency %d ps, want %d", c.keys, c.p, c.inter, got, c.latency)
		}
		if got := tr.StepPacePs(c.p, c.inter); got != c.pace {
			t.Errorf("%v %v inter %v: step pace %d ps, want %d", c.keys, c.p, c.inter, got, c.pace)
		}
	}
}

// Grouped receives (a2aRecvOps, a2aProxies), by hand: 3 servers of 4
// ranks. With PXN a rank receives from each other server's 4 ranks
// through one proxy there (one receive comm): 1 op a server under
// InfiniBand's 8 (2 ops), 2 under max-recvs 2 (4 ops), 4 under 1 (8); a
// rank relays its server's 4 sends on each of its 2 connections (8 sends).
// Direct, every remote rank is its own proxy: 8 receives, 8 sends. A
// round is that times the parts (2). Every preset takes 1 until the
// fabric's price follows grouped receives (Transport.MaxRecvs).
func TestA2AGroupedRecvs(t *testing.T) {
	nodes := [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}}
	for _, c := range []struct {
		pxn      bool
		maxRecvs int
		recvs    int
	}{{true, 8, 2}, {true, 2, 4}, {true, 1, 8}, {true, 0, 8}, {false, 8, 8}} {
		if got := a2aRecvOps(nodes, 0, c.pxn, c.maxRecvs); got != c.recvs {
			t.Errorf("pxn %v max-recvs %d: %d receive ops a channel, want %d", c.pxn, c.maxRecvs, got, c.recvs)
		}
		lay := a2aLayoutCached(nodes, 12, 2, c.pxn, c.maxRecvs)
		if want := int32(2 * (8 + c.recvs)); lay.ops[5] != want {
			t.Errorf("pxn %v max-recvs %d: %d ops a round, want %d", c.pxn, c.maxRecvs, lay.ops[5], want)
		}
	}
	for _, c := range []struct {
		preset string
		want   int
	}{{"h100-ib", 1}, {"h100-efa", 1}, {"a100", 1}, {"a100-efa", 1}} {
		tr := DefaultTransport()
		if err := tr.Set("preset=" + c.preset); err != nil {
			t.Fatal(err)
		}
		if tr.MaxRecvs != c.want {
			t.Errorf("%s: max-recvs %d, want %d", c.preset, tr.MaxRecvs, c.want)
		}
	}
	tr := DefaultTransport()
	for _, bad := range []string{"max-recvs=0", "max-recvs=-1", "max-recvs=x"} {
		if err := tr.Set(bad); err == nil || !strings.Contains(err.Error(), "max-recvs") {
			t.Errorf("%s: error %v, want one naming max-recvs", bad, err)
		}
	}
}

// A tree step's work with no step cost to ride on would be dropped by
// stepCosts without a word (preset=none,tree-bw=1 gave 49.51 us at 2 x 8
// H100 1 MiB, as without it): NewTransport refuses it naming the key, in
// either order of the keys, and takes it once any step cost is set.
func TestTreeWorkNeedsStepCosts(t *testing.T) {
	for _, c := range []struct {
		keys []string
		bad  string
	}{
		{[]string{"preset=none", "tree-bw=1"}, "tree-bw"},
		{[]string{"preset=none", "tree-ll-bw=3"}, "tree-ll-bw"},
		{[]string{"tree-op=2", "preset=none", "tree-op=2"}, "tree-op"},
		{[]string{"preset=none", "tree-bw=1", "gpu-step=0.5"}, ""},
		{[]string{"tree-bw=1", "preset=none", "send-proxy=4", "tree-bw=1"}, ""},
		{[]string{"preset=none", "proxy-op=0.3", "tree-bw=1"}, ""},
		{[]string{"preset=h100-ib", "tree-bw=1"}, ""},
		{[]string{"preset=none"}, ""},
	} {
		_, err := NewTransport("H100", "", c.keys)
		switch {
		case c.bad == "" && err != nil:
			t.Errorf("%v: %v, want accepted", c.keys, err)
		case c.bad != "" && (err == nil || !strings.HasPrefix(err.Error(), "--transport "+c.bad+"=")):
			t.Errorf("%v: error %v, want one naming %s", c.keys, err, c.bad)
		}
	}
	for p := range TransportPresets {
		if _, err := NewTransport("H100", "", []string{"preset=" + p}); err != nil {
			t.Errorf("preset %s: %v", p, err)
		}
	}
}

// NCCL's shared p2p buffers (p2pSubs, Transport.p2pPacePs), by hand. A
// channel's subs: 2 x 8 puts a rank's 8 remote peers on one base (1), part
// 1 on base + 8 (4-bit reverse of 1 on 16 channels): 8 on each; 16 servers
// of one rank on bases 1-15 in 2 parts: channel 9 takes base 9's part 0
// and base 1's part 1, 2; 3 servers of 16 ranks: two bases of 8 a server;
// 18 servers of 8 on 16 channels wrap base 17 onto base 1, but in another
// batch (another opCount, another args): 8, NCCL's batch; one server:
// none. The pace under h100-ib (a 4 us stage, a 28.5 us credit loop:
// 8.5 us of work and a 20 us round trip): 8 subs leave 16/8 = 2 steps in
// flight, so 4 steps start at 0, 4, 28.5 and 32.5 us (mean gap 32.5/3),
// 2 steps a stage apart, 1000 steps 499 loops and a stage over 999 gaps;
// 2 subs or none keep NCCL_STEPS (8) and StepPacePs; 20 subs leave 1
// (16/20 rounds to 0: one at least), a loop a step.
func TestP2PSharedSteps(t *testing.T) {
	server := func(first, n int) []int {
		l := make([]int, n)
		for i := range l {
			l[i] = first + i
		}
		return l
	}
	servers := func(count, ranks int) [][]int {
		var nodes [][]int
		for s := range count {
			nodes = append(nodes, server(s*ranks, ranks))
		}
		return nodes
	}
	for _, c := range []struct {
		nodes           [][]int
		parts, channels int
		subs            int
	}{
		{servers(2, 8), 1, 16, 8}, {servers(2, 8), 2, 16, 8}, {servers(16, 1), 2, 16, 2},
		{servers(3, 16), 1, 32, 8}, {servers(17, 8), 1, 16, 8}, {servers(18, 8), 1, 16, 8}, {servers(1, 8), 2, 16, 0},
	} {
		if got := p2pSubs(c.nodes, c.parts, c.channels); got != c.subs {
			t.Errorf("%d servers of %d, %d parts on %d channels: %d subs a channel, want %d", len(c.nodes), len(c.nodes[0]), c.parts, c.channels, got, c.subs)
		}
	}
	tr := DefaultTransport()
	if err := tr.Set("preset=h100-ib"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		subs  int
		steps int64
		pace  int64
	}{{8, 4, 10_833_333}, {8, 2, 4_000_000}, {8, 1000, 14_239_739}, {2, 100, 4_000_000}, {0, 100, 4_000_000}, {20, 3, 28_500_000}} {
		if got := tr.p2pPacePs(Simple, c.subs, c.steps); got != c.pace {
			t.Errorf("h100-ib, %d subs, %d steps: %d ps a step, want %d", c.subs, c.steps, got, c.pace)
		}
	}
	if err := tr.Set("net-shared-buffers=2"); err == nil || !strings.Contains(err.Error(), "net-shared-buffers") {
		t.Errorf("net-shared-buffers=2: %v, want an error naming the key", err)
	}
}
