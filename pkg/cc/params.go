package cc

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/pkg/units"
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
// conf is silent).
func DefaultParams() Params {
	return Params{
		EwmaGain:             1.0 / 256,
		RateAI:               50e6,
		RateHAI:              100e6,
		MinRate:              100e6,
		RPTimer:              900 * us,
		AlphaResumeInterval:  1 * us,
		RateDecreaseInterval: 4 * us,
		FastRecoveryTimes:    1,
		ClampTargetRate:      false,
		RateOnFirstCNP:       1,
		DctcpRateAI:          1000e6,
		DctcpGain:            0,
		UTarget:              0.95,
		MiThresh:             0,
		FastReact:            true,
		MultiRate:            false,
		SampleFeedback:       false,
		IntMulti:             1,
		PintLogBase:          1.05,
		PintProb:             1.0,
		TimelyAlpha:          0.875,
		TimelyBeta:           0.8,
		TimelyTLow:           50 * us,
		TimelyTHigh:          500 * us,
		TimelyMinRTT:         20 * us,
		TimelyHAIThresh:      5,
		RateBound:            true,
	}
}

// dctcpGain resolves DctcpGain's "0 = EwmaGain".
func (p *Params) dctcpGain() float64 {
	if p.DctcpGain > 0 {
		return p.DctcpGain
	}
	return p.EwmaGain
}

// Validate reports the first parameter outside its domain, by conf key.
func (p *Params) Validate() error {
	bad := func(key string, format string, args ...any) error {
		return fmt.Errorf("cc: %s: %s", key, fmt.Sprintf(format, args...))
	}
	fin := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case !fin(p.EwmaGain) || p.EwmaGain <= 0 || p.EwmaGain > 1:
		return bad("EWMA_GAIN", "%g outside (0,1]", p.EwmaGain)
	case !fin(p.DctcpGain) || p.DctcpGain < 0 || p.DctcpGain > 1:
		return bad("DCTCP_GAIN", "%g outside [0,1] (0 = EWMA_GAIN)", p.DctcpGain)
	case !fin(p.RateAI) || p.RateAI < 0:
		return bad("RATE_AI", "%g bit/s must be >= 0", p.RateAI)
	case !fin(p.RateHAI) || p.RateHAI < 0:
		return bad("RATE_HAI", "%g bit/s must be >= 0", p.RateHAI)
	case !fin(p.MinRate) || p.MinRate <= 0:
		return bad("MIN_RATE", "%g bit/s must be > 0", p.MinRate)
	case !fin(p.DctcpRateAI) || p.DctcpRateAI < 0:
		return bad("DCTCP_RATE_AI", "%g bit/s must be >= 0", p.DctcpRateAI)
	case p.RPTimer <= 0:
		return bad("RP_TIMER", "%d ps must be > 0", p.RPTimer)
	case p.AlphaResumeInterval <= 0:
		return bad("ALPHA_RESUME_INTERVAL", "%d ps must be > 0", p.AlphaResumeInterval)
	case p.RateDecreaseInterval <= 0:
		return bad("RATE_DECREASE_INTERVAL", "%d ps must be > 0", p.RateDecreaseInterval)
	case p.FastRecoveryTimes < 0:
		return bad("FAST_RECOVERY_TIMES", "%d must be >= 0", p.FastRecoveryTimes)
	case !fin(p.RateOnFirstCNP) || p.RateOnFirstCNP <= 0 || p.RateOnFirstCNP > 1:
		return bad("RATE_ON_FIRST_CNP", "%g outside (0,1]", p.RateOnFirstCNP)
	case !fin(p.UTarget) || p.UTarget <= 0:
		return bad("U_TARGET", "%g must be > 0", p.UTarget)
	case p.MiThresh < 0:
		return bad("MI_THRESH", "%d must be >= 0", p.MiThresh)
	case p.IntMulti < 1:
		return bad("INT_MULTI", "%d must be >= 1", p.IntMulti)
	case !fin(p.PintLogBase) || p.PintLogBase <= 1:
		return bad("PINT_LOG_BASE", "%g must be > 1", p.PintLogBase)
	case !fin(p.PintProb) || p.PintProb < 0 || p.PintProb > 1:
		return bad("PINT_PROB", "%g outside [0,1]", p.PintProb)
	case !fin(p.TimelyAlpha) || p.TimelyAlpha <= 0 || p.TimelyAlpha > 1:
		return bad("TMLY_ALPHA", "%g outside (0,1]", p.TimelyAlpha)
	case !fin(p.TimelyBeta) || p.TimelyBeta <= 0:
		return bad("TMLY_BETA", "%g must be > 0", p.TimelyBeta)
	case p.TimelyTLow < 0:
		return bad("TMLY_TLOW", "%d ps must be >= 0", p.TimelyTLow)
	case p.TimelyTHigh <= p.TimelyTLow:
		return bad("TMLY_THIGH", "%d ps must exceed TMLY_TLOW (%d ps)", p.TimelyTHigh, p.TimelyTLow)
	case p.TimelyMinRTT <= 0:
		return bad("TMLY_MINRTT", "%d ps must be > 0", p.TimelyMinRTT)
	case p.TimelyHAIThresh < 0:
		return bad("TMLY_HAI_THRESH", "%d must be >= 0", p.TimelyHAIThresh)
	}
	return nil
}

// ErrUnknownKey is the error Set wraps for a key it does not know.
var ErrUnknownKey = errors.New("unknown congestion-control key")

