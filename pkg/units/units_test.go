package units

import (
	"math"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	sizes := map[string]int64{"64MiB": 64 << 20, "1GB": 1e9, "1048576": 1 << 20, "4KiB": 4096, "8M": 8 << 20, "1.5KiB": 1536, "0": 0}
	for s, want := range sizes {
		if got, err := ParseSize(s); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	bws := map[string]float64{"400Gbps": 4e11, "2880Gbps": 2.88e12, "25GB/s": 2e11, "50Mb/s": 5e7, "1e9bps": 1e9}
	for s, want := range bws {
		if got, err := ParseBandwidth(s); err != nil || got != want {
			t.Errorf("ParseBandwidth(%q) = %g, %v; want %g", s, got, err, want)
		}
	}
	times := map[string]int64{"25ns": 25000, "0.0005ms": 500000, "0.000025ms": 25000, "1us": 1e6, "3ms": 3e9, "7ps": 7}
	for s, want := range times {
		if got, err := ParseDuration(s); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, bad := range []string{"", "fast", "10Qbps", "-5Gbps", "0Gbps", "400", "1e9", "2.5"} {
		if _, err := ParseBandwidth(bad); err == nil {
			t.Errorf("ParseBandwidth(%q) accepted", bad)
		}
	}
	if _, err := ParseBandwidth("400"); err == nil || !strings.Contains(err.Error(), `bad bandwidth "400": missing unit (400bps would be bit/s; use e.g. 400Gbps or 50GB/s)`) {
		t.Errorf("ParseBandwidth(\"400\"): %v", err)
	}
	for _, bad := range []string{"1.5", "-3KiB", "x"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"500", "3 parsecs", "-1us"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
	if FormatBandwidth(4e11) != "400Gbps" || FormatSize(64<<20) != "64MiB" || FormatDuration(25000) != "25ns" {
		t.Error("format")
	}
}

func TestHumanSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1023: "1023B", 1024: "1KiB", 64 << 20: "64MiB", 8e6: "8MB", 1536: "1.5KiB",
		1e9: "1GB", 3 << 30: "3GiB", 1000: "1000B", 1234567: "1.177MiB", -2048: "-2KiB",
		1 << 50: "1PiB", 5 << 60: "5EiB", -1536: "-1.5KiB"} {
		if got := HumanSize(n); got != want {
			t.Errorf("HumanSize(%d) = %q, want %q", n, got, want)
		}
	}
	// Totals in summary lines: the unit comes from the value.
	for n, want := range map[int64]string{142047214 << 10: "135.5GiB", 392817712e3: "365.8GiB", 1025 << 10: "1.001MiB", 123456789: "117.7MiB"} {
		if got := HumanSize(n); got != want {
			t.Errorf("HumanSize(%d) = %q, want %q", n, got, want)
		}
	}
	// Stream labels keep the exact form they always had.
	for n, want := range map[int64]string{142047214 << 10: "142047214KiB", 392817712e3: "392817712KB", 123456789: "117.738MiB", 64 << 20: "64MiB"} {
		if got := ExactSize(n); got != want {
			t.Errorf("ExactSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestParseNumber: config numbers are plain decimals; Go's own spellings
// (underscores, hex floats, Inf, NaN) are refused.
func TestParseNumber(t *testing.T) {
	for s, want := range map[string]float64{"10": 10, "+5": 5, "-2.5": -2.5, ".5": 0.5, "5.": 5, "1e3": 1000, "2.5E-1": 0.25, "0": 0} {
		if x, err := ParseNumber(s); err != nil || x != want {
			t.Errorf("ParseNumber(%q) = %g, %v; want %g", s, x, err, want)
		}
	}
	for _, s := range []string{"1_0", "1_000", "0x10", "0x1p4", "Inf", "-inf", "NaN", "nan", "1e999", "", ".", "e5", "1e", "1e+", "1.2.3", " 1", "1 ", "--1", "1k"} {
		if x, err := ParseNumber(s); err == nil {
			t.Errorf("ParseNumber(%q) = %g, want an error", s, x)
		}
	}
}

// Summary lines and plot axes choose the unit from the value.
func TestHumanScales(t *testing.T) {
	for ps, want := range map[int64]string{
		11400490928000: "11.4s", 392817712: "392.8us", 1500: "1.5ns", 999: "999ps", 0: "0ns",
		60e12 * 90: "5400s", 24100000: "24.1us", 2500e9: "2.5s",
	} {
		if got := HumanDuration(ps); got != want {
			t.Errorf("HumanDuration(%d) = %q, want %q", ps, got, want)
		}
		if got := HumanDuration(ps); ps > 0 {
			if back, err := ParseDuration(got); err != nil || math.Abs(float64(back-ps)) > 1e-3*float64(ps) {
				t.Errorf("%q reads back as %d (%v), want about %d", got, back, err, ps)
			}
		}
	}
	for ns, want := range map[float64]string{22.5e6: "ms", 3e6: "ms", 999: "ns", 1000: "us", 11.4e9: "s", 0.5: "ps"} {
		if got := TimeScale(ns).Unit; got != want {
			t.Errorf("TimeScale(%g) = %s, want %s", ns, got, want)
		}
	}
	for b, want := range map[float64]string{1023: "B", 4096: "KiB", 145e9: "GiB", 3 << 20: "MiB", 2e15: "PiB"} {
		if got := SizeScale(b).Unit; got != want {
			t.Errorf("SizeScale(%g) = %s, want %s", b, got, want)
		}
	}
}
