package cc

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestNewModes(t *testing.T) {
	for _, c := range []struct {
		mode     int
		name     string
		ecn, int bool
	}{
		{0, "none", false, false},
		{1, "dcqcn", true, false},
		{3, "hpcc", false, true},
		{7, "timely", false, false},
		{8, "dctcp", true, false},
		{10, "hpcc-pint", false, true},
	} {
		a, err := New(c.mode, DefaultParams())
		if err != nil {
			t.Fatalf("mode %d: %v", c.mode, err)
		}
		if a.Name() != c.name || a.UsesECN() != c.ecn || a.UsesINT() != c.int {
			t.Errorf("mode %d: %s ECN %v INT %v, want %s %v %v", c.mode, a.Name(), a.UsesECN(), a.UsesINT(), c.name, c.ecn, c.int)
		}
		// Every algorithm starts at line rate with the full window.
		// A reused State: Init clears what the last algorithm left.
		s := State{LineRate: 400 * gbps, BaseWin: 500000, BaseRTT: 10 * us, Seed: 5}
		clean := s
		for i := range s.priv {
			s.priv[i] = 0xdead
		}
		a.Init(&s)
		a.Init(&clean)
		if s.Rate != 400*gbps || s.BaseWin != 500000 || s.LineRate != 400*gbps || s.BaseRTT != 10*us || s.Seed != 5 || s != clean {
			t.Errorf("%s Init on a reused state: %+v, on a fresh one %+v", c.name, s, clean)
		}
	}
	for _, m := range []int{2, 4, 5, 6, 9, 11, 12, -1} {
		_, err := New(m, DefaultParams())
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("CC_MODE %d ", m)) {
			t.Errorf("New(%d) = %v, want an error naming the mode", m, err)
		}
	}
	p := DefaultParams()
	p.MultiRate = true
	if _, err := New(3, p); err == nil || !strings.Contains(err.Error(), "MULTI_RATE") {
		t.Errorf("MULTI_RATE 1 must be refused: %v", err)
	}
	p = DefaultParams()
	p.EwmaGain = 0
	if _, err := New(1, p); err == nil || !strings.Contains(err.Error(), "EWMA_GAIN") {
		t.Errorf("bad params must be refused naming the key: %v", err)
	}
}

func TestNone(t *testing.T) {
	a, _ := New(ModeNone, DefaultParams())
	s := State{LineRate: 100 * gbps, BaseWin: 1000}
	a.Init(&s)
	if w := a.OnFeedback(&s, &Feedback{Now: 5, ECN: true, RTT: 1e9}); w != 0 || s.Rate != 100*gbps || s.BaseWin != 1000 {
		t.Fatalf("none reacted: wake %d %+v", w, s)
	}
	if a.OnTimer(&s, 9) != 0 {
		t.Fatal("none wants a timer")
	}
}

// The CC lines of SimAI's shipped SimAI.conf parse to DefaultParams.
const simaiConfCC = `CC_MODE 1
ALPHA_RESUME_INTERVAL 1
RATE_DECREASE_INTERVAL 4
CLAMP_TARGET_RATE 0
RP_TIMER 900 
EWMA_GAIN 0.00390625
FAST_RECOVERY_TIMES 1
RATE_AI 50Mb/s
RATE_HAI 100Mb/s
MIN_RATE 100Mb/s
DCTCP_RATE_AI 1000Mb/s
FAST_REACT 1
U_TARGET 0.95
MI_THRESH 0
INT_MULTI 1
MULTI_RATE 0
SAMPLE_FEEDBACK 0
PINT_LOG_BASE 1.05
PINT_PROB 1.0
RATE_BOUND 1`

