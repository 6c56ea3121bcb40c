package cc

import "unsafe"

// hpcc is CC_MODE 3, HPCC (Li et al., SIGCOMM 2019) as SimAI's RDMA model
// runs it with MULTI_RATE 0. Switches stamp each data packet with, per hop,
// the egress port's time, cumulative transmitted bytes, queue length and
// line rate; the receiver echoes them in the ACK. Per ACK, for each hop i
// against the previous record of the same hop (τ apart):
//
//	u_i = txRate_i/B_i + min(qlen_i, qlen_i_prev) / (B_i·T)
//
// where txRate_i = Δbytes·8/τ, B_i the hop's line rate and T the base RTT
// expressed as BaseWin·8/LineRate (ns-3's qlen·maxRate/(B·win)). U is the
// largest u_i and τ its interval; the QP's estimate is the EWMA over one
// base RTT,
//
//	U* = (U*·(T−τ) + U·τ)/T, τ capped at T,
//
// and with k = U*/η the new rate is
//
//	R = Rc/k + RateAI                  if k >= 1 or stage >= MiThresh (stage = 0)
//	R = Rc + RateAI                    otherwise                    (stage++)
//
// bounded to [MinRate, LineRate]. Rc is the reference rate: it is only
// committed (with the stage) once per RTT, on the first ACK beyond the
// sequence that was next to send at the previous commit; ACKs in between
// (FastReact) set the rate from Rc without committing. HPCC's window form,
// W = W/k + W_AI, is the same rule with W = Rate·T; the simulator derives
// the window as BaseWin·Rate/LineRate under VAR_WIN, so HPCC keeps no
// window of its own.
//
// Deviations from ns-3: a hop whose record did not advance in time (τ <= 0)
// or whose byte counter went backwards (a new path) gives no sample instead
// of a division by zero; k = 0 (an idle path under MI) jumps to line rate
// where ns-3 divides by zero. With BaseWin = 0 (no window) T is BaseRTT.
//
// State.Rate is the current rate; the rest is hpccState, and
// Feedback.Prev, the previous INT record of each hop.
type hpcc struct{ p Params }

// hpccState is an HPCC queue pair's state.
type hpccState struct {
	refRate   float64 // the reference rate Rc
	ustar     float64 // U*, the EWMA utilization estimate (starts at 1, as in ns-3)
	commitSeq int64   // last update sequence: ACKs with AckSeq > commitSeq commit (0 = none yet)
	stage     int     // consecutive additive updates
}

var _ [privWords*8 - unsafe.Sizeof(hpccState{})]byte // fits in State.priv

func hpccOf(s *State) *hpccState { return privOf[hpccState](s) }

func (h *hpcc) Name() string  { return "hpcc" }
func (h *hpcc) UsesECN() bool { return false }
func (h *hpcc) UsesINT() bool { return true }

func (h *hpcc) Init(s *State) {
	x := hpccOf(s)
	start(s)
	x.refRate = s.LineRate
	x.ustar = 1
}

func (h *hpcc) OnTimer(s *State, now int64) int64 { return 0 }

func (h *hpcc) OnFeedback(s *State, fb *Feedback) int64 {
	x := hpccOf(s)
	full := fb.AckSeq > x.commitSeq
	if !full && !h.p.FastReact {
		return 0
	}
	if x.commitSeq == 0 {
		// First feedback: only a reference point for the next one.
		x.commitSeq = fb.SndNxt
		storeHops(s, fb)
		return 0
	}
	if u, dt, ok := hopUtil(s, fb, h.p.SampleFeedback && !full); ok {
		x.ustar = ewmaU(s, u, dt)
		hpccRate(s, &h.p, x.ustar/h.p.UTarget, full)
	}
	nextRound(s, fb, full)
	return 0
}

// nextRound ends the update round on a full ACK: the next commit waits for
// an ACK beyond what is next to send now.
func nextRound(s *State, fb *Feedback, full bool) {
	x := hpccOf(s)
	if full && fb.SndNxt > x.commitSeq {
		x.commitSeq = fb.SndNxt
	}
}

// storeHops remembers an ACK's INT records as the reference for the next.
func storeHops(s *State, fb *Feedback) {
	n := min(fb.NHops, MaxHops)
	copy(fb.Prev.Hops[:n], fb.Hops[:n])
	fb.Prev.N = max(fb.Prev.N, n)
}

// hopUtil computes the largest per-hop utilization of an ACK against the
// stored records, and the interval it spans, and stores the new records.
// skipIdle drops hops with an empty queue (SAMPLE_FEEDBACK on fast react);
// those keep their old record, as in ns-3.
func hopUtil(s *State, fb *Feedback, skipIdle bool) (u float64, dt int64, ok bool) {
	n := min(fb.NHops, MaxHops)
	hist := fb.Prev
	tBytes := float64(s.BaseWin)
	for i := 0; i < n; i++ {
		h := &fb.Hops[i]
		if skipIdle && h.QLen == 0 {
			continue
		}
		if i >= hist.N || h.LineRate <= 0 {
			hist.Hops[i] = *h
			continue
		}
		prev := &hist.Hops[i]
		tau := h.TimePs - prev.TimePs
		db := h.TxBytes - prev.TxBytes
		if tau > 0 && db >= 0 {
			q := min(h.QLen, prev.QLen)
			ui := float64(db) * 8 / (float64(tau) * 1e-12) / h.LineRate
			if tBytes > 0 {
				ui += float64(q) * s.LineRate / h.LineRate / tBytes
			} else if s.BaseRTT > 0 {
				ui += float64(q) * 8 / (h.LineRate * float64(s.BaseRTT) * 1e-12)
			}
			if !ok || ui > u {
				u, dt = ui, tau
			}
			ok = true
		}
		*prev = *h
	}
	hist.N = max(hist.N, n)
	return u, dt, ok
}

// ewmaU folds a utilization sample spanning dt into U* over one base RTT.
func ewmaU(s *State, u float64, dt int64) float64 {
	x := hpccOf(s)
	T := s.BaseRTT
	if T <= 0 || dt >= T {
		return u
	}
	return (x.ustar*float64(T-dt) + u*float64(dt)) / float64(T)
}

// hpccRate applies HPCC's rate rule for k = U/η; commit makes the result
// the new reference rate and stage.
func hpccRate(s *State, p *Params, k float64, commit bool) {
	x := hpccOf(s)
	var r float64
	stage := x.stage
	if k >= 1 || stage >= p.MiThresh {
		if k > 0 {
			r = x.refRate/k + p.RateAI
		} else {
			r = s.LineRate
		}
		stage = 0
	} else {
		r = x.refRate + p.RateAI
		stage++
	}
	s.Rate = clampRate(r, p.MinRate, s.LineRate)
	if commit {
		x.refRate = s.Rate
		x.stage = stage
	}
}
