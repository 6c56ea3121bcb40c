// Package cpuidle estimates how many of the machine's cores are idle, so
// that a program asked for more threads than that can say so: threads
// beyond the idle cores take turns with other work and can run slower
// than one.
package cpuidle

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// times is the machine's CPU time so far, in clock ticks, from the
// aggregate "cpu" line of /proc/stat: all of it and the idle part (idle
// and iowait), and the number of cores (its "cpuN" lines).
type times struct {
	total, idle uint64
	cores       int
}

func parse(r io.Reader) (times, error) {
	var t times
	sc := bufio.NewScanner(r)
	found := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) > 0 && f[0] == "cpu":
			if len(f) < 5 {
				return t, fmt.Errorf("/proc/stat: short cpu line %q", sc.Text())
			}
			// user nice system idle iowait irq softirq steal; guest and
			// guest_nice are already inside user and nice.
			for k := 1; k < len(f) && k <= 8; k++ {
				v, err := strconv.ParseUint(f[k], 10, 64)
				if err != nil {
					return t, fmt.Errorf("/proc/stat: cpu line: %v", err)
				}
				t.total += v
				if k == 4 || k == 5 {
					t.idle += v
				}
			}
			found = true
		case len(f) > 0 && strings.HasPrefix(f[0], "cpu"):
			t.cores++
		}
	}
	if err := sc.Err(); err != nil {
		return t, err
	}
	if !found || t.cores == 0 {
		return t, fmt.Errorf("/proc/stat: no cpu lines")
	}
	return t, nil
}

func read() (times, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return times{}, err
	}
	defer f.Close()
	return parse(f)
}

// ownTicks is this process's CPU time in clock ticks (USER_HZ, 100 on
// Linux): its own work is not another's load.
func ownTicks() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	us := ru.Utime.Sec*1e6 + int64(ru.Utime.Usec) + ru.Stime.Sec*1e6 + int64(ru.Stime.Usec)
	return float64(us) / 1e4
}

// idleCores is the idle cores between two samples, counting this
// process's own CPU time (own ticks) as idle.
func idleCores(a, b times, own float64) float64 {
	dt := float64(b.total - a.total)
	if b.total <= a.total {
		return float64(b.cores)
	}
	idle := min(float64(b.idle-a.idle)+own, dt)
	return idle / dt * float64(b.cores)
}

// Sample measures the idle cores over d, leaving out this process's own
// load. It returns them and the cores there are.
func Sample(d time.Duration) (idle float64, cores int, err error) {
	a, err := read()
	if err != nil {
		return 0, 0, err
	}
	own := ownTicks()
	time.Sleep(d)
	b, err := read()
	if err != nil {
		return 0, 0, err
	}
	return idleCores(a, b, ownTicks()-own), b.cores, nil
}

// Warning is what to say when threads exceed the idle cores, or "".
// Half a core idle counts as one; one thread never warns.
func Warning(threads int, idle float64, cores int) string {
	if threads <= 1 || float64(threads) <= idle+0.5 {
		return ""
	}
	return fmt.Sprintf("--threads %d with about %.1f of the %d cores idle (others busy): the threads take turns with that work, and can run slower than --threads 1", threads, idle, cores)
}

// Result is a sample's idle cores of the cores there are; Err when none
// could be taken (no /proc/stat).
type Result struct {
	Idle  float64
	Cores int
	Err   error
}

// Busy says threads exceed the idle cores (half a core idle counts as
// one); never when nothing was measured.
func (r Result) Busy(threads int) bool {
	return r.Err == nil && Warning(threads, r.Idle, r.Cores) != ""
}

// Check samples the idle cores over d in the background (a program can
// read its input meanwhile: its own load is left out). One thread needs
// no sample.
func Check(threads int, d time.Duration) <-chan Result {
	c := make(chan Result, 1)
	if threads <= 1 {
		c <- Result{Err: fmt.Errorf("one thread: not sampled")}
		return c
	}
	go func() {
		idle, cores, err := Sample(d)
		c <- Result{idle, cores, err}
	}()
	return c
}
