package packet

import "golang.org/x/sys/unix"

// threadCPU is the calling OS thread's CPU time (ns, user and system):
// what a part's window cost, whatever else the machine ran meanwhile.
// The goroutine must be locked to its thread (crew does so). Not in the
// vDSO: a system call, about a microsecond, twice a part a window.
func threadCPU() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}
