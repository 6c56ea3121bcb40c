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
