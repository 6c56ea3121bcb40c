package packet

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// The shipped configurations load; switches fabricsim does not model are
// refused when turned on, naming the file, line and key.
func TestConfigKeys(t *testing.T) {
	for _, name := range []string{"../../examples/conf/default.conf", "../../examples/conf/SimAI.conf"} {
		if _, err := readConfFile(t, name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for _, key := range []string{"GLOBAL_T", "L2_BACK_TO_ZERO"} {
		c := DefaultConfig()
		if err := c.Read(strings.NewReader("CC_MODE 1\n"+key+" 0\n"), "ok.conf"); err != nil {
			t.Errorf("%s 0: %v", key, err)
		}
		err := c.Read(strings.NewReader("CC_MODE 1\n"+key+" 1\n"), "x.conf")
		if err == nil || !strings.Contains(err.Error(), "x.conf: line 2, key "+key) || !strings.Contains(err.Error(), "not implemented") {
			t.Errorf("%s 1: %v", key, err)
		}
	}
	c := DefaultConfig()
	if err := c.SetKV("L2_CHUNK_SIZE=4000"); err != nil {
		t.Errorf("L2_CHUNK_SIZE is accepted and ignored: %v", err)
	}
	// Congestion-control keys are parsed as they are read.
	if err := c.Read(strings.NewReader("RATE_AI 5Gbps\nRP_TIMER 55\n"), "cc.conf"); err != nil {
		t.Fatal(err)
	}
	if c.CC.RateAI != 5e9 || c.CC.RPTimer != 55_000_000 {
		t.Fatalf("RATE_AI %g, RP_TIMER %d ps", c.CC.RateAI, c.CC.RPTimer)
	}
	if got := c.Describe()["cc"].(map[string]string); got["RATE_AI"] != "5Gbps" || got["RP_TIMER"] != "55" || len(got) != 2 {
		t.Fatalf("metadata holds the CC keys as written: %v", got)
	}
	for conf, want := range map[string]string{
		"CC_MODE 1\nRATE_AI fast\n":  "bad.conf: line 2, key RATE_AI",
		"RATE_AI 50 Mb/s\n":          "expected one value",
		"NO_SUCH_KEY 1 2\n":          "unknown key",
		"CC_MODE 1\n\nEWMA_GAIN x\n": "bad.conf: line 3, key EWMA_GAIN",
	} {
		c := DefaultConfig()
		if err := c.Read(strings.NewReader(conf), "bad.conf"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", conf, err, want)
		}
	}
}

// PAUSE_TIME is µs with fractions: 0.5 is 500 ns (it was truncated to 0,
// and the PFC refresh at half of it re-armed at the same instant forever);
// 0, refresh storms below 0.1 µs and nonsense are refused.
func TestPauseTime(t *testing.T) {
	c := DefaultConfig()
	if err := c.SetKV("PAUSE_TIME=0.5"); err != nil || c.PauseTimePs != 500_000 {
		t.Fatalf("PAUSE_TIME=0.5: %v, %d ps", err, c.PauseTimePs)
	}
	for _, v := range []string{"0", "0.00001", "0.09", "-1", "1e9", "NaN", "x"} {
		if err := c.SetKV("PAUSE_TIME=" + v); err == nil || !strings.Contains(err.Error(), "PAUSE_TIME") {
			t.Errorf("PAUSE_TIME=%s: %v", v, err)
		}
	}
}

// Whole-number keys refuse fractions instead of truncating them; the
// buffer size takes fractional MB.
func TestConfigWholeNumbers(t *testing.T) {
	for _, kv := range []string{"CC_MODE=1.5", "QPS_PER_CONNECTION=2.5", "PACKET_PAYLOAD_SIZE=1000.5", "BUFFER_SIZE=0", "BUFFER_SIZE=2048.5"} {
		c := DefaultConfig()
		if err := c.SetKV(kv); err == nil {
			t.Errorf("%s accepted", kv)
		}
	}
	c := DefaultConfig()
	if err := c.SetKV("BUFFER_SIZE=1.5"); err != nil || c.BufferBytes != 3<<19 {
		t.Errorf("BUFFER_SIZE=1.5: %v, %d bytes", err, c.BufferBytes)
	}
	if err := c.SetKV("BUFFER_SIZE=4096"); err != nil || c.BufferBytes != 4096 {
		t.Errorf("BUFFER_SIZE=4096: %v, %d bytes", err, c.BufferBytes)
	}
}

// examples/conf/default.conf documents every key of the table (Schema,
// pkg/cc's included) that is not ignored, as a "KEY value" line or, for a
// key without a neutral value, a commented "#   KEY value" example; and
// the values it writes are the table's defaults.
func TestDefaultConfDocumentsEveryKey(t *testing.T) {
	conf, err := os.ReadFile("../../examples/conf/default.conf")
	if err != nil {
		t.Fatal(err)
	}
	keys := Schema()
	if len(keys) < len(cc.Keys())+45 {
		t.Fatalf("%d keys in the schema", len(keys))
	}
	for _, k := range keys {
		if k.Type != "ignored" && !regexp.MustCompile(`(?m)^(#\s+)?`+k.Name+`\s`).Match(conf) {
			t.Errorf("key %s is read but not documented in examples/conf/default.conf", k.Name)
		}
	}
	c := DefaultConfig()
	if err := c.Read(strings.NewReader(string(conf)), "default.conf"); err != nil {
		t.Fatal(err)
	}
	if want := DefaultConfig(); !reflect.DeepEqual(c, want) {
		t.Errorf("default.conf differs from the table's defaults:\n%+v\n%+v", c, want)
	}
}

// The key table: every key once (pkg/cc's included), every default read
// back by its own row, ranges where numbers are and nowhere else, and
// SimAI's shipped SimAI.conf (../shared/refs/simai, copied into
// examples/conf) giving exactly the defaults but for its 40,000 s stop
// time, which SimAI means as "run to the end".
func TestConfigSchema(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Schema() {
		if seen[k.Name] {
			t.Errorf("%s twice", k.Name)
		}
		seen[k.Name] = true
		numeric := k.Type == "integer" || k.Type == "number" || k.Type == "rate" || k.Type == "time" || k.Type == "map" // a map's range bounds its values
		if numeric != (k.Range != "" && !strings.Contains(k.Range, "|")) || (k.Type == "choice") != strings.Contains(k.Range, "|") {
			t.Errorf("%s: a %s with range %q", k.Name, k.Type, k.Range)
		}
		if k.Default != "" {
			c := DefaultConfig()
			if err := c.apply(k.Name, strings.Fields(k.Default)); err != nil {
				t.Errorf("%s: default %q: %v", k.Name, k.Default, err)
			}
		}
	}
	c := DefaultConfig()
	f, err := os.Open("../../examples/conf/SimAI.conf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := c.Read(f, "SimAI.conf"); err != nil {
		t.Fatal(err)
	}
	if c.StopPs != 40_000_000_000_000_000 {
		t.Errorf("SIMULATOR_STOP_TIME 40000000000000.00 ns read as %d ps", c.StopPs)
	}
	c.StopPs = 0
	if want := DefaultConfig(); !reflect.DeepEqual(c, want) {
		t.Errorf("SimAI.conf differs from the defaults:\n%+v\n%+v", c, want)
	}
	// Rows that do more than store the value.
	for kv, ok := range map[string]func(c *Config) bool{
		"SIMULATOR_STOP_TIME=1e16": func(c *Config) bool { return c.StopPs == 0 }, // ps would overflow: run to the end
		"L2_ACK_INTERVAL=0":        func(c *Config) bool { return c.AckInterval == 1 },
		"RP_TIMER=8.2":             func(c *Config) bool { return c.CC.RPTimer == 8_200_000 },
		"BUFFER_SIZE=1023.5":       func(c *Config) bool { return c.BufferBytes == 1_073_217_536 }, // MB below 1024
	} {
		c := DefaultConfig()
		if err := c.SetKV(kv); err != nil || !ok(&c) {
			t.Errorf("%s: %v, %+v", kv, err, c)
		}
	}
	// A range error names the range and the unit.
	if err := c.SetKV("PACKET_PAYLOAD_SIZE=32"); err == nil || !strings.Contains(err.Error(), "32 bytes is outside [64,1048576]") {
		t.Errorf("PACKET_PAYLOAD_SIZE=32: %v", err)
	}
}

// LINK_DOWN's time and nodes must fit what the simulator keeps: past them
// they wrapped around onto another link (node 2^32 + 18 was node 18) or
// into the past (9.3e15 ns failed the link at 11.76 µs).
func TestLinkDownRanges(t *testing.T) {
	c := DefaultConfig()
	if err := c.SetKV("LINK_DOWN=20000 3 18"); err != nil || len(c.LinkDown) != 1 || c.LinkDown[0] != (LinkDown{AtPs: 20_000_000, A: 3, B: 18, Src: "--set LINK_DOWN"}) {
		t.Fatalf("LINK_DOWN=20000 3 18: %v, %+v", err, c.LinkDown)
	}
	for _, v := range []string{"20000 4294967314 18", "20000 3 2147483648", "9300000000000000 0 18", "100000000000000000 0 18", "-1 0 18"} {
		if err := c.SetKV("LINK_DOWN=" + v); err == nil || !strings.Contains(err.Error(), "LINK_DOWN") {
			t.Errorf("LINK_DOWN=%s: %v", v, err)
		}
	}
}

// Validate checks what no single key can, once for the command line (before
// any input is read) and again in New: CC_MODE with its keys, and keys
// that must agree with each other.
func TestConfigValidate(t *testing.T) {
	if cfg := DefaultConfig(); cfg.Validate() != nil {
		t.Fatalf("defaults: %v", cfg.Validate())
	}
	for _, c := range []struct {
		name, want string
		mutate     func(*Config)
	}{
		{"unknown CC_MODE", "CC_MODE 2", func(c *Config) { c.CCMode = 2 }},
		{"TMLY_THIGH below TMLY_TLOW", "TMLY_THIGH", func(c *Config) { c.CCMode = 7; c.CC.TimelyTHigh = c.CC.TimelyTLow }},
		{"65 queue pairs", "QPS_PER_CONNECTION", func(c *Config) { c.QPsPerConn = 65 }},
		{"port PFC on a lossy fabric", "ENABLE_PFC", func(c *Config) { c.PortPFC, c.EnablePFC = true, false }},
		{"port thresholds crossed", "PFC_PORT_LOW_KB", func(c *Config) { c.PortPFC, c.PortHighKB, c.PortLowKB = true, 10, 20 }},
	} {
		cfg := DefaultConfig()
		c.mutate(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.name, err, c.want)
		}
		tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 16})
		if _, _, err := newSimErr(t, tp, cfg, cfg.CCMode, []flowSpec{{0, 8, 1, nil}}); err == nil {
			t.Errorf("%s: New accepted it", c.name)
		}
	}
}

