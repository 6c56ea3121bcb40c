package tests

import "testing"

// Issue 3: the paths of a 1024-GPU cluster (128 identical servers, one
// computation and one paths record) in under 1 s.
func BenchmarkNcclpath1024(b *testing.B) {
	for i := 0; i < b.N; i++ {
		measure(b,
			[]string{"topogen", "--family", "spectrum-x", "--gpus", "1024"},
			[]string{"ncclpath", "-o", "/dev/null"})
	}
}
