package progress

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fabricsim/fabricsim/pkg/des"
)

// screen is a fake terminal: it keeps what was written, safely across the
// spinner's goroutine.
type screen struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A long simulation shows its simulated time and flows done of total as
// they advance, and Stop leaves the line erased with nothing drawn after.
func TestLongRunRendersAndStopsCleanly(t *testing.T) {
	var s screen
	m := Start(&s, "flowsim-packet", 0)
	m.throttle = 0
	start := time.Now()
	for i := int64(1); i <= 4; i++ {
		m.Set(i*250, 1000, Flows(des.Time(i)*des.Millisecond, uint64(i)<<20, start))
	}
	m.Stop()
	out := s.String()
	for _, want := range []string{"flowsim-packet: simulated 1ms", "simulated 3ms", "250/1000", "750/1000", "Mevents/s", "flows"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in what was drawn:\n%q", want, out)
		}
	}
	if !strings.HasSuffix(out, "\033[2K\r") {
		t.Errorf("the line is not erased at the end:\n%q", out)
	}
	m.Set(900, 1000, "simulated 9 ms")
	m.Phase("writing")
	if s.String() != out {
		t.Errorf("drawn after Stop: %q", strings.TrimPrefix(s.String(), out))
	}
}

// An unknown total is a spinner with the count, and a known total that
// follows it replaces it.
func TestUnknownTotalThenKnown(t *testing.T) {
	var s screen
	m := Start(&s, "fctstats", 0)
	m.throttle = 0
	m.Unit("rows")
	m.Phase("opening run.parquet")
	if out := s.String(); !strings.Contains(out, "fctstats: opening run.parquet") || strings.Contains(out, "(0") {
		t.Errorf("phase: %q", out)
	}
	m.Set(70000, 0, "reading run.parquet")
	if out := s.String(); !strings.Contains(out, "reading run.parquet") || !strings.Contains(out, "70000") {
		t.Errorf("spinner: %q", out)
	}
	m.Set(5, 10, "")
	m.Stop()
	if out := s.String(); !strings.Contains(out, "5/10") || !strings.HasSuffix(out, "\033[2K\r") {
		t.Errorf("bar after spinner: %q", out)
	}
}

// Nothing is drawn before the delay, nor ever by a run that ends before it.
func TestQuickRunDrawsNothing(t *testing.T) {
	var s screen
	m := Start(&s, "flowsim-analytical", time.Hour)
	m.Set(1, 2, "simulated 1 us")
	m.Stop()
	if s.String() != "" {
		t.Errorf("a quick run drew %q", s.String())
	}
	var off *Meter // what Quiet.Meter returns under --quiet or in a pipe
	off.Set(1, 2, "x")
	off.Unit("rows")
	off.Stop()
}

// The first drawing happens when the delay passes, without waiting for
// the next report.
func TestDrawsWhenDelayPasses(t *testing.T) {
	var s screen
	m := Start(&s, "phyrun", 20*time.Millisecond)
	m.Set(3, 8, "")
	deadline := time.Now().Add(2 * time.Second)
	for !strings.Contains(s.String(), "3/8") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	m.Stop()
	if !strings.Contains(s.String(), "3/8") {
		t.Errorf("nothing drawn after the delay: %q", s.String())
	}
}
