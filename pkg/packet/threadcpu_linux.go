package packet

import (
	"syscall"
	"unsafe"
)

// threadCPU is the calling OS thread's CPU time (ns, user and system):
// what a part's window cost, whatever else the machine ran meanwhile.
// The goroutine must be locked to its thread (crew does so). Not in the
// vDSO: a system call, about a microsecond, twice a part a window.
func threadCPU() int64 {
	const clockThreadCPUTimeID = 3
	var ts syscall.Timespec
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return ts.Nano()
}
