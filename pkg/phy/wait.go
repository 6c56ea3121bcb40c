package phy

import (
	"runtime"
	"time"
)

// spinMargin is how close to a deadline waitUntil stops sleeping. Go's
// timers fire up to about a millisecond late for sub-millisecond sleeps
// (measured on Linux), which would turn an NCCL step latency of a few
// microseconds into a millisecond.
const spinMargin = 1500 * time.Microsecond

// waitUntil returns once the wall clock reaches t (UnixNano): it sleeps
// while more than spinMargin is left, then spins, yielding the processor.
func waitUntil(t int64) {
	for {
		left := time.Duration(t - time.Now().UnixNano())
		switch {
		case left <= 0:
			return
		case left > spinMargin:
			time.Sleep(left - spinMargin)
		default:
			runtime.Gosched()
		}
	}
}