func TestSimAIConfDefaults(t *testing.T) {
	p := DefaultParams()
	for _, line := range strings.Split(simaiConfCC, "\n") {
		f := strings.Fields(line)
		if f[0] == "CC_MODE" {
			continue
		}
		if err := p.Set(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, DefaultParams()) {
		t.Fatalf("SimAI.conf:\n%+v\ndefaults:\n%+v", p, DefaultParams())
	}
	d := DefaultParams()
	if d.RPTimer != 900_000_000 || d.AlphaResumeInterval != 1_000_000 || d.RateDecreaseInterval != 4_000_000 ||
		d.RateAI != 50e6 || d.RateHAI != 100e6 || d.MinRate != 100e6 || d.DctcpRateAI != 1e9 || d.EwmaGain != 1.0/256 {
		t.Fatalf("defaults in ps and bit/s: %+v", d)
	}
	if d.dctcpGain() != 1.0/256 {
		t.Fatalf("DCTCP gain defaults to EWMA_GAIN, got %g", d.dctcpGain())
	}
	// ns-3's TIMELY defaults: TLow 50 µs, THigh 500 µs, minRTT 20 µs.
	if d.TimelyTLow != 50_000_000 || d.TimelyTHigh != 500_000_000 || d.TimelyMinRTT != 20_000_000 ||
		d.TimelyAlpha != 0.875 || d.TimelyBeta != 0.8 || d.TimelyHAIThresh != 5 {
		t.Fatalf("TIMELY defaults: %+v", d)
	}
}

func TestParamsSet(t *testing.T) {
	p := DefaultParams()
	for _, kv := range [][2]string{
		{"RP_TIMER", "55"}, {"rate_ai", "5Gbps"}, {"TMLY_TLOW", "30us"}, {"TMLY_THIGH", "0.4ms"},
		{"DCTCP_GAIN", "0.0625"}, {"CLAMP_TARGET_RATE", "1"}, {"MIN_RATE", "1000000"},
	} {
		if err := p.Set(kv[0], kv[1]); err != nil {
			t.Fatalf("Set(%s, %s): %v", kv[0], kv[1], err)
		}
	}
	if p.RPTimer != 55*us || p.RateAI != 5e9 || p.TimelyTLow != 30*us || p.TimelyTHigh != 400*us ||
		p.dctcpGain() != 0.0625 || !p.ClampTargetRate || p.MinRate != 1e6 {
		t.Fatalf("after Set: %+v", p)
	}
	for _, kv := range [][2]string{
		{"RATE_AI", "fast"}, {"CLAMP_TARGET_RATE", "2"}, {"RP_TIMER", "-1"}, {"MI_THRESH", "1.5"}, {"NO_SUCH_KEY", "1"},
	} {
		if err := p.Set(kv[0], kv[1]); err == nil || !strings.Contains(err.Error(), kv[0]) {
			t.Errorf("Set(%s, %s) = %v, want an error naming the key", kv[0], kv[1], err)
		}
	}
	if err := p.Set("NO_SUCH_KEY", "1"); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("unknown key: %v, want ErrUnknownKey", err)
	}
	for _, v := range []string{"", "50 Mb/s"} {
		if err := p.Set("RATE_AI", v); err == nil || !strings.Contains(err.Error(), "expected one value") {
			t.Errorf("Set(RATE_AI, %q) = %v, want one value", v, err)
		}
	}
	// Set checks each value against its key's range; what depends on
	// several keys (TIMELY's thresholds) waits for New.
	for _, kv := range [][2]string{{"PINT_PROB", "1.5"}, {"EWMA_GAIN", "0"}, {"U_TARGET", "0"}, {"INT_MULTI", "0"}, {"TMLY_ALPHA", "1.01"}} {
		p := DefaultParams()
		if err := p.Set(kv[0], kv[1]); err == nil || !strings.Contains(err.Error(), kv[0]) || !strings.Contains(err.Error(), "outside") {
			t.Errorf("Set(%s, %s) = %v, want a range error naming the key", kv[0], kv[1], err)
		}
	}
	p = DefaultParams()
	if err := p.Set("TMLY_THIGH", "10"); err != nil {
		t.Fatal(err)
	}
	if _, err := New(ModeDCQCN, p); err == nil || !strings.Contains(err.Error(), "TMLY_THIGH") {
		t.Errorf("TMLY_THIGH below TMLY_TLOW must be refused: %v", err)
	}
	// Validate holds every field to its key's range, however it was set.
	p = DefaultParams()
	p.PintProb = 2
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "PINT_PROB") {
		t.Errorf("PintProb 2: %v", err)
	}
}

// Every row of the key table parses: a range in interval notation, a
// default inside it, a type Set knows, no key twice, and none of
// SimAI.conf's missing.
func TestSchema(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Schema() {
		if seen[k.Name] {
			t.Errorf("%s twice", k.Name)
		}
		seen[k.Name] = true
		p := DefaultParams()
		if err := p.Set(k.Name, k.Default); err != nil {
			t.Errorf("%s: default %q: %v", k.Name, k.Default, err)
		}
		if (k.Range == "") != (k.Type == "flag") {
			t.Errorf("%s: a %s with range %q", k.Name, k.Type, k.Range)
		}
	}
	// Every congestion-control key SimAI.conf ships has a row.
	for _, line := range strings.Split(simaiConfCC, "\n") {
		if k := strings.Fields(line)[0]; k != "CC_MODE" && !seen[k] {
			t.Errorf("SimAI.conf's %s has no row", k)
		}
	}
}
