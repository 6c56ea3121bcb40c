package cc

import "unsafe"

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
// State.Rate is the current rate; the rest is dctcpState.
type dctcp struct{ p Params }

// dctcpState is a DCTCP queue pair's state.
type dctcpState struct {
	alpha       float64
	roundEnd    int64 // sequence that closes the current RTT (0 = not started)
	markedBytes int64 // marked bytes acknowledged in the current RTT
	ackedBytes  int64 // bytes acknowledged in the current RTT
	cwrEnd      int64 // sequence whose acknowledgement ends the CWR period
	inCWR       bool
}

var _ [privWords*8 - unsafe.Sizeof(dctcpState{})]byte // fits in State.priv

func dctcpOf(s *State) *dctcpState { return privOf[dctcpState](s) }

func (d *dctcp) Name() string                      { return "dctcp" }
func (d *dctcp) UsesECN() bool                     { return true }
func (d *dctcp) UsesINT() bool                     { return false }
func (d *dctcp) OnTimer(s *State, now int64) int64 { return 0 }

func (d *dctcp) Init(s *State) {
	x := dctcpOf(s)
	start(s)
	x.alpha = 1
}

func (d *dctcp) OnFeedback(s *State, fb *Feedback) int64 {
	x := dctcpOf(s)
	if fb.Acked > 0 {
		x.ackedBytes += fb.Acked
		if fb.ECN {
			x.markedBytes += fb.Acked
		}
	}
	newRTT := false
	if fb.AckSeq > x.roundEnd {
		newRTT = true
		if x.roundEnd != 0 {
			f := 0.0
			if x.ackedBytes > 0 {
				f = float64(x.markedBytes) / float64(x.ackedBytes)
			}
			g := d.p.dctcpGain()
			x.alpha = (1-g)*x.alpha + g*f
		}
		x.roundEnd = fb.SndNxt
		x.markedBytes, x.ackedBytes = 0, 0
	}
	if x.inCWR && fb.AckSeq > x.cwrEnd {
		x.inCWR = false
	}
	if fb.ECN && !x.inCWR {
		s.Rate = clampRate(s.Rate*(1-x.alpha/2), d.p.MinRate, s.LineRate)
		x.inCWR = true
		x.cwrEnd = fb.SndNxt
	}
	if !x.inCWR && newRTT {
		s.Rate = clampRate(s.Rate+d.p.DctcpRateAI, d.p.MinRate, s.LineRate)
	}
	return 0
}
