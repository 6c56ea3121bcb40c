// Package grow appends to slices that become large, doubling their arrays.
package grow

// Append is append growing the array by doubling: Go grows large slices
// by 1.25x, which copies each element about four times (a 1024-rank
// AllToAll holds a million queue pairs of 600 bytes: a fifth of its run
// went to those copies; the DAG builder's 9.5 M dep ids likewise).
func Append[T any](s []T, v ...T) []T {
	if n := len(s) + len(v); n > cap(s) {
		t := make([]T, len(s), max(2*cap(s), n, 64))
		copy(t, s)
		s = t
	}
	return append(s, v...)
}
