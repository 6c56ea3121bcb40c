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
//     (1-g)·alpha. The first CNP sets alpha = InitialAlpha and does not count.
//   - decrease check: every RateDecreaseInterval after the first CNP (plus
//     1 ns, so a check at the same instant as an alpha update sees the
//     update): if a CNP arrived since the last check, target = rate (see
//     ClampTargetRate), rate = max(rate·(1-alpha/2), MinRate), the increase
//     counts reset and the increase timer restarts.
//   - increase rounds: every RPTimer after the last cut (the timer), and,
//     with ByteReset > 0, every ByteReset bytes sent since the last cut
//     (the byte counter, which SimAI's model lacks). With t timer and b
//     byte rounds since the cut before this one: max(t,b) < F
//     (FastRecoveryTimes): rate = (rate+target)/2; min(t,b) > F:
//     target += RateHAI; otherwise target += RateAI; target is capped at
//     line rate, then rate = (rate+target)/2 in both. Without a byte
//     counter b counts as t, which is SimAI ns-3's rule on the timer
//     alone (stage < F, == F, > F, compared before the stage counts
//     the round). The two-counter rule is that rule extended to two
//     counters, not the reference code: Zhu's DCQCN ns-3
//     (qbb-net-device.cc rpr_*) counts first, then does fast recovery
//     while the counter that fired is < F alone, additive while either
//     is < F, else hyper, adding RateHAI·(min(t,b)-F+1) and halving both
//     periods. At the NIC's F = 1 it has no fast-recovery round and goes
//     hyper after one round of each; here one fast-recovery round comes
//     first, and hyper after two of each.
//
// ns-3 runs all three as timers forever. Here alpha is computed lazily: the
// k intervals that elapsed since it was last brought up to date are applied
// in closed form ((1-g)^(k-1) after the first, which sees the CNP bit),
// which equals the step-by-step recurrence. A decrease check is only
// scheduled while a CNP is pending (checks without one change nothing), and
// the increase timer stops once rate and target both reach line rate
// (further rounds change nothing until the next cut, which restarts it).
// So a QP has at most two deadlines and OnTimer/OnFeedback return the
// earlier one. The byte counter needs no deadline: it is read from the
// bytes sent (Feedback.SndNxt) at each feedback, so its rounds fall at the
// first ACK after the bytes went out (an ACK a packet by default).
//
// At equal times: increase before decrease check (ns-3 inserted the
// increase event first), timers before byte-counter rounds, and both
// before a feedback's CNP (so the outcome does not depend on the order in
// which the simulator delivers same-time events). Rates are float64 bit/s
// rather than ns-3's integral DataRate; to keep rate from creeping towards
// its target forever by halving a sub-bit/s gap, a gap under 1 bit/s
// closes.
//
// State.Rate is the current rate (RC); the rest is dcqcnState.
type dcqcn struct{ p Params }

// dcqcnState is a DCQCN queue pair's reaction-point state.
type dcqcnState struct {
	target     float64 // target rate (RT)
	alpha      float64 // alpha as of the updates-th update after firstCNP
	updates    int64   // alpha updates applied (they fall at firstCNP + k·AlphaResumeInterval)
	firstCNP   int64   // time of the first CNP (ps), -1 before it
	lastCNP    int64   // time of the last CNP acted on (MinCNPInterval > 0 only)
	checkAt    int64   // next decrease check (valid while cnpPending)
	increaseAt int64   // next timer round, 0 if stopped (not recovering)
	byteAt     int64   // bytes sent at which the byte counter's next round falls; 0: count from the next feedback
	stage      int32   // timer rounds since the last cut (ns-3's m_rpTimeStage)
	byteStage  int16   // byte-counter rounds since the last cut, saturating
	cnpSeen    bool    // a CNP arrived since update `updates`: the next update sees it
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
	if d.p.ByteReset > 0 {
		d.byteRounds(s, fb.SndNxt)
	}
	if fb.ECN {
		if fb.ECN = d.takeCNP(s, fb.Now); fb.ECN {
			d.cnp(s, fb.Now)
		}
	}
	return d.wake(s)
}

