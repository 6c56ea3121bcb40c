package packet

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// switches is the calling thread's voluntary context switches so far
// (-1 if it cannot say).
func switches() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return -1
	}
	return ru.Nvcsw
}

// A thread of the partitioned loop spinning for the next window keeps its
// core for spinKeep. It called runtime.Gosched every 64 loads from the
// start, which for a goroutine locked to its thread parks the thread until
// another hands its P back: a voluntary context switch each, 5-58 us,
// hundreds in 5 ms. When the crew's threads outnumber the Ps, a spinning
// thread yields its P from the start.
func TestPartitionSpinKeepsThread(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs a P for the spinning thread and one for the test")
	}
	defer func(d, k time.Duration) { spinFor, spinKeep = d, k }(spinFor, spinKeep)
	spinFor, spinKeep = time.Minute, time.Minute // spin on the core, never yield or sleep
	var s signal
	s.init(false)
	got := make(chan int64)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		before := switches()
		s.wait(func(v int64) bool { return v != 0 })
		if after := switches(); before < 0 || after < 0 {
			got <- -1
		} else {
			got <- after - before
		}
	}()
	// Under the 10 ms after which the runtime preempts a goroutine (a
	// switch too), unless a loaded machine runs this one late.
	time.Sleep(5 * time.Millisecond)
	s.store(1)
	if n := <-got; n < 0 {
		t.Fatal("getrusage(RUSAGE_THREAD) failed")
	} else if n > 20 {
		t.Fatalf("the spinning thread left its core %d times in about 5 ms: it yields as it spins", n)
	}

	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	c := newCrew(make([]*Sim, 2), 2)
	defer c.stop()
	if !c.next.yield || !c.finished.yield {
		t.Fatal("two threads on one P: a spinning thread must yield the P to the other")
	}
}
