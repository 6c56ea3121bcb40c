package cc

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
// State fields:
//
//	Rate     current rate
//	Stage    consecutive increases
//	Alpha    diff, the smoothed RTT difference (ps)
//	PrevRTT  r', the RTT at the last update (ps)
//	Idx      last update sequence (0 = no sample yet)
type timely struct{ p Params }

func (t *timely) Name() string                      { return "timely" }
func (t *timely) UsesECN() bool                     { return false }
func (t *timely) UsesINT() bool                     { return false }
func (t *timely) Init(s *State)                     { start(s) }
func (t *timely) OnTimer(s *State, now int64) int64 { return 0 }

func (t *timely) OnFeedback(s *State, fb *Feedback) int64 {
	if fb.RTT <= 0 || fb.AckSeq <= s.Idx {
		return 0
	}
	rtt := fb.RTT
	if s.Idx != 0 {
		p := &t.p
		diff := (1-p.TimelyAlpha)*s.Alpha + p.TimelyAlpha*float64(rtt-s.PrevRTT)
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
			if s.Stage >= p.TimelyHAIThresh {
				step = p.RateHAI
			}
			s.Rate = clampRate(s.Rate+step, p.MinRate, s.LineRate)
			s.Stage++
		} else {
			s.Rate = clampRate(s.Rate*c, p.MinRate, s.LineRate)
			s.Stage = 0
		}
		s.Alpha = diff
	}
	if fb.SndNxt > s.Idx {
		s.Idx = fb.SndNxt
		s.PrevRTT = rtt
	}
	return 0
}
