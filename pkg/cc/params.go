package cc

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Time units used below, in picoseconds.
const (
	ns = int64(1_000)
	us = int64(1_000_000)
)

// Params holds every knob of the congestion-control algorithms. Field names
// follow SimAI.conf keys (in brackets); defaults are what SimAI ships in its
// SimAI.conf, or, for knobs SimAI.conf does not set, the ns-3 RDMA model's
// (rdma-hw.cc of the HPCC / ns-3-alibabacloud code SimAI runs on).
// Rates are bit/s, times picoseconds.
type Params struct {
	// --- DCQCN (CC_MODE 1, Mellanox flavour) ---

	// EwmaGain [EWMA_GAIN] is g of alpha = (1-g)·alpha + g·cnp. Default 1/256.
	// SimAI's RDMA model also uses it as DCTCP's gain (see DctcpGain).
	EwmaGain float64
	// RateAI [RATE_AI] bit/s: additive-increase step of DCQCN's target rate;
	// also HPCC's/PINT's W_AI (as a rate) and TIMELY's additive step.
	// Default 50 Mb/s.
	RateAI float64
	// RateHAI [RATE_HAI] bit/s: hyper-increase step (DCQCN, TIMELY).
	// Default 100 Mb/s.
	RateHAI float64
	// MinRate [MIN_RATE] bit/s: no algorithm paces a QP below this.
	// Default 100 Mb/s.
	MinRate float64
	// RPTimer [RP_TIMER, µs in the conf] ps: DCQCN's rate-increase period.
	// Default 900 µs.
	RPTimer int64
	// AlphaResumeInterval [ALPHA_RESUME_INTERVAL, µs] ps: DCQCN's alpha
	// update period. Default 1 µs.
	AlphaResumeInterval int64
	// RateDecreaseInterval [RATE_DECREASE_INTERVAL, µs] ps: how often DCQCN
	// checks whether a CNP arrived and cuts the rate. Default 4 µs.
	RateDecreaseInterval int64
	// FastRecoveryTimes [FAST_RECOVERY_TIMES]: increase rounds after a cut
	// that only halve the gap to the target before additive increase starts.
	// Default 1.
	FastRecoveryTimes int
	// ClampTargetRate [CLAMP_TARGET_RATE]: 1 sets target = rate on every cut;
	// 0 (default) only when at least one increase round ran since the last
	// cut, so back-to-back cuts keep the older, higher target.
	ClampTargetRate bool
	// RateOnFirstCNP [RATE_ON_FIRST_CNP, fabricsim key; ns-3 RateOnFirstCnp]:
	// fraction of the current rate a QP drops to on its first CNP, before
	// the first regular cut. Default 1 (no extra drop).
	RateOnFirstCNP float64
	// InitialAlpha [INITIAL_ALPHA, fabricsim key; ConnectX
	// initial_alpha_value / 1024]: alpha on a pair's first CNP. Default 1
	// (ns-3).
	InitialAlpha float64
	// ByteReset [RPG_BYTE_RESET, fabricsim key; ConnectX rpg_byte_reset]
	// bytes: DCQCN's byte counter, an increase round every ByteReset bytes
	// a pair sends after a cut (Zhu et al., SIGCOMM 2015, §3.1). Default 0:
	// off, as in SimAI's model, which increases on RP_TIMER only.
	ByteReset int
	// MinCNPInterval [MIN_TIME_BETWEEN_CNPS, µs; ConnectX
	// min_time_between_cnps] ps: a pair takes at most one CNP this often.
	// Default 0 (SimAI: every marked packet's ACK is a CNP).
	MinCNPInterval int64

	// --- DCTCP (CC_MODE 8) ---

	// DctcpRateAI [DCTCP_RATE_AI] bit/s: additive increase per RTT.
	// Default 1000 Mb/s.
	DctcpRateAI float64
	// DctcpGain [DCTCP_GAIN] is DCTCP's alpha EWMA gain; 0 (default) means
	// EwmaGain, which is what SimAI's RDMA model uses (it has no separate key).
	DctcpGain float64

	// --- HPCC (CC_MODE 3) and HPCC-PINT (CC_MODE 10) ---

	// UTarget [U_TARGET] is η, the target bottleneck utilization.
	// Default 0.95.
	UTarget float64
	// MiThresh [MI_THRESH]: additive rounds (U < η) allowed before a
	// multiplicative update is forced. Default 0: every update is
	// multiplicative, W = W/(U/η) + W_AI.
	MiThresh int
	// FastReact [FAST_REACT]: react to every ACK within an RTT without
	// committing the reference rate (HPCC). Default 1.
	FastReact bool
	// MultiRate [MULTI_RATE]: per-hop reference rates. Default 0 (one
	// aggregate rate), the only mode implemented; New rejects 1.
	MultiRate bool
	// SampleFeedback [SAMPLE_FEEDBACK]: on fast-react ACKs, ignore hops whose
	// queue is empty. Default 0.
	SampleFeedback bool
	// IntMulti [INT_MULTI]: SimAI's INT byte-counter scale. Accepted for
	// compatibility; IntHop carries full-width counters, so it is unused.
	// Default 1.
	IntMulti int
	// PintLogBase [PINT_LOG_BASE]: base of PINT's logarithmic encoding of
	// utilization. Default 1.05.
	PintLogBase float64
	// PintProb [PINT_PROB]: probability that an ACK's PINT value is used.
	// Default 1.0.
	PintProb float64

	// --- TIMELY (CC_MODE 7); SimAI.conf has no keys, defaults are ns-3's ---

	// TimelyAlpha [TMLY_ALPHA]: weight of the newest RTT difference in the
	// RTT-difference EWMA. Default 0.875.
	TimelyAlpha float64
	// TimelyBeta [TMLY_BETA]: multiplicative-decrease factor. Default 0.8.
	TimelyBeta float64
	// TimelyTLow [TMLY_TLOW, µs] ps: below this RTT the rate always grows.
	// Default 50 µs.
	TimelyTLow int64
	// TimelyTHigh [TMLY_THIGH, µs] ps: above this RTT the rate always falls.
	// Default 500 µs.
	TimelyTHigh int64
	// TimelyMinRTT [TMLY_MINRTT, µs] ps: normalizes the RTT gradient.
	// Default 20 µs.
	TimelyMinRTT int64
	// TimelyHAIThresh [TMLY_HAI_THRESH, fabricsim key]: consecutive increases
	// after which TIMELY steps by RateHAI instead of RateAI. Default 5
	// (hard-wired in ns-3).
	TimelyHAIThresh int

	// --- sender ---

	// RateBound [RATE_BOUND]: the sender paces packets at Rate (1, default)
	// or at line rate (0, ns-3's test switch). Read by pkg/packet's sender;
	// the algorithms ignore it.
	RateBound bool
}