// flowsim-packet's keys and pkg/cc's read a spelling the same way: a flag
// written 1.0, a time with a unit, a whole number in exponent form; times
// round to the nearest ps. (Each table once had its own reader: FAST_REACT
// refused 1.0 that ENABLE_QCN took, PAUSE_TIME refused 5us that RP_TIMER
// took, and the monitor intervals truncated where PAUSE_TIME rounded.)
func TestOneValueReader(t *testing.T) {
	for kv, ok := range map[string]func(c *Config) bool{
		"ENABLE_QCN=1.0":                func(c *Config) bool { return c.EnableQCN },
		"FAST_REACT=0.0":                func(c *Config) bool { return !c.CC.FastReact },
		"PAUSE_TIME=2us":                func(c *Config) bool { return c.PauseTimePs == 2_000_000 },
		"RP_TIMER=2us":                  func(c *Config) bool { return c.CC.RPTimer == 2_000_000 },
		"FLOWLET_GAP_US=500ns":          func(c *Config) bool { return c.FlowletGapPs == 500_000 },
		"RTO_US=2ms":                    func(c *Config) bool { return c.RTOPs == 2_000_000_000 },
		"SIMULATOR_STOP_TIME=3ms":       func(c *Config) bool { return c.StopPs == 3_000_000_000 },
		"QP_MON_INTERVAL=0.0012345678":  func(c *Config) bool { return c.QPMonPs == 1235 }, // 1234.5678 ps
		"TMLY_MINRTT=0.0012345678":      func(c *Config) bool { return c.CC.TimelyMinRTT == 1235 },
		"QPS_PER_CONNECTION=4.0":        func(c *Config) bool { return c.QPsPerConn == 4 },
		"FAST_RECOVERY_TIMES=2e0":       func(c *Config) bool { return c.CC.FastRecoveryTimes == 2 },
		"PACKET_PAYLOAD_SIZE=1e3":       func(c *Config) bool { return c.PayloadSize == 1000 },
		"RATE_AI=1Gbps":                 func(c *Config) bool { return c.CC.RateAI == 1e9 },
		"RATE_AI=1000000000":            func(c *Config) bool { return c.CC.RateAI == 1e9 }, // ns-3's bit/s
		"MON_END=1s":                    func(c *Config) bool { return c.MonEndPs == 1e12 },
		"SIMULATOR_STOP_TIME=1000000.4": func(c *Config) bool { return c.StopPs == 1_000_000_400 },
	} {
		c := DefaultConfig()
		if err := c.SetKV(kv); err != nil || !ok(&c) {
			t.Errorf("%s: %v", kv, err)
		}
	}
	for kv, want := range map[string]string{
		"FAST_REACT=2":          `"2": expected 0 or 1`,
		"ENABLE_QCN=2":          `"2": expected 0 or 1`,
		"MI_THRESH=1.5":         "1.5 is not a whole number",
		"CC_MODE=1.5":           "1.5 is not a whole number",
		"PAUSE_TIME=5 parsecs":  "expected one value",
		"RP_TIMER=5parsecs":     "bad time",
		"PAUSE_TIME=5parsecs":   "bad time",
		"RP_TIMER=1e300":        "is outside (0,1e9]",
		"TMLY_TLOW=-1us":        "must be non-negative",
		"TMLY_TLOW=-1":          "-1 us is outside [0,1e9]",
		"QP_MON_INTERVAL=0.1ns": "0.0001 us is outside [0.001,1e12]",
	} {
		c := DefaultConfig()
		if err := c.SetKV(kv); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", kv, err, want)
		}
	}
}

