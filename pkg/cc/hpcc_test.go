package cc

import (
	"math"
	"testing"
)

// hpccPath feeds one-hop INT to an HPCC-family algorithm, one full-RTT
// update per call. The QP: 100 Gb/s NIC, base RTT 10 µs, so the BDP window
// is 100e9·10e-6/8 = 125 000 bytes and T = BaseWin·8/LineRate = 10 µs.
type hpccPath struct {
	alg     Algorithm
	s       State
	hist    HopHistory
	now     int64
	tx      int64 // the hop's cumulative tx bytes
	ack, nx int64
}

func newHPCCPath(t *testing.T, mode int, p Params, qlen0 int64) *hpccPath {
	t.Helper()
	a, err := New(mode, p)
	if err != nil {
		t.Fatal(err)
	}
	h := &hpccPath{alg: a, s: State{LineRate: 100 * gbps, BaseRTT: 10 * us, BaseWin: 125000}}
	a.Init(&h.s)
	// First ACK: only the reference record (idle hop, queue qlen0; the
	// queue term uses the smaller of two consecutive queue samples).
	h.feed(0, 0, qlen0, true)
	return h
}

// feed delivers an ACK whose single hop sent txBytes over tau with queue
// qlen at both ends; full makes it the first ACK of a new RTT.
func (h *hpccPath) feed(tau, txBytes, qlen int64, full bool) {
	h.now += tau
	h.tx += txBytes
	if full {
		h.ack = h.nx + 1
		h.nx += 125000
	} else {
		h.ack = h.nx - 1000 // below the sequence recorded at the last update
	}
	fb := Feedback{Now: h.now, AckSeq: h.ack, SndNxt: h.nx, NHops: 1, Prev: &h.hist}
	fb.Hops[0] = IntHop{TimePs: h.now, TxBytes: h.tx, QLen: qlen, LineRate: 100 * gbps}
	h.alg.OnFeedback(&h.s, &fb)
}

// One hop at U = 2η = 1.9: over τ = T = 10 µs the hop sent 125 000 bytes
// (txRate/B = 1e11/1e11 = 1.0) and holds 112 500 bytes (qlen/(B·T) =
// 112500/125000 = 0.9). τ = T, so the EWMA takes U whole: U* = 1.9,
// k = U*/η = 2, and R = Rc/k + RateAI = 100G/2 + 50M = 50.05 Gb/s, i.e. the
// window halves: BaseWin·R/LineRate = 62 500 + 62.5 bytes (W/2 + W_AI).
func TestHPCCHalvesAtTwiceTarget(t *testing.T) {
	h := newHPCCPath(t, ModeHPCC, DefaultParams(), 112500)
	h.feed(10*us, 125000, 112500, true)
	if !relClose(hpccOf(&h.s).ustar, 1.9, 1e-12) {
		t.Fatalf("U* %.15g, want 1.9", hpccOf(&h.s).ustar)
	}
	if !relClose(h.s.Rate, 50.05e9, 1e-12) || hpccOf(&h.s).refRate != h.s.Rate {
		t.Fatalf("rate %.3f ref %.3f, want 50.05e9 committed", h.s.Rate, hpccOf(&h.s).refRate)
	}
	if h.s.BaseWin != 125000 {
		t.Fatalf("BaseWin %d: HPCC leaves the window to VAR_WIN scaling", h.s.BaseWin)
	}
	if w := float64(h.s.BaseWin) * h.s.Rate / h.s.LineRate; !relClose(w, 62562.5, 1e-12) {
		t.Fatalf("effective window %.3f, want 62562.5", w)
	}
}

// With MI_THRESH 5 (ns-3's default) a lightly loaded hop, U = 0.5 (62 500
// bytes in 10 µs, empty queue; k = 0.5/0.95 < 1), grows the reference rate
// additively by RATE_AI per RTT for five RTTs, then the sixth update is
// multiplicative: Rc/k + AI = 50.3G·1.9 + 50M = 95.62 Gb/s, stage back to 0.
func TestHPCCAdditiveThenMultiplicative(t *testing.T) {
	p := DefaultParams()
	p.MiThresh = 5
	h := newHPCCPath(t, ModeHPCC, p, 112500)
	h.feed(10*us, 125000, 112500, true) // → 50.05G as above
	want := []struct {
		rate  float64
		stage int
	}{
		{50.10e9, 1}, {50.15e9, 2}, {50.20e9, 3}, {50.25e9, 4}, {50.30e9, 5},
		{95.62e9, 0},
		{95.67e9, 1},
	}
	for i, w := range want {
		h.feed(10*us, 62500, 0, true)
		if !relClose(h.s.Rate, w.rate, 1e-12) || hpccOf(&h.s).stage != w.stage {
			t.Fatalf("update %d: rate %.1f stage %d, want %.1f %d", i+1, h.s.Rate, hpccOf(&h.s).stage, w.rate, w.stage)
		}
	}
}

