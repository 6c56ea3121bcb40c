package units

import (
	"math"
	"testing"
)

// FuzzParse feeds the three parsers arbitrary text: they either fail or give
// a finite, non-negative value that the matching formatter writes back to the
// same value.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"64MiB", "1GB", "8M", "1048576", "400Gbps", "50GB/s", "2.5e3 ns", "0.0005ms", "1e-3us", "-1", "1e400", ".", "1e", "+5KB", "3 min"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := ParseSize(s); err == nil {
			if n < 0 {
				t.Fatalf("ParseSize(%q) = %d", s, n)
			}
			if back, err := ParseSize(FormatSize(n)); err != nil || back != n {
				t.Fatalf("ParseSize(%q) = %d, written %q, read back %d, %v", s, n, FormatSize(n), back, err)
			}
		}
		if bps, err := ParseBandwidth(s); err == nil {
			if !(bps > 0) || math.IsInf(bps, 0) {
				t.Fatalf("ParseBandwidth(%q) = %g", s, bps)
			}
			if back, err := ParseBandwidth(FormatBandwidth(bps)); err != nil || math.Abs(back-bps) > 1e-9*bps {
				t.Fatalf("ParseBandwidth(%q) = %g, written %q, read back %g, %v", s, bps, FormatBandwidth(bps), back, err)
			}
		}
		if ps, err := ParseDuration(s); err == nil {
			if ps < 0 {
				t.Fatalf("ParseDuration(%q) = %d", s, ps)
			}
			if back, err := ParseDuration(FormatDuration(ps)); err != nil || back != ps {
				t.Fatalf("ParseDuration(%q) = %d, written %q, read back %d, %v", s, ps, FormatDuration(ps), back, err)
			}
		}
	})
}
