package grow

import "testing"

// Capacity at least doubles when it grows, and every value is kept.
func TestAppend(t *testing.T) {
	var s []int
	last := 0
	for i := range 10000 {
		s = Append(s, i)
		if c := cap(s); c != last {
			if last > 0 && c < 2*last {
				t.Fatalf("grew %d -> %d", last, c)
			}
			last = c
		}
	}
	s = Append(s, 1, 2, 3)
	for i := range 10000 {
		if s[i] != i {
			t.Fatalf("s[%d] = %d", i, s[i])
		}
	}
	if len(s) != 10003 || s[10002] != 3 {
		t.Fatalf("len %d", len(s))
	}
}
