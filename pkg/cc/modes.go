package cc

import (
	"fmt"
	"strings"
)

// CC_MODE values, numbered as SimAI's RDMA model numbers them.
const (
	ModeNone   = 0  // no congestion control: line rate, window only
	ModeDCQCN  = 1  // DCQCN, Mellanox flavour (SimAI's default)
	ModeHPCC   = 3  // HPCC with full INT
	ModeTIMELY = 7  // TIMELY, RTT gradient
	ModeDCTCP  = 8  // DCTCP, rate-based
	ModePINT   = 10 // HPCC-PINT, probabilistic single-value INT
)

var modeNames = []struct {
	mode int
	name string
}{
	{ModeNone, "none"},
	{ModeDCQCN, "dcqcn"},
	{ModeHPCC, "hpcc"},
	{ModeTIMELY, "timely"},
	{ModeDCTCP, "dctcp"},
	{ModePINT, "hpcc-pint"},
}

// New returns the algorithm for a SimAI CC_MODE with the given parameters,
// after validating them. Algorithms keep no per-QP state of their own (it
// lives in State), so one value serves every queue pair.
func New(ccMode int, p Params) (Algorithm, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	switch ccMode {
	case ModeNone:
		return none{}, nil
	case ModeDCQCN:
		return &dcqcn{p: p}, nil
	case ModeHPCC, ModePINT:
		if p.MultiRate {
			return nil, fmt.Errorf("cc: MULTI_RATE 1 (per-hop HPCC rates) is not implemented; use MULTI_RATE 0 as SimAI.conf ships")
		}
		if ccMode == ModePINT {
			return newPint(p), nil
		}
		return &hpcc{p: p}, nil
	case ModeTIMELY:
		return &timely{p: p}, nil
	case ModeDCTCP:
		return &dctcp{p: p}, nil
	}
	return nil, fmt.Errorf("cc: unknown CC_MODE %d (known: %s)", ccMode, knownModes())
}

func knownModes() string {
	var b strings.Builder
	for i, m := range modeNames {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d %s", m.mode, m.name)
	}
	return b.String()
}

// start puts a queue pair at line rate and clears the algorithm's state,
// so a State can be reused.
func start(s *State) {
	s.Rate = s.LineRate
	clear(s.priv[:])
}

// clampRate bounds a rate to [MinRate, LineRate]; line rate wins if the two
// cross (a link slower than MIN_RATE).
func clampRate(r, minRate, lineRate float64) float64 {
	if r < minRate {
		r = minRate
	}
	if r > lineRate {
		r = lineRate
	}
	return r
}
