package cpuidle

import (
	"math"
	"strings"
	"testing"
)

const stat1 = `cpu  100 0 100 800 0 0 0 0 0 0
cpu0 50 0 50 400 0 0 0 0 0 0
cpu1 50 0 50 400 0 0 0 0 0 0
intr 1 2 3
`

// 100 ticks later per core (200 in all): 150 busy, 50 idle.
const stat2 = `cpu  220 0 130 840 10 0 0 0 5 0
cpu0 110 0 65 420 5 0 0 0 0 0
cpu1 110 0 65 420 5 0 0 0 0 0
intr 1 2 3
`

func TestIdleCores(t *testing.T) {
	a, err := parse(strings.NewReader(stat1))
	if err != nil {
		t.Fatal(err)
	}
	b, err := parse(strings.NewReader(stat2))
	if err != nil {
		t.Fatal(err)
	}
	if a.cores != 2 || a.total != 1000 || a.idle != 800 || b.total != 1200 || b.idle != 850 {
		t.Fatalf("parsed %+v and %+v", a, b)
	}
	// 50 of 200 ticks idle: half a core.
	if got := idleCores(a, b, 0); math.Abs(got-0.5) > 1e-9 {
		t.Errorf("idle cores %v, want 0.5", got)
	}
	// This process took 100 of the busy ticks: one and a half idle.
	if got := idleCores(a, b, 100); math.Abs(got-1.5) > 1e-9 {
		t.Errorf("idle cores with own load %v, want 1.5", got)
	}
	if _, err := parse(strings.NewReader("intr 1\n")); err == nil {
		t.Error("no cpu lines: no error")
	}
}

func TestWarning(t *testing.T) {
	for _, c := range []struct {
		threads int
		idle    float64
		warn    bool
	}{{2, 2, false}, {2, 1.6, false}, {2, 1.4, true}, {2, 0.1, true}, {1, 0.1, false}, {4, 2, true}} {
		if got := Warning(c.threads, c.idle, 2); (got != "") != c.warn {
			t.Errorf("%d threads, %.1f idle: %q", c.threads, c.idle, got)
		}
	}
}

func TestSample(t *testing.T) {
	idle, cores, err := Sample(20e6)
	if err != nil {
		t.Skip("no /proc/stat:", err)
	}
	if cores < 1 || idle < 0 || idle > float64(cores) {
		t.Errorf("%v idle of %d cores", idle, cores)
	}
}
