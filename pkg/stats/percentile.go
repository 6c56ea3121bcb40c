package stats

import (
	"cmp"
	"math"
)

// NearestRank returns the p-th percentile (0 < p ≤ 100) of sorted values
// by the nearest-rank method: the smallest value such that at least p% of
// the values are ≤ it, i.e. sorted[ceil(p·N/100) − 1]. It never
// interpolates, so every percentile is a value that occurred. The rank is
// computed in integers: in floating point 0.95·20 is 19.000000000000004,
// which would round p95 of 20 values up to the 20th.
//
// sorted must be ascending and non-empty.
func NearestRank[T cmp.Ordered](sorted []T, p int) T {
	n := len(sorted)
	rank := (p*n + 99) / 100 // ceil(p·n/100)
	rank = max(1, min(rank, n))
	return sorted[rank-1]
}

// Num is a float64 that encodes NaN and ±Inf as JSON null (JSON has no
// such numbers): a bandwidth of a zero-time collective or a busbw of an
// unknown operation.
type Num float64

// MarshalJSON writes null for NaN and infinities.
func (n Num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return appendFloat(nil, f), nil
}

// Valid reports whether n is a finite number.
func (n Num) Valid() bool { return !math.IsNaN(float64(n)) && !math.IsInf(float64(n), 0) }
