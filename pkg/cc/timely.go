package cc

import "unsafe"

// timely is CC_MODE 7, TIMELY (Mittal et al., SIGCOMM 2015) as SimAI's RDMA
// model runs it: rate-based, driven by RTT samples (Feedback.RTT), once per
// RTT — on the first ACK beyond the sequence that was next to send at the
// previous update; ACKs in between are ignored (ns-3's fast react for
// TIMELY is empty). Per update with RTT sample r and previous sample r':
//
//	diff = (1−TimelyAlpha)·diff + TimelyAlpha·(r − r')
//	g    = diff / TimelyMinRTT
//	r < TLow          → increase
//	r > THigh         → rate·(1 − β·(1 − THigh/r))
//	g <= 0            → increase
//	otherwise         → rate·max(0, 1 − β·g)
//
// An increase adds RateAI, or RateHAI once TimelyHAIThresh increases ran
// in a row; any decrease resets that count. Rates stay within
// [MinRate, LineRate]. The first sample only seeds r'. Samples without an
// RTT (0) are skipped.
//
// State.Rate is the current rate; the rest is timelyState.
type timely struct{ p Params }

// timelyState is a TIMELY queue pair's state.
type timelyState struct {
	rttDiff  float64 // diff, the smoothed RTT difference (ps)
	prevRTT  int64   // r', the RTT at the last update (ps)
	roundEnd int64   // last update sequence (0 = no sample yet)
	stage    int     // consecutive increases
}

var _ [privWords*8 - unsafe.Sizeof(timelyState{})]byte // fits in State.priv

func timelyOf(s *State) *timelyState { return privOf[timelyState](s) }

func (t *timely) Name() string                      { return "timely" }
func (t *timely) UsesECN() bool                     { return false }
func (t *timely) UsesINT() bool                     { return false }
func (t *timely) Init(s *State)                     { start(s) }
func (t *timely) OnTimer(s *State, now int64) int64 { return 0 }

func (t *timely) OnFeedback(s *State, fb *Feedback) int64 {
	x := timelyOf(s)
	if fb.RTT <= 0 || fb.AckSeq <= x.roundEnd {
		return 0
	}
	rtt := fb.RTT
	if x.roundEnd != 0 {
		p := &t.p
		diff := (1-p.TimelyAlpha)*x.rttDiff + p.TimelyAlpha*float64(rtt-x.prevRTT)
		grad := diff / float64(p.TimelyMinRTT)
		inc, c := false, 0.0
		switch {
		case rtt < p.TimelyTLow:
			inc = true
		case rtt > p.TimelyTHigh:
			c = 1 - p.TimelyBeta*(1-float64(p.TimelyTHigh)/float64(rtt))
		case grad <= 0:
			inc = true
		default:
			c = max(0, 1-p.TimelyBeta*grad)
		}
		if inc {
			step := p.RateAI
			if x.stage >= p.TimelyHAIThresh {
				step = p.RateHAI
			}
			s.Rate = clampRate(s.Rate+step, p.MinRate, s.LineRate)
			x.stage++
		} else {
			s.Rate = clampRate(s.Rate*c, p.MinRate, s.LineRate)
			x.stage = 0
		}
		x.rttDiff = diff
	}
	if fb.SndNxt > x.roundEnd {
		x.roundEnd = fb.SndNxt
		x.prevRTT = rtt
	}
	return 0
}
