package cc

// dctcp is CC_MODE 8, DCTCP (Alizadeh et al., SIGCOMM 2010) in the
// rate-based form SimAI's RDMA model uses (HandleAckDctcp). Feedback.ECN is
// the echoed congestion mark.
//
//   - alpha: once per RTT — on the first ACK beyond the sequence that was
//     next to send at the previous update — alpha = (1−g)·alpha + g·F, F the
//     fraction of the bytes acknowledged in that RTT that came back marked;
//     g is DctcpGain, by default EWMA_GAIN (SimAI's model shares one gain).
//     alpha starts at 1, as in ns-3.
//   - cut: on a marked ACK outside a CWR period, rate = rate·(1 − alpha/2)
//     (not below MinRate) and a CWR period starts that ends with the first
//     ACK beyond the sequence that was next to send at the cut; so at most
//     one cut per window of data.
//   - increase: outside CWR, each RTT boundary adds DctcpRateAI (up to line
//     rate).
//
// Deviation from ns-3: ns-3 counts marked ACKs against an estimate of the
// packets in flight (in-flight/MTU + 1) taken at the RTT boundary; this
// counts acknowledged bytes, marked and total, over the RTT, which is the
// quantity that estimate stands for and does not depend on ACK coalescing
// (L2_ACK_INTERVAL) or packet size. As in ns-3 the ACK that closes an RTT
// is counted in the RTT it closes.
//
// State fields:
//
//	Rate     current rate
//	Alpha    alpha
//	Idx      sequence that closes the current RTT (0 = not started)
//	Cnt      marked bytes acknowledged in the current RTT
//	Bytes    bytes acknowledged in the current RTT
//	Flag     in a CWR period
//	HighSeq  sequence whose acknowledgement ends the CWR period
type dctcp struct{ p Params }

func (d *dctcp) Name() string                      { return "dctcp" }
func (d *dctcp) UsesECN() bool                     { return true }
func (d *dctcp) UsesINT() bool                     { return false }
func (d *dctcp) OnTimer(s *State, now int64) int64 { return 0 }

func (d *dctcp) Init(s *State) {
	start(s)
	s.Alpha = 1
}

func (d *dctcp) OnFeedback(s *State, fb *Feedback) int64 {
	if fb.Acked > 0 {
		s.Bytes += fb.Acked
		if fb.ECN {
			s.Cnt += fb.Acked
		}
	}
	newRTT := false
	if fb.AckSeq > s.Idx {
		newRTT = true
		if s.Idx != 0 {
			f := 0.0
			if s.Bytes > 0 {
				f = float64(s.Cnt) / float64(s.Bytes)
			}
			g := d.p.dctcpGain()
			s.Alpha = (1-g)*s.Alpha + g*f
		}
		s.Idx = fb.SndNxt
		s.Cnt, s.Bytes = 0, 0
	}
	if s.Flag && fb.AckSeq > s.HighSeq {
		s.Flag = false
	}
	if fb.ECN && !s.Flag {
		s.Rate = clampRate(s.Rate*(1-s.Alpha/2), d.p.MinRate, s.LineRate)
		s.Flag = true
		s.HighSeq = fb.SndNxt
	}
	if !s.Flag && newRTT {
		s.Rate = clampRate(s.Rate+d.p.DctcpRateAI, d.p.MinRate, s.LineRate)
	}
	return 0
}
