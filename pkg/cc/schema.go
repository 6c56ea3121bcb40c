package cc

import (
	"github.com/fabricsim/fabricsim/internal/confkey"
)

// The congestion-control keys of SimAI.conf, one row each: its type, unit,
// range (in the unit a file writes: µs for times, bit/s for rates) and
// default as SimAI.conf writes it (ns-3's where SimAI.conf is silent).
// Set parses and range-checks with the row, Validate re-checks every row,
// DefaultParams is the defaults applied, Schema lists the rows. Params'
// field comments say what each key does.
var keys = []ccKey{
	{Key: confkey.Key{Name: "EWMA_GAIN", Type: "number", Range: "(0,1]", Default: "0.00390625", Doc: "DCQCN alpha gain g (also DCTCP's unless DCTCP_GAIN)"}, f64: func(p *Params) *float64 { return &p.EwmaGain }},
	{Key: confkey.Key{Name: "DCTCP_GAIN", Type: "number", Range: "[0,1]", Default: "0", Doc: "DCTCP alpha gain; 0 = EWMA_GAIN"}, f64: func(p *Params) *float64 { return &p.DctcpGain }},
	{Key: confkey.Key{Name: "RATE_AI", Type: "rate", Unit: "bit/s", Range: "[0,inf)", Default: "50Mb/s", Doc: "additive increase (DCQCN, TIMELY; HPCC's W_AI as a rate)"}, f64: func(p *Params) *float64 { return &p.RateAI }},
	{Key: confkey.Key{Name: "RATE_HAI", Type: "rate", Unit: "bit/s", Range: "[0,inf)", Default: "100Mb/s", Doc: "hyper-additive increase (DCQCN, TIMELY)"}, f64: func(p *Params) *float64 { return &p.RateHAI }},
	{Key: confkey.Key{Name: "MIN_RATE", Type: "rate", Unit: "bit/s", Range: "(0,inf)", Default: "100Mb/s", Doc: "no algorithm paces a queue pair below this"}, f64: func(p *Params) *float64 { return &p.MinRate }},
	{Key: confkey.Key{Name: "DCTCP_RATE_AI", Type: "rate", Unit: "bit/s", Range: "[0,inf)", Default: "1000Mb/s", Doc: "DCTCP additive increase per RTT"}, f64: func(p *Params) *float64 { return &p.DctcpRateAI }},
	{Key: confkey.Key{Name: "RP_TIMER", Type: "time", Unit: "us", Range: "(0,1e9]", Default: "900", Doc: "DCQCN rate-increase period"}, ps: func(p *Params) *int64 { return &p.RPTimer }},
	{Key: confkey.Key{Name: "ALPHA_RESUME_INTERVAL", Type: "time", Unit: "us", Range: "(0,1e9]", Default: "1", Doc: "DCQCN alpha update period"}, ps: func(p *Params) *int64 { return &p.AlphaResumeInterval }},
	{Key: confkey.Key{Name: "RATE_DECREASE_INTERVAL", Type: "time", Unit: "us", Range: "(0,1e9]", Default: "4", Doc: "DCQCN: how often a CNP cuts the rate"}, ps: func(p *Params) *int64 { return &p.RateDecreaseInterval }},
	{Key: confkey.Key{Name: "FAST_RECOVERY_TIMES", Type: "integer", Range: "[0,inf)", Default: "1", Doc: "DCQCN rounds that halve the gap to the target after a cut"}, n: func(p *Params) *int { return &p.FastRecoveryTimes }},
	{Key: confkey.Key{Name: "CLAMP_TARGET_RATE", Type: "flag", Default: "0", Doc: "DCQCN: every cut sets target = rate"}, b: func(p *Params) *bool { return &p.ClampTargetRate }},
	{Key: confkey.Key{Name: "RATE_ON_FIRST_CNP", Type: "number", Range: "(0,1]", Default: "1", Doc: "share of the rate kept on a pair's first CNP"}, f64: func(p *Params) *float64 { return &p.RateOnFirstCNP }},
	{Key: confkey.Key{Name: "INITIAL_ALPHA", Type: "number", Range: "(0,1]", Default: "1", Doc: "fabricsim: DCQCN alpha on a pair's first CNP"}, f64: func(p *Params) *float64 { return &p.InitialAlpha }},
	{Key: confkey.Key{Name: "RPG_BYTE_RESET", Type: "integer", Unit: "bytes", Range: "[0,1e15]", Default: "0", Doc: "fabricsim: DCQCN byte counter, an increase round every N bytes sent after a cut (0: off, as SimAI)"}, n: func(p *Params) *int { return &p.ByteReset }},
	{Key: confkey.Key{Name: "MIN_TIME_BETWEEN_CNPS", Type: "time", Unit: "us", Range: "[0,1e9]", Default: "0", Doc: "fabricsim: DCQCN takes at most one CNP a pair this often (0: every marked ACK, as SimAI)"}, ps: func(p *Params) *int64 { return &p.MinCNPInterval }},
	{Key: confkey.Key{Name: "U_TARGET", Type: "number", Range: "(0,inf)", Default: "0.95", Doc: "HPCC target utilization"}, f64: func(p *Params) *float64 { return &p.UTarget }},
	{Key: confkey.Key{Name: "MI_THRESH", Type: "integer", Range: "[0,inf)", Default: "0", Doc: "HPCC additive rounds before a multiplicative update"}, n: func(p *Params) *int { return &p.MiThresh }},
	{Key: confkey.Key{Name: "FAST_REACT", Type: "flag", Default: "1", Doc: "HPCC reacts to every ACK within an RTT"}, b: func(p *Params) *bool { return &p.FastReact }},
	{Key: confkey.Key{Name: "MULTI_RATE", Type: "flag", Default: "0", Doc: "HPCC per-hop reference rates (1 is not implemented)"}, b: func(p *Params) *bool { return &p.MultiRate }},
	{Key: confkey.Key{Name: "SAMPLE_FEEDBACK", Type: "flag", Default: "0", Doc: "HPCC fast-react ignores hops with empty queues"}, b: func(p *Params) *bool { return &p.SampleFeedback }},
	{Key: confkey.Key{Name: "INT_MULTI", Type: "integer", Range: "[1,inf)", Default: "1", Doc: "SimAI's INT counter scale (accepted, unused)"}, n: func(p *Params) *int { return &p.IntMulti }},
	{Key: confkey.Key{Name: "PINT_LOG_BASE", Type: "number", Range: "(1,inf)", Default: "1.05", Doc: "HPCC-PINT utilization encoding base"}, f64: func(p *Params) *float64 { return &p.PintLogBase }},
	{Key: confkey.Key{Name: "PINT_PROB", Type: "number", Range: "[0,1]", Default: "1", Doc: "HPCC-PINT: share of ACKs whose value is used"}, f64: func(p *Params) *float64 { return &p.PintProb }},
	{Key: confkey.Key{Name: "TMLY_ALPHA", Type: "number", Range: "(0,1]", Default: "0.875", Doc: "TIMELY RTT-difference EWMA weight"}, f64: func(p *Params) *float64 { return &p.TimelyAlpha }},
	{Key: confkey.Key{Name: "TMLY_BETA", Type: "number", Range: "(0,inf)", Default: "0.8", Doc: "TIMELY multiplicative decrease"}, f64: func(p *Params) *float64 { return &p.TimelyBeta }},
	{Key: confkey.Key{Name: "TMLY_TLOW", Type: "time", Unit: "us", Range: "[0,1e9]", Default: "50", Doc: "TIMELY: below this RTT the rate grows"}, ps: func(p *Params) *int64 { return &p.TimelyTLow }},
	{Key: confkey.Key{Name: "TMLY_THIGH", Type: "time", Unit: "us", Range: "(0,1e9]", Default: "500", Doc: "TIMELY: above this RTT the rate falls (above TMLY_TLOW)"}, ps: func(p *Params) *int64 { return &p.TimelyTHigh }},
	{Key: confkey.Key{Name: "TMLY_MINRTT", Type: "time", Unit: "us", Range: "(0,1e9]", Default: "20", Doc: "TIMELY gradient normalization"}, ps: func(p *Params) *int64 { return &p.TimelyMinRTT }},
	{Key: confkey.Key{Name: "TMLY_HAI_THRESH", Type: "integer", Range: "[0,inf)", Default: "5", Doc: "TIMELY increases in a row before RATE_HAI"}, n: func(p *Params) *int { return &p.TimelyHAIThresh }},
	{Key: confkey.Key{Name: "RATE_BOUND", Type: "flag", Default: "1", Doc: "pace at the CC rate (0: line rate)"}, b: func(p *Params) *bool { return &p.RateBound }},
}