// SimAI ships MI_THRESH 0: every update is multiplicative, and an idle hop
// (U* = 0) sends the QP straight to line rate (ns-3 divides by zero there).
func TestHPCCIdleJumpsToLineRate(t *testing.T) {
	h := newHPCCPath(t, ModeHPCC, DefaultParams(), 112500)
	h.feed(10*us, 125000, 112500, true)
	h.feed(10*us, 0, 0, true)
	if h.s.Rate != 100*gbps {
		t.Fatalf("rate %g, want line rate", h.s.Rate)
	}
}

// The EWMA over the base RTT: a sample spanning τ = T/2 moves U* half way.
// From the initial U* = 1, U = 1.9 gives U* = (1·5 + 1.9·5)/10 = 1.45, so
// R = 100G·0.95/1.45 + 50M = 65 567 241 379.31034 bit/s.
func TestHPCCEWMA(t *testing.T) {
	h := newHPCCPath(t, ModeHPCC, DefaultParams(), 112500)
	// 62 500 bytes in 5 µs is line rate (1.0); 112 500 queued bytes 0.9.
	h.feed(5*us, 62500, 112500, true)
	if !relClose(hpccOf(&h.s).ustar, 1.45, 1e-12) || !relClose(h.s.Rate, 65567241379.31034, 1e-12) {
		t.Fatalf("U* %.15g rate %.5f, want 1.45 and 65567241379.31034", hpccOf(&h.s).ustar, h.s.Rate)
	}
}

// Fast react: an ACK inside the RTT sets the rate from the committed
// reference rate but does not commit, so reactions within an RTT do not
// compound. After Rc = 50.05G, a fast ACK at U = 1.9 gives 50.05G/2 + 50M
// = 25.075G with Rc unchanged; the next full update at U = 1.9 again gives
// 25.075G and commits it. With FAST_REACT 0 the fast ACK changes nothing.
func TestHPCCFastReact(t *testing.T) {
	h := newHPCCPath(t, ModeHPCC, DefaultParams(), 112500)
	h.feed(10*us, 125000, 112500, true)
	h.feed(10*us, 125000, 112500, false)
	if !relClose(h.s.Rate, 25.075e9, 1e-12) || !relClose(hpccOf(&h.s).refRate, 50.05e9, 1e-12) {
		t.Fatalf("fast react: rate %.1f ref %.1f, want 25.075e9 and 50.05e9", h.s.Rate, hpccOf(&h.s).refRate)
	}
	h.feed(10*us, 125000, 112500, true)
	if !relClose(h.s.Rate, 25.075e9, 1e-12) || hpccOf(&h.s).refRate != h.s.Rate {
		t.Fatalf("full update: rate %.1f ref %.1f, want 25.075e9 committed", h.s.Rate, hpccOf(&h.s).refRate)
	}

	p := DefaultParams()
	p.FastReact = false
	h = newHPCCPath(t, ModeHPCC, p, 112500)
	h.feed(10*us, 125000, 112500, true)
	h.feed(10*us, 125000, 112500, false)
	if !relClose(h.s.Rate, 50.05e9, 1e-12) {
		t.Fatalf("FAST_REACT 0: rate %.1f, want 50.05e9", h.s.Rate)
	}
}

// The most utilized hop decides: hops at U = 0.5 and U = 1.9 act as one
// hop at 1.9; the queue term uses the smaller of the two queue samples.
func TestHPCCMaxHopAndMinQueue(t *testing.T) {
	a, _ := New(ModeHPCC, DefaultParams())
	s := State{LineRate: 100 * gbps, BaseRTT: 10 * us, BaseWin: 125000}
	a.Init(&s)
	var hist HopHistory
	fb := Feedback{Now: 0, AckSeq: 1, SndNxt: 125000, NHops: 2, Prev: &hist}
	fb.Hops[0] = IntHop{TimePs: 0, LineRate: 100 * gbps}
	fb.Hops[1] = IntHop{TimePs: 0, QLen: 200000, LineRate: 100 * gbps}
	a.OnFeedback(&s, &fb)
	fb = Feedback{Now: 10 * us, AckSeq: 125001, SndNxt: 250000, NHops: 2, Prev: &hist}
	fb.Hops[0] = IntHop{TimePs: 10 * us, TxBytes: 62500, LineRate: 100 * gbps}
	fb.Hops[1] = IntHop{TimePs: 10 * us, TxBytes: 125000, QLen: 112500, LineRate: 100 * gbps}
	a.OnFeedback(&s, &fb)
	if !relClose(hpccOf(&s).ustar, 1.9, 1e-12) || !relClose(s.Rate, 50.05e9, 1e-12) {
		t.Fatalf("U* %.15g rate %.1f, want 1.9 and 50.05e9", hpccOf(&s).ustar, s.Rate)
	}
}

func TestHPCCDegenerateINT(t *testing.T) {
	h := newHPCCPath(t, ModeHPCC, DefaultParams(), 112500)
	before := h.s
	h.feed(0, 0, 5000, true) // same timestamp as the last record: no sample
	if h.s.Rate != before.Rate || hpccOf(&h.s).ustar != hpccOf(&before).ustar || math.IsNaN(h.s.Rate) {
		t.Fatalf("τ = 0 changed the rate: %+v", h.s)
	}
}

