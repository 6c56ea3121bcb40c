package packet

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runnableThreads counts this process's threads other than the caller's
// that are running or waiting for a core (state R in /proc).
func runnableThreads(t *testing.T) int {
	stats, err := filepath.Glob("/proc/self/task/*/stat")
	if err != nil || len(stats) == 0 {
		t.Skip("no /proc/self/task")
	}
	self := syscall.Gettid()
	n := 0
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // exited
		}
		// pid (comm) state ...: the state follows the last ')'.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 0 && f[0] == "R" && filepath.Base(filepath.Dir(p)) != strconv.Itoa(self) {
			n++
		}
	}
	return n
}

// A thread of the partitioned loop waiting for the next window gives its
// core up after a short spin: it did spin on unboundedly, and on a
// machine whose cores were busy --threads 2 ran 5.5x slower than one
// (issue 32). A spinning thread is runnable (R) even while the kernel
// has it off its core, so the check holds whatever the machine's load.
func TestPartitionWaitSleeps(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c := newCrew(make([]*Sim, 2), 2) // between windows: no window runs
	defer c.stop()
	time.Sleep(50 * time.Millisecond)
	busy := 0
	for range 10 {
		if busy = runnableThreads(t); busy == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%d threads still runnable 150 ms into a wait between windows: the waiting thread spins", busy)
}
