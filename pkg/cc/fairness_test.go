package cc

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDCQCNFairness: two DCQCN QPs share one 100 Gb/s bottleneck in a
// fluid model. The queue integrates the excess rate every microsecond;
// the switch marks packets with SimAI's RED profile for 100 Gb/s links
// (KMIN 400 KB, KMAX 1600 KB, PMAX 0.2); a QP that had a packet marked in
// a step gets a CNP one 10 µs RTT later. QP 1 starts alone and takes the
// link; QP 2 joins at line rate 20 ms later. Over the last 100 ms of a
// 300 ms run their mean rates must be fair: Jain's index
// (x1+x2)²/(2·(x1²+x2²)) >= 0.95, and the link must stay busy.
func TestDCQCNFairness(t *testing.T) {
	const (
		step    = 1 * us
		c       = 100 * gbps
		kmin    = 400e3
		kmax    = 1600e3
		pmax    = 0.2
		mtu     = 9000.0
		delay   = 10 // steps of CNP feedback delay
		join    = 20_000
		end     = 300_000
		measure = 200_000
	)
	a, _ := New(ModeDCQCN, DefaultParams())
	rng := rand.New(rand.NewPCG(11, 12))
	var qs [2]State
	var wake [2]int64
	var pending [2][delay]bool // CNPs in flight, indexed by step % delay
	for i := range qs {
		qs[i] = State{LineRate: c, BaseRTT: 10 * us}
		a.Init(&qs[i])
	}
	queue := 0.0
	var sum [2]float64
	busy := 0
	for k := 0; k < end; k++ {
		now := int64(k) * step
		active := 1
		if k >= join {
			active = 2
		}
		in := 0.0
		for i := 0; i < active; i++ {
			if wake[i] != 0 && wake[i] <= now {
				wake[i] = a.OnTimer(&qs[i], now)
			}
			if pending[i][k%delay] {
				pending[i][k%delay] = false
				wake[i] = a.OnFeedback(&qs[i], &Feedback{Now: now, ECN: true})
			}
			in += qs[i].Rate
		}
		// RED on the queue as the packets of this step see it.
		p := 0.0
		switch {
		case queue >= kmax:
			p = 1
		case queue > kmin:
			p = pmax * (queue - kmin) / (kmax - kmin)
		}
		for i := 0; i < active; i++ {
			pkts := qs[i].Rate * float64(step) * 1e-12 / 8 / mtu
			if p > 0 && rng.Float64() < 1-math.Pow(1-p, pkts) {
				pending[i][k%delay] = true // read again at step k+delay
			}
			if k >= measure {
				sum[i] += qs[i].Rate
			}
		}
		queue = math.Max(0, queue+(in-c)*float64(step)*1e-12/8)
		if k >= measure && (queue > 0 || in >= c) {
			busy++
		}
	}
	x1, x2 := sum[0]/(end-measure), sum[1]/(end-measure)
	jain := (x1 + x2) * (x1 + x2) / (2 * (x1*x1 + x2*x2))
	t.Logf("mean rates %.2f and %.2f Gb/s, Jain %.4f, link busy %.1f%% of the time",
		x1/gbps, x2/gbps, jain, 100*float64(busy)/(end-measure))
	if jain < 0.95 {
		t.Fatalf("Jain's index %.4f < 0.95 (rates %.2f, %.2f Gb/s)", jain, x1/gbps, x2/gbps)
	}
	if x1+x2 < 0.9*c {
		t.Fatalf("link underused: %.2f Gb/s", (x1+x2)/gbps)
	}
}