// DefaultParams returns SimAI.conf's shipped values (ns-3's where the
// conf is silent), as the key table (schema.go) gives them.
func DefaultParams() Params { return defaults }

// dctcpGain resolves DctcpGain's "0 = EwmaGain".
func (p *Params) dctcpGain() float64 {
	if p.DctcpGain > 0 {
		return p.DctcpGain
	}
	return p.EwmaGain
}

// Validate reports the first parameter outside its key's range (schema.go),
// then what no single key can check.
func (p *Params) Validate() error {
	for i := range keys {
		if err := keys[i].check(keys[i].get(p)); err != nil {
			return fmt.Errorf("cc: %s: %v", keys[i].Name, err)
		}
	}
	if p.TimelyTHigh <= p.TimelyTLow {
		return fmt.Errorf("cc: TMLY_THIGH: %g us must exceed TMLY_TLOW (%g us)", float64(p.TimelyTHigh)/float64(us), float64(p.TimelyTLow)/float64(us))
	}
	return nil
}

// ErrUnknownKey is the error Set wraps for a key it does not know.
var ErrUnknownKey = errors.New("unknown congestion-control key")

// Set applies one SimAI.conf-style key. Values use SimAI's conventions:
// rates like "50Mb/s" or "100Gbps" (a plain number is bit/s); times in µs
// when plain ("900"), or with a unit ("900us", "1ms"); flags 0 or 1.
// Errors name the key; an unknown key's wraps ErrUnknownKey. Each value
// is checked against its key's range; New validates what depends on
// several keys.
func (p *Params) Set(key, value string) error {
	k := keyNamed(strings.ToUpper(strings.TrimSpace(key)))
	if k == nil {
		return fmt.Errorf("cc: %w %q", ErrUnknownKey, key)
	}
	v := strings.TrimSpace(value)
	if v == "" || strings.ContainsAny(v, " \t") {
		return fmt.Errorf("cc: %s %q: expected one value", key, value)
	}
	x, err := k.Value(v) // parsed and range-checked as every table's values are
	if err != nil {
		return fmt.Errorf("cc: %s %q: %v", key, value, err)
	}
	k.put(p, x)
	return nil
}

// Keys lists the configuration keys Set accepts, sorted.
func Keys() []string {
	names := make([]string, 0, len(keys))
	for i := range keys {
		names = append(names, keys[i].Name)
	}
	slices.Sort(names)
	return names
}
