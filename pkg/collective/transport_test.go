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
	for _, kv := range []string{"proxy-op=-1", "nvls-chunk=0", "nvls-chunk=-5"} {
		if err := bad.Set(kv); err == nil {
			t.Errorf("%s accepted", kv)
		}
	}
	bad.ProxyOpUs = -1
	if err := bad.Validate(); err == nil {
		t.Errorf("a negative proxy-op validates")
	}
}
