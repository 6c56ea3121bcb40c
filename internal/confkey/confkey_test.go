package confkey

import (
	"math"
	"strings"
	"testing"
)

func TestInterval(t *testing.T) {
	for _, c := range []struct {
		rng string
		in  []float64
		out []float64
	}{
		{"(0,1]", []float64{1e-9, 0.5, 1}, []float64{0, -1, 1.0000001, math.NaN()}},
		{"[64,1048576]", []float64{64, 1048576}, []float64{63.9, 1048577}},
		{"[0,1)", []float64{0, 0.999}, []float64{1, -0.1}},
		{"(1,inf)", []float64{1.01, 1e300}, []float64{1, 0}},
	} {
		r := ParseInterval(c.rng)
		for _, x := range c.in {
			if err := r.Check(x, "us"); err != nil {
				t.Errorf("%s refuses %g: %v", c.rng, x, err)
			}
		}
		for _, x := range c.out {
			if err := r.Check(x, "us"); err == nil || !strings.Contains(err.Error(), "us is outside "+c.rng) {
				t.Errorf("%s takes %g: %v", c.rng, x, err)
			}
		}
	}
	for _, bad := range []string{"0,1", "(0;1]", "[a,1]", "(0,1"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("range %q accepted", bad)
				}
			}()
			ParseInterval(bad)
		}()
	}
}

func TestTable(t *testing.T) {
	out := Table([]Key{{Name: "A_KEY", Type: "number", Unit: "us", Range: "[0,1]", Default: "0.5", Doc: "what it does"},
		{Name: "MAP", Type: "map", Default: strings.Repeat("9 ", 40), Doc: "long"}, {Name: "OFF", Type: "flag"}})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[1], "A_KEY  number (us)  [0,1]  0.5") || !strings.Contains(lines[2], "9 9 9 9 9 9 9 9 9 9  ...") || !strings.HasSuffix(lines[3], " -") {
		t.Errorf("table:\n%s", out)
	}
}