// readConfFile reads a conf file over the defaults, as flowsim-packet's
// --conf does.
func readConfFile(t *testing.T, name string) (Config, error) {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := DefaultConfig()
	err = c.Read(f, name)
	return c, err
}

// A LINK_DOWN naming two nodes without a link is found only with the
// topology; the error still names the file and line (or --set) to fix.
// It once said only "LINK_DOWN 0 999: no link between these nodes".
func TestLinkDownNoLinkNamesLine(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 16})
	for _, tc := range []struct {
		conf, set, want string
	}{
		{"CC_MODE 1\nLINK_DOWN 1000 0 999\n", "", "my.conf: line 2, key LINK_DOWN: no link between nodes 0 and 999 in the topology"},
		{"", "LINK_DOWN=1000 0 1", "--set LINK_DOWN: no link between nodes 0 and 1 in the topology"},
	} {
		cfg := DefaultConfig()
		if err := cfg.Read(strings.NewReader(tc.conf), "my.conf"); err != nil {
			t.Fatal(err)
		}
		if tc.set != "" {
			if err := cfg.SetKV(tc.set); err != nil {
				t.Fatal(err)
			}
		}
		_, _, err := newSimErr(t, tp, cfg, cc.ModeDCQCN, []flowSpec{{0, 8, 1 << 20, nil}})
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q %q: got %v, want %q...", tc.conf, tc.set, err, tc.want)
		}
	}
}

