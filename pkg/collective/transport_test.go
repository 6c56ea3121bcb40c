package collective

import "testing"

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

// A GPU's proxy round over its NVLS-Tree connections is a send and a
// receive per tree edge of its server in every channel (hand-counted on
// NCCL's double binary tree: over 4 servers tree 0 is 0-2, 2-1, 2-3 and
// tree 1 its mirror 3-1, 1-2, 1-0, even channels on tree 0).
func TestProxyRounds(t *testing.T) {
	const op = 1_000_000 // 1 us
	for _, x := range []struct {
		nodes, channels int
		want            []int64
	}{
		{2, 16, []int64{32 * op, 32 * op}},                   // one edge each, 16 channels
		{4, 16, []int64{32 * op, 64 * op, 64 * op, 32 * op}}, // 1+1, 1+3, 3+1, 1+1 edges
		{4, 1, []int64{2 * op, 2 * op, 6 * op, 2 * op}},      // tree 0 only
	} {
		trees := [2]serverTree{newServerTree(x.nodes, 0), newServerTree(x.nodes, 1)}
		got := proxyRounds(trees, x.nodes, x.channels, 1<<30, op)
		if len(got) != len(x.want) {
			t.Fatalf("%d servers: %d rounds, want %d", x.nodes, len(got), len(x.want))
		}
		for j := range got {
			if got[j] != x.want[j] {
				t.Errorf("%d servers, %d channels: server %d round %d ps, want %d", x.nodes, x.channels, j, got[j], x.want[j])
			}
		}
	}
	// A channel with no data (size below the channel count) costs nothing.
	trees := [2]serverTree{newServerTree(2, 0), newServerTree(2, 1)}
	if got := proxyRounds(trees, 2, 16, 4, op); got[0] != 4*2*op {
		t.Errorf("4 bytes over 16 channels: round %d ps, want %d (4 channels carry data)", got[0], 4*2*op)
	}
	if proxyRounds(trees, 2, 16, 1<<20, 0) != nil {
		t.Errorf("no proxy cost: want no rounds")
	}
	var bad Transport = DefaultTransport()
	if err := bad.Set("proxy-op=-1"); err == nil {
		t.Errorf("proxy-op=-1 accepted")
	}
	bad.ProxyOpUs = -1
	if err := bad.Validate(); err == nil {
		t.Errorf("a negative proxy-op validates")
	}
}
