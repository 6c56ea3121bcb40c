package roofline

import "testing"

// Hand-computed: 989 TFLOP of work on an H100 is 1 s of compute; 6.7 TB
// of HBM traffic is 2 s; the slower of the two sets the time.
func TestSeconds(t *testing.T) {
	h, err := For("H100")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ flops, bytes, want float64 }{
		{989e12, 0, 1}, {0, 6.7e12, 2}, {989e12, 6.7e12, 2}, {2 * 989e12, 3.35e12, 2},
	} {
		if got := h.Seconds(c.flops, c.bytes); got < c.want*(1-1e-12) || got > c.want*(1+1e-12) {
			t.Errorf("Seconds(%g, %g) = %g, want %g", c.flops, c.bytes, got, c.want)
		}
	}
	if _, err := For("V100"); err == nil {
		t.Error("V100 has no figures here, but For returned no error")
	}
}
