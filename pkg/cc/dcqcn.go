package cc

import "math"

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
// State fields:
//
//	Rate    current rate (RC); Target target rate (RT)
//	Alpha   alpha as of the Idx-th update after Epoch
//	Idx     number of alpha updates applied (updates fall at Epoch + k·AlphaResumeInterval)
//	Cnt     CNPs received since update Idx (> 0: the next update sees a CNP)
//	Epoch   time of the first CNP (ps), -1 before it
//	Flag    a CNP arrived since the last decrease check
//	T1      next decrease check (valid while Flag)
//	T2      next increase event, 0 if stopped
//	Stage   increase rounds since the last cut
type dcqcn struct{ p Params }

// dcqcnCheckOffset is ns-3's 1 ns delay of the decrease check behind the
// alpha update it coincides with.
const dcqcnCheckOffset = 1 * ns

func (d *dcqcn) Name() string  { return "dcqcn" }
func (d *dcqcn) UsesECN() bool { return true }
func (d *dcqcn) UsesINT() bool { return false }

func (d *dcqcn) Init(s *State) {
	start(s)
	s.Target = s.LineRate
	s.Alpha = 1
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
	w := s.T2
	if s.Flag && (w == 0 || s.T1 < w) {
		w = s.T1
	}
	return w
}

// run performs, in time order, every increase and decrease event due at or
// before now.
func (d *dcqcn) run(s *State, now int64) {
	for {
		inc := s.T2 != 0 && s.T2 <= now
		dec := s.Flag && s.T1 <= now
		switch {
		case inc && (!dec || s.T2 <= s.T1):
			d.increase(s, s.T2)
		case dec:
			d.decrease(s, s.T1)
		default:
			return
		}
	}
}

func (d *dcqcn) cnp(s *State, now int64) {
	if s.Epoch < 0 {
		// First CNP: alpha starts at 1 and its timer and the decrease
		// check start here; this CNP is pending for the first check.
		s.Epoch = now
		s.Idx, s.Cnt = 0, 0
		s.Alpha = 1
		s.Rate = clampRate(s.Rate*d.p.RateOnFirstCNP, d.p.MinRate, s.LineRate)
		s.Target = s.Rate
		s.Flag = true
		s.T1 = now + dcqcnCheckOffset + d.p.RateDecreaseInterval
		return
	}
	d.alphaAt(s, now)
	s.Cnt++
	if !s.Flag {
		s.Flag = true
		// The first check strictly after now: one at exactly now has run.
		x := now - s.Epoch - dcqcnCheckOffset
		k := int64(1)
		if x >= 0 {
			k = x/d.p.RateDecreaseInterval + 1
		}
		s.T1 = s.Epoch + dcqcnCheckOffset + k*d.p.RateDecreaseInterval
	}
}

// alphaAt applies every alpha update at or before t.
func (d *dcqcn) alphaAt(s *State, t int64) {
	if s.Epoch < 0 || t < s.Epoch {
		return
	}
	k := (t - s.Epoch) / d.p.AlphaResumeInterval
	n := k - s.Idx
	if n <= 0 {
		return
	}
	g := d.p.EwmaGain
	a := (1 - g) * s.Alpha
	if s.Cnt > 0 {
		a += g
	}
	if n > 1 {
		a *= math.Pow(1-g, float64(n-1))
	}
	s.Alpha, s.Idx, s.Cnt = a, k, 0
}

func (d *dcqcn) decrease(s *State, t int64) {
	d.alphaAt(s, t)
	if d.p.ClampTargetRate || s.Stage != 0 {
		s.Target = s.Rate
	}
	s.Rate = clampRate(s.Rate*(1-s.Alpha/2), d.p.MinRate, s.LineRate)
	s.Stage = 0
	s.Flag = false
	s.T1 = 0
	s.T2 = t + d.p.RPTimer
}

func (d *dcqcn) increase(s *State, t int64) {
	switch {
	case s.Stage < d.p.FastRecoveryTimes:
	case s.Stage == d.p.FastRecoveryTimes:
		s.Target = math.Min(s.Target+d.p.RateAI, s.LineRate)
	default:
		s.Target = math.Min(s.Target+d.p.RateHAI, s.LineRate)
	}
	s.Rate = (s.Rate + s.Target) / 2
	if math.Abs(s.Target-s.Rate) < 1 {
		s.Rate = s.Target
	}
	s.Stage++
	if s.Rate == s.LineRate && s.Target == s.LineRate {
		s.T2 = 0
		return
	}
	s.T2 = t + d.p.RPTimer
}
