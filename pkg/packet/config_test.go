package packet

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// The shipped configurations load; switches fabricsim does not model are
// refused when turned on, naming the file, line and key.
func TestConfigKeys(t *testing.T) {
	for _, name := range []string{"../../examples/conf/default.conf", "../../examples/conf/SimAI.conf"} {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		c := DefaultConfig()
		err = c.Read(f, name)
		f.Close()
		if err != nil {
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

// examples/conf/default.conf documents every key the backend reads: each
// key a case of Config.apply names (read from config.go's syntax tree, so
// a new key cannot be added without this test seeing it) and each of
// pkg/cc's, as a "KEY value" line or, for keys without a neutral value, a
// commented "#   KEY value" example.
func TestDefaultConfDocumentsEveryKey(t *testing.T) {
	fs := token.NewFileSet()
	f, err := parser.ParseFile(fs, "config.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	keys := cc.Keys()
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "apply" {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if c, ok := n.(*ast.CaseClause); ok {
				for _, e := range c.List {
					if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						// Values matched in inner switches (PFC_MODE's
						// "port") are lower case; keys are not.
						if k, _ := strconv.Unquote(lit.Value); k == strings.ToUpper(k) {
							keys = append(keys, k)
						}
					}
				}
			}
			return true
		})
	}
	if len(keys) < len(cc.Keys())+30 {
		t.Fatalf("found %d keys: config.go's apply no longer looks as this test expects", len(keys))
	}
	conf, err := os.ReadFile("../../examples/conf/default.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !regexp.MustCompile(`(?m)^(#\s+)?` + k + `\s`).Match(conf) {
			t.Errorf("key %s is read but not documented in examples/conf/default.conf", k)
		}
	}
}

// LINK_DOWN's time and nodes must fit what the simulator keeps: past them
// they wrapped around onto another link (node 2^32 + 18 was node 18) or
// into the past (9.3e15 ns failed the link at 11.76 µs).
func TestLinkDownRanges(t *testing.T) {
	c := DefaultConfig()
	if err := c.SetKV("LINK_DOWN=20000 3 18"); err != nil || len(c.LinkDown) != 1 || c.LinkDown[0] != (LinkDown{AtPs: 20_000_000, A: 3, B: 18}) {
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