// takeCNP says whether a CNP at now counts: with MinCNPInterval, the
// NIC's notification point sends a pair at most one CNP that often
// (ConnectX min_time_between_cnps); dropping the extra echoes here is the
// same while the acknowledgements' path delay does not change. A dropped
// echo is no CNP: OnFeedback clears Feedback.ECN, so that the CNP counts
// (summary, monitors) are of the CNPs such a NIC would have sent.
func (d *dcqcn) takeCNP(s *State, now int64) bool {
	if d.p.MinCNPInterval == 0 {
		return true
	}
	x := dcqcnOf(s)
	if x.firstCNP >= 0 && now-x.lastCNP < d.p.MinCNPInterval {
		return false
	}
	x.lastCNP = now
	return true
}

// byteRounds runs the byte counter's rounds due by sent bytes, while the
// pair recovers from a cut; after a cut it counts from the first feedback.
// Sent bytes are SndNxt, which a go-back-N rollback moves back: bytes
// sent again are not counted, where a NIC counts bytes transmitted (it
// matters only on lossy runs).
func (d *dcqcn) byteRounds(s *State, sent int64) {
	x := dcqcnOf(s)
	if x.increaseAt == 0 {
		return
	}
	if x.byteAt == 0 {
		x.byteAt = sent + int64(d.p.ByteReset)
		return
	}
	for sent >= x.byteAt && x.increaseAt != 0 {
		x.byteAt += int64(d.p.ByteReset)
		if d.round(s, true) {
			x.increaseAt = 0
		}
	}
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
		x.updates, x.cnpSeen = 0, false
		x.alpha = d.p.InitialAlpha
		s.Rate = clampRate(s.Rate*d.p.RateOnFirstCNP, d.p.MinRate, s.LineRate)
		x.target = s.Rate
		x.cnpPending = true
		x.checkAt = now + dcqcnCheckOffset + d.p.RateDecreaseInterval
		return
	}
	d.alphaAt(s, now)
	x.cnpSeen = true
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
	if x.cnpSeen {
		a += g
	}
	if n > 1 {
		a *= math.Pow(1-g, float64(n-1))
	}
	x.alpha, x.updates, x.cnpSeen = a, k, false
}

func (d *dcqcn) decrease(s *State, t int64) {
	x := dcqcnOf(s)
	d.alphaAt(s, t)
	// ns-3 clamps after a timer round (m_rpTimeStage != 0), ConnectX after
	// any round (clamp_tgt_rate_after_time_inc, its default): the same rule
	// while the byte counter is off.
	if d.p.ClampTargetRate || x.stage != 0 || x.byteStage != 0 {
		x.target = s.Rate
	}
	s.Rate = clampRate(s.Rate*(1-x.alpha/2), d.p.MinRate, s.LineRate)
	x.stage, x.byteStage, x.byteAt = 0, 0, 0
	x.cnpPending = false
	x.checkAt = 0
	x.increaseAt = t + d.p.RPTimer
}

// increase is a timer round.
func (d *dcqcn) increase(s *State, t int64) {
	x := dcqcnOf(s)
	if d.round(s, false) {
		x.increaseAt = 0
		return
	}
	x.increaseAt = t + d.p.RPTimer
}

// round is one increase round, the timer's or (byByte) the byte
// counter's; it says whether rate and target reached line rate, where
// further rounds change nothing.
func (d *dcqcn) round(s *State, byByte bool) bool {
	x := dcqcnOf(s)
	t, b := int(x.stage), int(x.byteStage)
	if d.p.ByteReset == 0 {
		b = t
	}
	switch f := d.p.FastRecoveryTimes; {
	case max(t, b) < f:
	case min(t, b) > f:
		x.target = math.Min(x.target+d.p.RateHAI, s.LineRate)
	default:
		x.target = math.Min(x.target+d.p.RateAI, s.LineRate)
	}
	s.Rate = (s.Rate + x.target) / 2
	if math.Abs(x.target-s.Rate) < 1 {
		s.Rate = x.target
	}
	if !byByte {
		x.stage++
	} else if x.byteStage < math.MaxInt16 {
		x.byteStage++
	}
	return s.Rate == s.LineRate && x.target == s.LineRate
}