// A SIMULATOR_STOP_TIME under a picosecond (a time meant in seconds,
// 0.0001) is refused: it rounded to 0, run to the end, silently.
func TestStopTimeUnderPs(t *testing.T) {
	c := DefaultConfig()
	if err := c.SetKV("SIMULATOR_STOP_TIME=0.0001"); err == nil || !strings.Contains(err.Error(), "--set SIMULATOR_STOP_TIME: 0.0001 ns rounds to 0 ps") {
		t.Errorf("0.0001: %v", err)
	}
	// With a unit too (units.ParseDuration rounded 0.4ps to 0 before any
	// check saw it).
	for _, v := range []string{"0.4ps", "0.0000001us"} {
		c := DefaultConfig()
		if err := c.SetKV("SIMULATOR_STOP_TIME=" + v); err == nil || !strings.Contains(err.Error(), "under a picosecond") {
			t.Errorf("%s: %v", v, err)
		}
	}
	for v, ps := range map[string]int64{"0": 0, "0.001": 1, "100000": 100_000_000} {
		c := DefaultConfig()
		if err := c.SetKV("SIMULATOR_STOP_TIME=" + v); err != nil || c.StopPs != ps {
			t.Errorf("%s: %v, %d ps, want %d", v, err, c.StopPs, ps)
		}
	}
}

