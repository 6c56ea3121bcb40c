package cc

import "math"

// pint is CC_MODE 10, HPCC-PINT (Ben Basat et al., SIGCOMM 2020) as SimAI's
// RDMA model runs it: instead of full per-hop INT, a packet carries one
// small number, the largest hop utilization encoded as a power of
// PintLogBase, p = log_b(⌈U·512⌉) rounded up or down at random so the
// decoded value b^p/512 is unbiased. The sender uses an ACK's value with
// probability PintProb and applies HPCC's rule (see hpcc) with k = U/η and
// no further smoothing; like ns-3 it always reacts within an RTT (FastReact
// is not consulted) and commits the reference rate once per RTT.
//
// Simplification: the simulator delivers full INT records, not PINT's
// digest, so the utilization is computed at the sender from this QP's
// records exactly as HPCC does (the EWMA over the base RTT of the largest
// hop utilization), then encoded and decoded. ns-3 instead keeps the EWMA
// per switch port over every packet with the network's largest RTT as
// horizon and carries the maximum over hops of the encoded values. Both
// read the same port counters; they differ in where the smoothing runs and
// that PINT's maximum is taken after, not before, smoothing.
// SampleFeedback does not apply.
//
// Randomness (encoding and sampling) comes from State.Rng, a per-QP
// SplitMix64 state the simulator may seed before Init (Init keeps it), so
// runs are deterministic and QPs do not share a random stream.
//
// State fields: as hpcc (Rate, Target = Rc, Ustar, Stage, Idx; the INT
// history in Feedback.Prev) plus Rng.
type pint struct {
	hpcc            // Init, OnTimer, UsesECN, UsesINT and the parameters
	logBase float64 // ln(PintLogBase)
}

// pintScale is ns-3's Pint::max_concurrent: utilization is scaled by it
// before encoding so the smallest possible value maps to 1.
const pintScale = 512

func newPint(p Params) *pint { return &pint{hpcc: hpcc{p: p}, logBase: math.Log(p.PintLogBase)} }

func (h *pint) Name() string { return "hpcc-pint" }

func (h *pint) OnFeedback(s *State, fb *Feedback) int64 {
	// The switches' estimate evolves with every packet, sampled or not.
	if u, dt, ok := hopUtil(s, fb, false); ok {
		s.Ustar = ewmaU(s, u, dt)
	}
	if fb.Prev.N == 0 {
		return 0 // no switch on the path reports: nothing to react to, as HPCC
	}
	if h.p.PintProb < 1 && uniform(&s.Rng) >= h.p.PintProb {
		return 0
	}
	full := fb.AckSeq > s.Idx
	if s.Idx == 0 {
		s.Idx = fb.SndNxt
		return 0
	}
	hpccRate(s, &h.p, h.quantize(s.Ustar, &s.Rng)/h.p.UTarget, full)
	nextRound(s, fb, full)
	return 0
}

// quantize is PINT's encode-then-decode of a utilization: u·512 rounded up
// to an integer x, then x replaced by one of the neighbouring powers of
// the base, b^⌊log_b x⌋ or the next, at random with the probability that
// makes the result unbiased (mean x), and scaled back by 1/512.
func (h *pint) quantize(u float64, rng *uint64) float64 {
	x := math.Ceil(math.Min(u, 1e6) * pintScale)
	if x < 1 {
		x = 1
	}
	lower := math.Exp(math.Floor(math.Log(x)/h.logBase) * h.logBase)
	upper := lower * h.p.PintLogBase
	if uniform(rng) < (x-lower)/(upper-lower) {
		return upper / pintScale
	}
	return lower / pintScale
}

// uniform draws from [0,1) with SplitMix64.
func uniform(state *uint64) float64 {
	*state += 0x9e3779b97f4a7c15
	z := *state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}
