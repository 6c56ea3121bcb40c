package cc

import (
	"math"
	"unsafe"
)

// dcqcn is CC_MODE 1, DCQCN as Mellanox NICs run it and SimAI's RDMA model
// (rdma-hw.cc, the *Mlx functions) simulates it. A feedback with ECN set is
// a CNP. The reaction point keeps three periodic processes:
//
//   - alpha: every AlphaResumeInterval after the first CNP,
//     alpha = (1-g)·alpha + g if a CNP arrived in that interval, else
//     (1-g)·alpha. The first CNP sets alpha = 1 and does not count.
//   - decrease check: every RateDecreaseInterval after the first CNP (plus
//     1 ns, so a check at the same instant as an alpha update sees the
//     update): if a CNP arrived since the last check, target = rate (see
//     ClampTargetRate), rate = max(rate·(1-alpha/2), MinRate), the increase
//     stage resets and the increase timer restarts.
//   - increase: every RPTimer after the last cut. Stage < FastRecoveryTimes:
//     rate = (rate+target)/2; stage == FastRecoveryTimes: target += RateAI;
//     later: target += RateHAI; target is capped at line rate, then
//     rate = (rate+target)/2 in both; stage++.
//
// ns-3 runs all three as timers forever. Here alpha is computed lazily: the
// k intervals that elapsed since it was last brought up to date are applied
// in closed form ((1-g)^(k-1) after the first, which sees the CNP bit),
// which equals the step-by-step recurrence. A decrease check is only
// scheduled while a CNP is pending (checks without one change nothing), and
// the increase timer stops once rate and target both reach line rate
// (further rounds change nothing until the next cut, which restarts it).
// So a QP has at most two deadlines and OnTimer/OnFeedback return the
// earlier one.
//
// At equal times: increase before decrease check (ns-3 inserted the
// increase event first), and timers before a feedback (so the outcome does
// not depend on the order in which the simulator delivers same-time
// events). Rates are float64 bit/s rather than ns-3's integral DataRate;
// to keep rate from creeping towards its target forever by halving a
// sub-bit/s gap, a gap under 1 bit/s closes.
//
// State.Rate is the current rate (RC); the rest is dcqcnState.
type dcqcn struct{ p Params }

// dcqcnState is a DCQCN queue pair's reaction-point state.
type dcqcnState struct {
	target     float64 // target rate (RT)
	alpha      float64 // alpha as of the updates-th update after firstCNP
	updates    int64   // alpha updates applied (they fall at firstCNP + k·AlphaResumeInterval)
	cnps       int64   // CNPs received since update `updates` (> 0: the next update sees a CNP)
	firstCNP   int64   // time of the first CNP (ps), -1 before it
	checkAt    int64   // next decrease check (valid while cnpPending)
	increaseAt int64   // next increase event, 0 if stopped
	stage      int     // increase rounds since the last cut
	cnpPending bool    // a CNP arrived since the last decrease check
}

var _ [privWords*8 - unsafe.Sizeof(dcqcnState{})]byte // fits in State.priv

func dcqcnOf(s *State) *dcqcnState { return privOf[dcqcnState](s) }

// dcqcnCheckOffset is ns-3's 1 ns delay of the decrease check behind the
// alpha update it coincides with.
const dcqcnCheckOffset = 1 * ns

func (d *dcqcn) Name() string  { return "dcqcn" }
func (d *dcqcn) UsesECN() bool { return true }
func (d *dcqcn) UsesINT() bool { return false }

func (d *dcqcn) Init(s *State) {
	x := dcqcnOf(s)
	start(s)
	x.target = s.LineRate
	x.alpha = 1
	x.firstCNP = -1
}

func (d *dcqcn) OnFeedback(s *State, fb *Feedback) int64 {
	d.run(s, fb.Now)
	if fb.ECN {
		d.cnp(s, fb.Now)
	}
	return d.wake(s)
}

func (d *dcqcn) OnTimer(s *State, now int64) int64 {
	d.run(s, now)
	return d.wake(s)
}

func (d *dcqcn) wake(s *State) int64 {
	x := dcqcnOf(s)
	w := x.increaseAt
	if x.cnpPending && (w == 0 || x.checkAt < w) {
		w = x.checkAt
	}
	return w
}

// run performs, in time order, every increase and decrease event due at or
// before now.
func (d *dcqcn) run(s *State, now int64) {
	x := dcqcnOf(s)
	for {
		inc := x.increaseAt != 0 && x.increaseAt <= now
		dec := x.cnpPending && x.checkAt <= now
		switch {
		case inc && (!dec || x.increaseAt <= x.checkAt):
			d.increase(s, x.increaseAt)
		case dec:
			d.decrease(s, x.checkAt)
		default:
			return
		}
	}
}

func (d *dcqcn) cnp(s *State, now int64) {
	x := dcqcnOf(s)
	if x.firstCNP < 0 {
		// First CNP: alpha starts at 1 and its timer and the decrease
		// check start here; this CNP is pending for the first check.
		x.firstCNP = now
		x.updates, x.cnps = 0, 0
		x.alpha = 1
		s.Rate = clampRate(s.Rate*d.p.RateOnFirstCNP, d.p.MinRate, s.LineRate)
		x.target = s.Rate
		x.cnpPending = true
		x.checkAt = now + dcqcnCheckOffset + d.p.RateDecreaseInterval
		return
	}
	d.alphaAt(s, now)
	x.cnps++
	if !x.cnpPending {
		x.cnpPending = true
		// The first check strictly after now: one at exactly now has run.
		since := now - x.firstCNP - dcqcnCheckOffset
		k := int64(1)
		if since >= 0 {
			k = since/d.p.RateDecreaseInterval + 1
		}
		x.checkAt = x.firstCNP + dcqcnCheckOffset + k*d.p.RateDecreaseInterval
	}
}

// alphaAt applies every alpha update at or before t.
func (d *dcqcn) alphaAt(s *State, t int64) {
	x := dcqcnOf(s)
	if x.firstCNP < 0 || t < x.firstCNP {
		return
	}
	k := (t - x.firstCNP) / d.p.AlphaResumeInterval
	n := k - x.updates
	if n <= 0 {
		return
	}
	g := d.p.EwmaGain
	a := (1 - g) * x.alpha
	if x.cnps > 0 {
		a += g
	}
	if n > 1 {
		a *= math.Pow(1-g, float64(n-1))
	}
	x.alpha, x.updates, x.cnps = a, k, 0
}

func (d *dcqcn) decrease(s *State, t int64) {
	x := dcqcnOf(s)
	d.alphaAt(s, t)
	if d.p.ClampTargetRate || x.stage != 0 {
		x.target = s.Rate
	}
	s.Rate = clampRate(s.Rate*(1-x.alpha/2), d.p.MinRate, s.LineRate)
	x.stage = 0
	x.cnpPending = false
	x.checkAt = 0
	x.increaseAt = t + d.p.RPTimer
}

func (d *dcqcn) increase(s *State, t int64) {
	x := dcqcnOf(s)
	switch {
	case x.stage < d.p.FastRecoveryTimes:
	case x.stage == d.p.FastRecoveryTimes:
		x.target = math.Min(x.target+d.p.RateAI, s.LineRate)
	default:
		x.target = math.Min(x.target+d.p.RateHAI, s.LineRate)
	}
	s.Rate = (s.Rate + x.target) / 2
	if math.Abs(x.target-s.Rate) < 1 {
		s.Rate = x.target
	}
	x.stage++
	if s.Rate == s.LineRate && x.target == s.LineRate {
		x.increaseAt = 0
		return
	}
	x.increaseAt = t + d.p.RPTimer
}