// Set applies one SimAI.conf-style key. Values use SimAI's conventions:
// rates like "50Mb/s" or "100Gbps" (a plain number is bit/s); times in µs
// when plain ("900"), or with a unit ("900us", "1ms"); flags 0 or 1.
// Errors name the key; an unknown key's wraps ErrUnknownKey. Values are
// checked one by one; New validates the whole set.
func (p *Params) Set(key, value string) error {
	f, ok := setters[strings.ToUpper(strings.TrimSpace(key))]
	if !ok {
		return fmt.Errorf("cc: %w %q", ErrUnknownKey, key)
	}
	v := strings.TrimSpace(value)
	if v == "" || strings.ContainsAny(v, " \t") {
		return fmt.Errorf("cc: %s %q: expected one value", key, value)
	}
	if err := f(p, v); err != nil {
		return fmt.Errorf("cc: %s %q: %v", key, value, err)
	}
	return nil
}

// Keys lists the configuration keys Set accepts, sorted.
func Keys() []string {
	keys := make([]string, 0, len(setters))
	for k := range setters {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

type setter func(p *Params, v string) error

var setters = map[string]setter{
	"EWMA_GAIN":              key(parseFloat, func(p *Params) *float64 { return &p.EwmaGain }),
	"DCTCP_GAIN":             key(parseFloat, func(p *Params) *float64 { return &p.DctcpGain }),
	"RATE_AI":                key(parseRate, func(p *Params) *float64 { return &p.RateAI }),
	"RATE_HAI":               key(parseRate, func(p *Params) *float64 { return &p.RateHAI }),
	"MIN_RATE":               key(parseRate, func(p *Params) *float64 { return &p.MinRate }),
	"DCTCP_RATE_AI":          key(parseRate, func(p *Params) *float64 { return &p.DctcpRateAI }),
	"RP_TIMER":               key(parseTime, func(p *Params) *int64 { return &p.RPTimer }),
	"ALPHA_RESUME_INTERVAL":  key(parseTime, func(p *Params) *int64 { return &p.AlphaResumeInterval }),
	"RATE_DECREASE_INTERVAL": key(parseTime, func(p *Params) *int64 { return &p.RateDecreaseInterval }),
	"FAST_RECOVERY_TIMES":    key(parseInt, func(p *Params) *int { return &p.FastRecoveryTimes }),
	"CLAMP_TARGET_RATE":      key(parseFlag, func(p *Params) *bool { return &p.ClampTargetRate }),
	"RATE_ON_FIRST_CNP":      key(parseFloat, func(p *Params) *float64 { return &p.RateOnFirstCNP }),
	"U_TARGET":               key(parseFloat, func(p *Params) *float64 { return &p.UTarget }),
	"MI_THRESH":              key(parseInt, func(p *Params) *int { return &p.MiThresh }),
	"FAST_REACT":             key(parseFlag, func(p *Params) *bool { return &p.FastReact }),
	"MULTI_RATE":             key(parseFlag, func(p *Params) *bool { return &p.MultiRate }),
	"SAMPLE_FEEDBACK":        key(parseFlag, func(p *Params) *bool { return &p.SampleFeedback }),
	"INT_MULTI":              key(parseInt, func(p *Params) *int { return &p.IntMulti }),
	"PINT_LOG_BASE":          key(parseFloat, func(p *Params) *float64 { return &p.PintLogBase }),
	"PINT_PROB":              key(parseFloat, func(p *Params) *float64 { return &p.PintProb }),
	"TMLY_ALPHA":             key(parseFloat, func(p *Params) *float64 { return &p.TimelyAlpha }),
	"TMLY_BETA":              key(parseFloat, func(p *Params) *float64 { return &p.TimelyBeta }),
	"TMLY_TLOW":              key(parseTime, func(p *Params) *int64 { return &p.TimelyTLow }),
	"TMLY_THIGH":             key(parseTime, func(p *Params) *int64 { return &p.TimelyTHigh }),
	"TMLY_MINRTT":            key(parseTime, func(p *Params) *int64 { return &p.TimelyMinRTT }),
	"TMLY_HAI_THRESH":        key(parseInt, func(p *Params) *int { return &p.TimelyHAIThresh }),
	"RATE_BOUND":             key(parseFlag, func(p *Params) *bool { return &p.RateBound }),
}

// key is the setter that parses a value and stores it in a field.
func key[T any](parse func(string) (T, error), field func(*Params) *T) setter {
	return func(p *Params, v string) error {
		x, err := parse(v)
		if err != nil {
			return err
		}
		*field(p) = x
		return nil
	}
}

func parseFloat(v string) (float64, error) {
	x, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, fmt.Errorf("not a number")
	}
	return x, nil
}

func parseInt(v string) (int, error) {
	x, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("not an integer")
	}
	return x, nil
}

func parseFlag(v string) (bool, error) {
	switch v {
	case "0":
		return false, nil
	case "1":
		return true, nil
	}
	return false, fmt.Errorf("expected 0 or 1")
}

// parseRate reads a rate with a unit, or a plain number as ns-3's DataRate
// reads it in SimAI.conf: bit/s. (On the command line a bandwidth needs its
// unit; a configuration file keeps ns-3's convention, as it keeps SimAI's
// plain microseconds for times.)
func parseRate(v string) (float64, error) {
	if x, err := strconv.ParseFloat(v, 64); err == nil {
		v = strconv.FormatFloat(x, 'g', -1, 64) + "bps"
	}
	return units.ParseBandwidth(v)
}

// parseTime reads SimAI's plain microseconds, or a time with a unit.
func parseTime(v string) (int64, error) {
	if x, err := strconv.ParseFloat(v, 64); err == nil {
		if math.IsNaN(x) || x < 0 || x > float64(math.MaxInt64/2)/float64(us) {
			return 0, fmt.Errorf("out of range")
		}
		return int64(math.Round(x * float64(us))), nil
	}
	return units.ParseDuration(v)
}
