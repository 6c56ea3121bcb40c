package cc

import (
	"math"
	"testing"
)

// DCTCP's alpha converges to the marked fraction. Each RTT here is ten
// 1000-byte ACKs, the first three marked, so F = 3000/10000 = 0.3 in every
// RTT. From alpha_0 = 1 with g = 1/256, after n updates
//
//	alpha_n = F + (1 − F)·(1 − g)^n,
//
// (255/256)^3000 ≈ 7.9e-6, so alpha_3000 = 0.3 + 0.7·7.9e-6 ≈ 0.3000055.
func TestDCTCPAlphaConverges(t *testing.T) {
	a, _ := New(ModeDCTCP, DefaultParams())
	s := State{LineRate: 100 * gbps}
	a.Init(&s)
	if dctcpOf(&s).alpha != 1 {
		t.Fatalf("initial alpha %g, want 1 (ns-3)", dctcpOf(&s).alpha)
	}
	// The first ACK only opens the first RTT, recording SndNxt = 9001; the
	// ACKs 1001, 2001, … then close an RTT every tenth ACK (10001 > 9001,
	// which records 19001; 20001 > 19001; …), the closing ACK included.
	a.OnFeedback(&s, &Feedback{Acked: 1, AckSeq: 1, SndNxt: 9001}) // roundEnd = 9001
	seq := int64(1)
	const n = 3000
	for rtt := 0; rtt < n; rtt++ {
		for i := 1; i <= 10; i++ {
			seq += 1000
			fb := Feedback{Acked: 1000, AckSeq: seq, SndNxt: seq + 9000, ECN: i <= 3}
			a.OnFeedback(&s, &fb)
		}
	}
	want := 0.3 + 0.7*math.Pow(255.0/256, n)
	if !relClose(dctcpOf(&s).alpha, want, 1e-9) || math.Abs(dctcpOf(&s).alpha-0.3) > 1e-5 {
		t.Fatalf("alpha %.12f, want %.12f (→ 0.3)", dctcpOf(&s).alpha, want)
	}
}

// One cut per window: with alpha = 1 the first mark halves the rate
// (100G → 50G); further marks before the ACK of the data sent at the cut
// are ignored; the first ACK beyond it ends CWR and, being a new RTT,
// adds DCTCP_RATE_AI (1 Gb/s): 51G. A later mark cuts by alpha/2 again.
func TestDCTCPCutOncePerWindow(t *testing.T) {
	a, _ := New(ModeDCTCP, DefaultParams())
	s := State{LineRate: 100 * gbps}
	a.Init(&s)
	a.OnFeedback(&s, &Feedback{Acked: 1000, AckSeq: 1000, SndNxt: 100000, ECN: true})
	if s.Rate != 50*gbps {
		t.Fatalf("first mark: rate %g, want 50e9", s.Rate)
	}
	a.OnFeedback(&s, &Feedback{Acked: 1000, AckSeq: 2000, SndNxt: 101000, ECN: true})
	if s.Rate != 50*gbps {
		t.Fatalf("second mark in the same window: rate %g, want 50e9", s.Rate)
	}
	// Bytes of this RTT: 1000 marked of 1000 + 99000 acknowledged.
	a.OnFeedback(&s, &Feedback{Acked: 99000, AckSeq: 101000, SndNxt: 200000})
	if s.Rate != 51*gbps {
		t.Fatalf("after the window: rate %g, want 51e9", s.Rate)
	}
	// alpha = (255/256)·1 + (1/256)·(1000/100000)
	if want := 255.0/256 + 0.01/256; !relClose(dctcpOf(&s).alpha, want, 1e-12) {
		t.Fatalf("alpha %.15f, want %.15f", dctcpOf(&s).alpha, want)
	}
	a.OnFeedback(&s, &Feedback{Acked: 1000, AckSeq: 102000, SndNxt: 201000, ECN: true})
	if want := 51e9 * (1 - dctcpOf(&s).alpha/2); !relClose(s.Rate, want, 1e-12) {
		t.Fatalf("next cut: rate %g, want %g", s.Rate, want)
	}
}

// timelyQP feeds one RTT sample per call, each in a new RTT.
type timelyQP struct {
	a   Algorithm
	s   State
	seq int64
}

func (q *timelyQP) sample(rtt int64) float64 {
	q.seq += 100000 // beyond the SndNxt recorded at the previous sample
	q.a.OnFeedback(&q.s, &Feedback{AckSeq: q.seq, SndNxt: q.seq + 50000, RTT: rtt, Acked: 1000})
	return q.s.Rate
}

