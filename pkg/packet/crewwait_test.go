package packet

import (
	"testing"
	"time"
)

// A thread of the partitioned loop waiting for the next window gives its
// core up after a short spin: it did spin on unboundedly, and on a
// machine whose cores were busy --threads 2 ran 5.5x slower than one
// (issue 32). It counted threads in state R in /proc, which a loaded
// machine's runnable runtime threads also are: it asks the crew instead.
func TestPartitionWaitSleeps(t *testing.T) {
	c := newCrew(make([]*Sim, 2), 2) // between windows: no window runs
	defer c.stop()
	// Asleep on the condition variable, the waiting thread is off its core
	// whatever the machine's load; the deadline only bounds how long a
	// loaded machine may take to let it get there (it spins 100 us).
	for deadline := time.Now().Add(10 * time.Second); c.next.sleepers.Load() != 1; {
		if time.Now().After(deadline) {
			t.Fatal("the thread waiting between windows never went to sleep: it spins")
		}
		time.Sleep(time.Millisecond)
	}
}

// A thread goes alone only after a wait longer than a time slice and than
// its own part of the window: a long window's parts differ by more than a
// millisecond without any thread being off its core.
func TestDescheduledWait(t *testing.T) {
	for _, c := range []struct {
		waited, own time.Duration
		want        bool
	}{
		{2 * time.Millisecond, 35 * time.Microsecond, true},    // a short window: the other thread lost its core
		{500 * time.Microsecond, 35 * time.Microsecond, false}, // under a time slice
		{2 * time.Millisecond, 8 * time.Millisecond, false},    // a long window's imbalance
		{12 * time.Millisecond, 8 * time.Millisecond, true},    // longer than the whole of its own part
	} {
		if got := descheduled(c.waited, c.own); got != c.want {
			t.Errorf("waited %v after %v of own work: descheduled %v, want %v", c.waited, c.own, got, c.want)
		}
	}
}

// Each thread takes its own part first (thread t part t), then the others
// in the crew's order, each part once a window: a part that changes
// threads from window to window moves its working set between cores.
func TestCrewClaimsOwnPartFirst(t *testing.T) {
	c := newCrew(make([]*Sim, 3), 1)
	for i, k := range []int32{2, 0, 1} { // the order the crew scans in
		c.scan[i].Store(k)
	}
	for _, want := range []int{1, 2, 0, -1} {
		if got := c.claim(1, 1); got != want {
			t.Fatalf("thread 1 in window 1 claimed part %d, want %d", got, want)
		}
	}
	if got := c.claim(0, 1); got != -1 {
		t.Fatalf("part %d taken twice in a window", got)
	}
	if got := c.claim(3, 2); got != 2 { // a thread without a part of its own
		t.Fatalf("thread 3 in window 2 claimed part %d, want 2 (the order's first)", got)
	}
	for _, want := range []int{0, 1, -1} {
		if got := c.claim(0, 2); got != want {
			t.Fatalf("thread 0 in window 2 claimed part %d, want %d", got, want)
		}
	}
}
