package cc

import (
	"math"
	"unsafe"
)

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
// Randomness (encoding and sampling) comes from a per-QP SplitMix64
// stream that Init starts at State.Seed, so runs are deterministic and QPs
// do not share a random stream.
//
// State: pintState, HPCC's plus the random stream (and the INT history in
// Feedback.Prev).
type pint struct {
	hpcc            // OnTimer, UsesECN, UsesINT and the parameters
	logBase float64 // ln(PintLogBase)
}

// pintState is HPCC's state (first, so HPCC's code reads it as its own)
// and the random stream.
type pintState struct {
	hpccState
	rng uint64
}

var _ [privWords*8 - unsafe.Sizeof(pintState{})]byte // fits in State.priv

// HPCC's functions reach the state through hpccOf: it must come first.
var _ = [1]struct{}{}[unsafe.Offsetof(pintState{}.hpccState)]

func pintOf(s *State) *pintState { return privOf[pintState](s) }

func (h *pint) Init(s *State) {
	h.hpcc.Init(s)
	pintOf(s).rng = s.Seed
}

// pintScale is ns-3's Pint::max_concurrent: utilization is scaled by it
// before encoding so the smallest possible value maps to 1.
const pintScale = 512

func newPint(p Params) *pint { return &pint{hpcc: hpcc{p: p}, logBase: math.Log(p.PintLogBase)} }

func (h *pint) Name() string { return "hpcc-pint" }

func (h *pint) OnFeedback(s *State, fb *Feedback) int64 {
	ps := pintOf(s)
	x := &ps.hpccState // what hpccOf(s) gives: it comes first
	// The switches' estimate evolves with every packet, sampled or not.
	if u, dt, ok := hopUtil(s, fb, false); ok {
		x.ustar = ewmaU(s, u, dt)
	}
	if fb.Prev.N == 0 {
		return 0 // no switch on the path reports: nothing to react to, as HPCC
	}
	rng := &ps.rng
	if h.p.PintProb < 1 && uniform(rng) >= h.p.PintProb {
		return 0
	}
	full := fb.AckSeq > x.commitSeq
	if x.commitSeq == 0 {
		x.commitSeq = fb.SndNxt
		return 0
	}
	hpccRate(s, &h.p, h.quantize(x.ustar, rng)/h.p.UTarget, full)
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
