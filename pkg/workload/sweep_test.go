package workload

import (
	"slices"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/nccl"
)

func TestParseSweep(t *testing.T) {
	sw, err := ParseSweep("8:16GiB:2")
	if err != nil || sw != (Sweep{8, 16 << 30, 2}) {
		t.Fatalf("ParseSweep = %+v, %v", sw, err)
	}
	for in, want := range map[string]string{
		"16:8:2":    "MIN 16B is larger than MAX 8B",
		"8:16:1":    "factor 1 must be at least 2",
		"8:16:0":    "factor 0 must be at least 2",
		"8:16:1.5":  "not an integer",
		"8:16":      "want MIN:MAX:FACTOR",
		"0:16:2":    "must be positive",
		"8:x:2":     "x",
		"8:16:2:3":  "want MIN:MAX:FACTOR",
		"-8:16:2":   "",
		"8:16EiB:2": "",
	} {
		if _, err := ParseSweep(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSweep(%q) = %v, want an error with %q", in, err, want)
		}
	}
}

// nccl-tests' sizes: MIN times FACTOR^k up to MAX; whole-buffer operations
// round down to a multiple of ranks x element, 0 where it does not fit.
func TestSweepSizes(t *testing.T) {
	sw := Sweep{8, 1 << 10, 4}
	got, err := sw.Sizes(nccl.AllReduce, 4, 8)
	if want := []int64{8, 32, 128, 512}; err != nil || !slices.Equal(got, want) {
		t.Errorf("allreduce sizes %v, %v; want %v", got, err, want)
	}
	got, _ = sw.Sizes(nccl.AllGather, 4, 8)
	if want := []int64{0, 32, 128, 512}; !slices.Equal(got, want) {
		t.Errorf("allgather sizes %v, want %v", got, want)
	}
	got, _ = Sweep{100, 100, 2}.Sizes(nccl.AllToAll, 4, 8)
	if want := []int64{96}; !slices.Equal(got, want) {
		t.Errorf("alltoall sizes %v, want %v", got, want)
	}
	if _, err := (Sweep{6, 64, 2}).Sizes(nccl.AllReduce, 4, 8); err == nil || !strings.Contains(err.Error(), "size 6 is not a multiple of the 4-byte element") {
		t.Errorf("odd size: %v", err)
	}
	// A sweep to the top of int64 ends instead of overflowing.
	if got, err := (Sweep{1 << 61, 1<<63 - 1, 2}).Sizes(nccl.AllReduce, 1, 1); err != nil || len(got) != 2 {
		t.Errorf("huge sweep %v, %v", got, err)
	}
}

// A sweep spec parses or fails with an error; a parsed one has 0 < MIN <=
// MAX and a factor of at least 2, and its sizes never overflow.
func FuzzParseSweep(f *testing.F) {
	for _, s := range []string{"8:16GiB:2", "1MiB:8:2", "8:16:1", "1:9223372036854775807:2", "x", "8:8:8"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sw, err := ParseSweep(s)
		if err != nil {
			return
		}
		if sw.Min <= 0 || sw.Min > sw.Max || sw.Factor < 2 {
			t.Fatalf("%q parsed to %+v", s, sw)
		}
		sizes, err := sw.Sizes(nccl.AllGather, 1, 8)
		if err != nil {
			return
		}
		for i, v := range sizes {
			if v < 0 || v > sw.Max || i > 0 && v < sizes[i-1] {
				t.Fatalf("%q: sizes %v", s, sizes)
			}
		}
	})
}