// DCQCN_PROFILE sets the DCQCN keys; keys given with it override it in
// any --set order and after it in a file, and a file that gives one of
// its keys before it is refused naming both lines (the profile would
// silently replace the value).
func TestDCQCNProfileKey(t *testing.T) {
	for _, kvs := range [][]string{
		{"DCQCN_PROFILE=connectx", "RP_TIMER=55"},
		{"RP_TIMER=55", "DCQCN_PROFILE=connectx"},
	} {
		c := DefaultConfig()
		if err := c.SetKVs(kvs); err != nil {
			t.Fatal(err)
		}
		if c.CC.RPTimer != 55*1_000_000 || c.CC.ByteReset != 32767 || c.CC.RateAI != 5e6 {
			t.Errorf("%v: RP_TIMER %d ps, RPG_BYTE_RESET %d, RATE_AI %g", kvs, c.CC.RPTimer, c.CC.ByteReset, c.CC.RateAI)
		}
	}
	c := DefaultConfig()
	if err := c.Read(strings.NewReader("DCQCN_PROFILE connectx\nRP_TIMER 55\n"), "a.conf"); err != nil || c.CC.RPTimer != 55*1_000_000 || c.CC.ByteReset != 32767 {
		t.Errorf("profile then key: %v, RP_TIMER %d ps", err, c.CC.RPTimer)
	}
	c = DefaultConfig()
	err := c.Read(strings.NewReader("RP_TIMER 55\n\nDCQCN_PROFILE connectx\n"), "b.conf")
	if err == nil || !strings.Contains(err.Error(), "b.conf: line 3, key DCQCN_PROFILE") || !strings.Contains(err.Error(), "RP_TIMER (line 1)") {
		t.Errorf("key then profile: %v", err)
	}
	// default.conf with connectx on its profile line restates every key
	// connectx sets (SimAI's values): it would run SimAI's DCQCN silently.
	conf, err := os.ReadFile("../../examples/conf/default.conf")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(conf), "\nDCQCN_PROFILE simai\n")
	if i < 0 {
		t.Fatal("default.conf has no DCQCN_PROFILE simai line")
	}
	at := 2 + strings.Count(string(conf)[:i], "\n")
	cx := strings.Replace(string(conf), "\nDCQCN_PROFILE simai\n", "\nDCQCN_PROFILE connectx\n", 1)
	c = DefaultConfig()
	err = c.Read(strings.NewReader(cx), "cx.conf")
	// The keys after it define a valid run (SimAI's DCQCN): it runs, and
	// the profile line's lack of effect is said, once, in one line.
	want := fmt.Sprintf("cx.conf: line %d, key DCQCN_PROFILE: connectx has no effect", at)
	if w := c.Warnings(); err != nil || len(w) != 1 || !strings.HasPrefix(w[0], want) || strings.Contains(w[0], "\n") || c.CC.RPTimer != 900*1_000_000 {
		t.Errorf("default.conf with connectx: %v, warnings %q, RP_TIMER %d ps; want a warning %q...", err, w, c.CC.RPTimer, want)
	}
	// One of its keys left to the profile: accepted.
	c = DefaultConfig()
	if err := c.Read(strings.NewReader(regexp.MustCompile(`(?m)^RP_TIMER .*$`).ReplaceAllString(cx, "")), "cx2.conf"); err != nil || c.CC.RPTimer != 300*1_000_000 {
		t.Errorf("connectx with RP_TIMER left to it: %v, RP_TIMER %d ps", err, c.CC.RPTimer)
	}
	for _, kv := range []string{"DCQCN_PROFILE=cx7", "RPG_BYTE_RESET=-1", "RPG_BYTE_RESET=1.5", "MIN_TIME_BETWEEN_CNPS=-4", "INITIAL_ALPHA=0", "INITIAL_ALPHA=1.5"} {
		c := DefaultConfig()
		k, _, _ := strings.Cut(kv, "=")
		if err := c.SetKV(kv); err == nil || !strings.Contains(err.Error(), k) || strings.Contains(err.Error(), "\n") {
			t.Errorf("--set %s: %v", kv, err)
		}
	}
}
