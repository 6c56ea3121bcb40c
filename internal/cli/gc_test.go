package cli

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// GCPercentAbove: no collection until the heap reaches the floor, then
// the percent asked for, with no memory limit left behind.
func TestGCPercentAbove(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	runtime.GC()
	const floor = 32 << 20
	GCPercentAbove(37, floor)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gcs := ms.NumGC
	var keep [][]byte
	for range 8 { // 8 MB, far below the floor
		keep = append(keep, make([]byte, 1<<20))
	}
	if runtime.ReadMemStats(&ms); ms.NumGC != gcs {
		t.Fatalf("%d collections below the floor", ms.NumGC-gcs)
	}
	for range 64 { // 64 MB of garbage: past the floor
		sink = make([]byte, 1<<20)
	}
	deadline := time.Now().Add(10 * time.Second) // the cleanup runs on its own goroutine
	for {
		p := debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		if p == 37 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GOGC %d after the floor was reached, want 37", p)
		}
		runtime.Gosched()
	}
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		t.Errorf("memory limit %d left after the floor", l)
	}
	runtime.KeepAlive(keep)
}

var sink []byte