// --- HPCC-PINT ---

// PINT's encoding is unbiased: u = 0.7 scales to ⌈0.7·512⌉ = 359, which
// lies between 1.05^120 and 1.05^121 (log_1.05 359 = 120.58); each draw
// decodes to one of the two and the mean is 359/512 = 0.701171875.
func TestPintEncodingUnbiased(t *testing.T) {
	h := newPint(DefaultParams())
	lo, hi := math.Pow(1.05, 120)/512, math.Pow(1.05, 121)/512
	rng := uint64(42)
	sum := 0.0
	const n = 200000
	for i := 0; i < n; i++ {
		v := h.quantize(0.7, &rng)
		if !relClose(v, lo, 1e-12) && !relClose(v, hi, 1e-12) {
			t.Fatalf("decoded %g, want %g or %g", v, lo, hi)
		}
		sum += v
	}
	if mean := sum / n; math.Abs(mean-0.701171875) > 0.0005 {
		t.Fatalf("mean %g, want 0.701171875", mean)
	}
}

// At U = 2η PINT's decoded U is within one step of the log base (5%) of
// 1.9, so the rate is 100G/k + 50M with k in [2/1.05, 2·1.05].
func TestPintHalvesAtTwiceTarget(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		a, _ := New(ModePINT, DefaultParams())
		h := &hpccPath{alg: a, s: State{LineRate: 100 * gbps, BaseRTT: 10 * us, BaseWin: 125000, Seed: seed}}
		a.Init(&h.s)
		if pintOf(&h.s).rng != seed {
			t.Fatal("Init must start the random stream at the simulator's seed")
		}
		h.feed(0, 0, 112500, true)
		h.feed(10*us, 125000, 112500, true)
		lo, hi := 100e9/(2*1.05)+50e6, 100e9/(2/1.05)+50e6
		if h.s.Rate < lo || h.s.Rate > hi {
			t.Fatalf("seed %d: rate %.1f outside [%.1f, %.1f]", seed, h.s.Rate, lo, hi)
		}
	}
}

// PINT_PROB: with 0 no ACK is used; with 0.25 about a quarter are. Under a
// steady U = 1.9 a used ACK in a new RTT halves Rc, so count changes.
func TestPintSampling(t *testing.T) {
	p := DefaultParams()
	p.PintProb = 0
	h := newHPCCPath(t, ModePINT, p, 112500)
	for i := 0; i < 100; i++ {
		h.feed(10*us, 125000, 112500, true)
	}
	if h.s.Rate != 100*gbps {
		t.Fatalf("PINT_PROB 0: rate %g, want untouched line rate", h.s.Rate)
	}

	p.PintProb = 0.25
	h = newHPCCPath(t, ModePINT, p, 112500)
	used, n := 0, 4000
	for i := 0; i < n; i++ {
		hpccOf(&h.s).refRate, h.s.Rate = 100*gbps, 100*gbps // undo, to see each decision
		h.feed(10*us, 125000, 112500, true)
		if h.s.Rate < 100*gbps {
			used++
		}
	}
	if f := float64(used) / float64(n); math.Abs(f-0.25) > 0.03 {
		t.Fatalf("used fraction %.3f, want about 0.25", f)
	}
}

// Same seed, same decisions: PINT's randomness is per QP and reproducible.
func TestPintDeterministic(t *testing.T) {
	run := func() float64 {
		p := DefaultParams()
		p.PintProb = 0.5
		a, _ := New(ModePINT, p)
		h := &hpccPath{alg: a, s: State{LineRate: 100 * gbps, BaseRTT: 10 * us, BaseWin: 125000, Seed: 7}}
		a.Init(&h.s)
		h.feed(0, 0, 0, true)
		for i := 0; i < 200; i++ {
			h.feed(10*us, int64(60000+i*300), int64(i%7)*20000, i%3 != 0)
		}
		return h.s.Rate
	}
	if a, b := run(), run(); a != b {
		t.Fatalf("two runs differ: %g vs %g", a, b)
	}
}

// A path without reporting switches (NHops 0) gives HPCC and PINT nothing
// to react to: they keep line rate instead of decaying on a stale U*.
func TestNoINTKeepsLineRate(t *testing.T) {
	for _, mode := range []int{ModeHPCC, ModePINT} {
		a, err := New(mode, DefaultParams())
		if err != nil {
			t.Fatal(err)
		}
		s := State{LineRate: 100e9, Rate: 100e9, BaseRTT: 4_000_000, BaseWin: 50000}
		a.Init(&s)
		var hist HopHistory
		for i := int64(1); i <= 1000; i++ {
			fb := Feedback{Now: i * 1_000_000, Acked: 9000, AckSeq: i * 9000, SndNxt: i*9000 + 50000, Prev: &hist}
			a.OnFeedback(&s, &fb)
		}
		if s.Rate != 100e9 {
			t.Errorf("mode %d: rate %g after 1000 ACKs without INT, want line rate", mode, s.Rate)
		}
	}
}
