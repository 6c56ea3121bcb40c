package stats

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// A reference file parses or fails with one line naming the file and line;
// what parses is finite and non-negative.
func FuzzParseReference(f *testing.F) {
	f.Add("# label: x\nsize_bytes,time_us,algbw_gbps,busbw_gbps\n8,15.2,0.00,0.00\n8589934592,31638,271.51,475.14\n")
	f.Add("size_bytes,time_us,algbw_gbps,busbw_gbps\n1e3,1,2,3\n")
	f.Add("size_bytes,time_us,algbw_gbps,busbw_gbps\n-1,NaN,2,3\n")
	f.Add("size,time\n")
	f.Fuzz(func(t *testing.T, text string) {
		ref, err := ParseReference(strings.NewReader(text), "r.csv")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "r.csv: ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("unlocated or multi-line error %q", err)
			}
			return
		}
		for _, r := range ref.Rows {
			if r.SizeBytes < 0 || !(r.BusbwGBps >= 0) || !(r.TimeUs >= 0) || !(r.AlgbwGBps >= 0) {
				t.Fatalf("row %+v", r)
			}
		}
	})
}

// nccl-tests' formatting of times: two decimals below 100 us, one below
// 10 ms, none above (common.cu).
func TestNCCLTestsTime(t *testing.T) {
	for us, want := range map[float64]string{15: "  15.00", 100: " 100.00", 512.25: "  512.2", 10000: "10000.0", 47535.4: "  47535"} {
		if got := ncclTestsTime(us); got != want {
			t.Errorf("ncclTestsTime(%v) = %q, want %q", us, got, want)
		}
	}
}

// Every published curve in examples/reference reads, and its rows hold
// together as nccl-tests prints them: algbw = size / time (1 GB = 1e9 B)
// within the printed rounding, so a row copied wrong or shifted fails.
func TestPublishedReferencesConsistent(t *testing.T) {
	paths, err := filepath.Glob("../../examples/reference/*.csv")
	if err != nil || len(paths) < 5 {
		t.Fatalf("%d reference files (%v)", len(paths), err)
	}
	for _, p := range paths {
		ref, err := ReadReference(p)
		if err != nil {
			t.Fatal(err)
		}
		if ref.Label == filepath.Base(p) || len(ref.Rows) == 0 {
			t.Errorf("%s: no label line or no rows", p)
		}
		for _, r := range ref.Rows {
			if r.TimeUs <= 0 || r.AlgbwGBps < 1 {
				continue // a plateau statement, or too small for its two printed decimals
			}
			if got := float64(r.SizeBytes) / r.TimeUs / 1e3; math.Abs(got-r.AlgbwGBps) > 0.02*r.AlgbwGBps+0.01 {
				t.Errorf("%s: %d B in %g us is %.2f GB/s, the row says %g", p, r.SizeBytes, r.TimeUs, got, r.AlgbwGBps)
			}
		}
	}
}
