package cc

import (
	"testing"
)

// ackStream produces a plausible ACK sequence for any algorithm: every
// third ACK marked, RTT wobbling around 12 µs, two INT hops whose counters
// advance at about 80% of 100 Gb/s with a varying queue.
type ackStream struct {
	fb   Feedback
	hist HopHistory
	i    int64
	now  int64
}

func (a *ackStream) next() *Feedback {
	a.i++
	a.now += 720_000 // one 9000-byte packet at 100 Gb/s
	fb := &a.fb
	fb.Now = a.now
	fb.Prev = &a.hist
	fb.Acked = 9000
	fb.AckSeq = a.i * 9000
	fb.SndNxt = fb.AckSeq + 125000
	fb.ECN = a.i%3 == 0
	fb.RTT = 12*us + (a.i%17-8)*200*ns
	fb.NHops = 2
	for h := 0; h < 2; h++ {
		fb.Hops[h] = IntHop{TimePs: a.now, TxBytes: a.i * 7200, QLen: (a.i % 11) * 9000, LineRate: 100 * gbps}
	}
	return fb
}

// OnFeedback and OnTimer must not allocate: they run for every ACK of
// every QP.
func TestNoAllocs(t *testing.T) {
	for _, mode := range []int{ModeNone, ModeDCQCN, ModeHPCC, ModeTIMELY, ModeDCTCP, ModePINT} {
		p := DefaultParams()
		p.PintProb = 0.5
		a, err := New(mode, p)
		if err != nil {
			t.Fatal(err)
		}
		s := State{LineRate: 100 * gbps, BaseRTT: 10 * us, BaseWin: 125000}
		a.Init(&s)
		var st ackStream
		wake := int64(0)
		allocs := testing.AllocsPerRun(5000, func() {
			fb := st.next()
			if wake != 0 && wake <= fb.Now {
				wake = a.OnTimer(&s, fb.Now)
			}
			wake = a.OnFeedback(&s, fb)
		})
		if allocs != 0 {
			t.Errorf("%s: %.2f allocations per ACK", a.Name(), allocs)
		}
	}
}

func BenchmarkOnFeedback(b *testing.B) {
	for _, mode := range []int{ModeNone, ModeDCQCN, ModeHPCC, ModeTIMELY, ModeDCTCP, ModePINT} {
		a, _ := New(mode, DefaultParams())
		b.Run(a.Name(), func(b *testing.B) {
			s := State{LineRate: 100 * gbps, BaseRTT: 10 * us, BaseWin: 125000}
			a.Init(&s)
			var st ackStream
			wake := int64(0)
			b.ReportAllocs()
			for b.Loop() {
				fb := st.next()
				if wake != 0 && wake <= fb.Now {
					a.OnTimer(&s, fb.Now) // its deadline is superseded by the feedback's below
				}
				wake = a.OnFeedback(&s, fb)
			}
		})
	}
}

// BenchmarkDCQCNTimer: the increase/decrease timer path alone, a CNP every
// 50 µs and the timer served on time in between.
func BenchmarkDCQCNTimer(b *testing.B) {
	a, _ := New(ModeDCQCN, DefaultParams())
	s := State{LineRate: 100 * gbps}
	a.Init(&s)
	now, nextCNP := int64(0), int64(0)
	wake := int64(0)
	fb := Feedback{ECN: true}
	b.ReportAllocs()
	for b.Loop() {
		if wake != 0 && wake < nextCNP {
			now = wake
			wake = a.OnTimer(&s, now)
			continue
		}
		now = nextCNP
		fb.Now = now
		wake = a.OnFeedback(&s, &fb)
		nextCNP += 50 * us
	}
}