// ccKey is a row: its documentation and the one field it sets.
type ccKey struct {
	confkey.Key
	rng confkey.Interval
	f64 func(*Params) *float64
	ps  func(*Params) *int64 // a time, kept in ps
	n   func(*Params) *int
	b   func(*Params) *bool
}

// Schema lists the congestion-control keys, in table order.
func Schema() []confkey.Key {
	out := make([]confkey.Key, len(keys))
	for i := range keys {
		out[i] = keys[i].Key
	}
	return out
}

// defaults is DefaultParams: every row's default, set.
var defaults = func() Params {
	var p Params
	for i := range keys {
		k := &keys[i]
		k.rng = confkey.ParseInterval(k.Range)
		if err := p.Set(k.Name, k.Default); err != nil {
			panic(err) // the table is wrong; the error names the key
		}
	}
	return p
}()

func keyNamed(name string) *ccKey {
	for i := range keys {
		if keys[i].Name == name {
			return &keys[i]
		}
	}
	return nil
}

func (k *ccKey) check(x float64) error { return k.rng.Check(x, k.Unit) }

// put stores x (the row's unit) in the field.
func (k *ccKey) put(p *Params, x float64) {
	switch {
	case k.f64 != nil:
		*k.f64(p) = x
	case k.ps != nil:
		*k.ps(p) = confkey.PsOf(x, k.Unit)
	case k.n != nil:
		*k.n(p) = int(x)
	default:
		*k.b(p) = x == 1
	}
}

// get reads the field in the row's unit.
func (k *ccKey) get(p *Params) float64 {
	switch {
	case k.f64 != nil:
		return *k.f64(p)
	case k.ps != nil:
		return float64(*k.ps(p)) / float64(us)
	case k.n != nil:
		return float64(*k.n(p))
	}
	if *k.b(p) {
		return 1
	}
	return 0
}