func newTimelyQP(t *testing.T) *timelyQP {
	a, err := New(ModeTIMELY, DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	q := &timelyQP{a: a, s: State{LineRate: 100 * gbps}}
	a.Init(&q.s)
	return q
}

// TIMELY with ns-3's defaults (TLow 50 µs, THigh 500 µs, minRTT 20 µs,
// alpha 0.875, beta 0.8; AI 50M, HAI 100M after 5 increases):
//
//	sample  rtt      rule                                   rate
//	1       100 µs   seeds r'                               100G
//	2       1000 µs  > THigh: ×(1 − 0.8·(1 − 500/1000)) = ×0.6  60G
//	3..7    10 µs    < TLow: +50M each                      60.05 … 60.25G
//	8, 9    10 µs    5 increases in a row: +100M            60.35, 60.45G
func TestTIMELYHighThenLowRTT(t *testing.T) {
	q := newTimelyQP(t)
	want := []struct {
		rtt  int64
		rate float64
	}{
		{100 * us, 100e9}, {1000 * us, 60e9},
		{10 * us, 60.05e9}, {10 * us, 60.10e9}, {10 * us, 60.15e9}, {10 * us, 60.20e9}, {10 * us, 60.25e9},
		{10 * us, 60.35e9}, {10 * us, 60.45e9},
	}
	for i, w := range want {
		if r := q.sample(w.rtt); !relClose(r, w.rate, 1e-12) {
			t.Fatalf("sample %d (rtt %d ps): rate %.1f, want %.1f", i+1, w.rtt, r, w.rate)
		}
	}
}

// Rising RTT inside [TLow, THigh] decreases by the gradient, falling RTT
// increases:
//
//	100 µs → seed
//	120 µs: diff = 0.125·0 + 0.875·20 µs = 17.5 µs, g = 17.5/20 = 0.875,
//	        ×(1 − 0.8·0.875) = ×0.3                  → 30G
//	120 µs: diff = 0.125·17.5 + 0.875·0 = 2.1875 µs, g = 0.109375,
//	        ×(1 − 0.0875) = ×0.9125                  → 27.375G
//	110 µs: diff = 0.125·2.1875 − 0.875·10 = −8.4766 µs < 0 → +50M → 27.425G
func TestTIMELYGradient(t *testing.T) {
	q := newTimelyQP(t)
	for i, w := range []struct {
		rtt  int64
		rate float64
	}{{100 * us, 100e9}, {120 * us, 30e9}, {120 * us, 27.375e9}, {110 * us, 27.425e9}} {
		if r := q.sample(w.rtt); !relClose(r, w.rate, 1e-12) {
			t.Fatalf("sample %d: rate %.1f, want %.1f", i+1, r, w.rate)
		}
	}
	if timelyOf(&q.s).rttDiff >= 0 || !relClose(timelyOf(&q.s).rttDiff, -8.4765625*float64(us), 1e-12) {
		t.Fatalf("rtt diff %g ps, want -8.4765625 µs", timelyOf(&q.s).rttDiff)
	}
	// ACKs within the RTT (AckSeq not beyond the last update) are ignored.
	before := q.s.Rate
	q.a.OnFeedback(&q.s, &Feedback{AckSeq: q.seq + 50000, SndNxt: q.seq + 60000, RTT: 1000 * us})
	if q.s.Rate != before {
		t.Fatalf("rate moved on an in-RTT ACK: %g → %g", before, q.s.Rate)
	}
	// Samples without an RTT are skipped.
	q.a.OnFeedback(&q.s, &Feedback{AckSeq: q.seq + 200001, SndNxt: q.seq + 300000})
	if q.s.Rate != before {
		t.Fatalf("rate moved without an RTT sample")
	}
}

// TIMELY never leaves [MinRate, LineRate].
func TestTIMELYBounds(t *testing.T) {
	q := newTimelyQP(t)
	q.sample(100 * us)
	for i := 0; i < 50; i++ {
		q.sample(100*us + int64(i+1)*100*us) // steep rise: c clamps at 0
	}
	if q.s.Rate != 100e6 {
		t.Fatalf("rate %g, want MIN_RATE", q.s.Rate)
	}
	for i := 0; i < 3000; i++ {
		q.sample(10 * us)
	}
	if q.s.Rate != 100*gbps {
		t.Fatalf("rate %g, want line rate", q.s.Rate)
	}
}
