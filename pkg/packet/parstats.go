package packet

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ParallelStats is what a partitioned run measured of its own ceiling.
// The counts (events per part and window) are the same on any machine and
// at any number of threads: the ideal speedup they give is what P threads
// on P idle cores could reach at best if synchronisation were free, since
// a window ends only when its busiest part has run its events.
type ParallelStats struct {
	Parts, Threads int
	Cut            string // how the parts were cut
	LookaheadPs    int64
	// Windows run, and the simulated time from the first one's start to
	// the last one's end (windows skip time in which nothing happens).
	Windows int
	SpanPs  int64
	// Events is every part's; MaxSum the sum over windows of the busiest
	// part's events, ThreadSum the sum over windows of the least any
	// schedule of Threads threads could take (the busiest part, or the
	// window's events over the threads if more).
	Events, MaxSum, ThreadSum uint64
	// Wider[i] is MaxSum over windows widerBy[i] times as long: the
	// windows taken widerBy[i] at a time, each group's busiest part's
	// events summed (widen). A lookahead that many times the links'
	// would run the same events in those longer windows.
	Wider [len(widerBy)]uint64
	// Taken[i] is the sum over windows of the events the busiest of
	// TakenBy[i] threads runs when they take the parts heaviest first (in
	// the window before, each by the first thread free): with more parts
	// than threads, a part that grows as another shrinks shares a
	// thread's window with a light one. The crew takes them so after each
	// thread's own part (crew.claim), which this does not model.
	TakenBy []int
	Taken   []uint64
	// TakenCPU is the same from the parts' CPU in the timed windows.
	TakenCPU []time.Duration
	// PartEvents is each part's events; Crossings the packets and PFC
	// frames that went from one part to another, Frames the PFC frames
	// of them, Pairs the packets that carried their queue pair's makings
	// (its first into a part).
	PartEvents []uint64
	Crossings  uint64
	Frames     uint64
	Pairs      uint64
	// Loop is the wall time of the windows; Wait the time threads spent
	// at the barrier (waiting for a window's other parts, or for the next
	// window), summed over threads.
	Loop, Wait time.Duration
	// Alone is the windows the caller ran every part of itself, having
	// waited too long for another thread (crew.run).
	Alone int
	// CPU time, from each thread's clock (0 where it is not read), in
	// the Timed windows that read it (one in timedEvery), which ran
	// TimedEvents: each part's; the sum over them of the busiest part's;
	// the caller's between them and the next window (the serial work).
	// Over the whole loop: the process's and the garbage collector's.
	PartCPU            []time.Duration
	CPUMaxSum, Between time.Duration
	Timed              int
	TimedEvents        uint64
	ProcessCPU, GCCPU  time.Duration
}

// scaled is d, the parts' CPU in the timed windows, scaled to all
// windows by their events (windows differ in length more than events
// differ in cost).
func (p *ParallelStats) scaled(d time.Duration) time.Duration {
	if p.TimedEvents == 0 {
		return 0
	}
	return time.Duration(float64(d) * float64(p.Events) / float64(p.TimedEvents))
}

// scaledWindows is d, the serial work after the timed windows, scaled to
// all windows by their number.
func (p *ParallelStats) scaledWindows(d time.Duration) time.Duration {
	if p.Timed == 0 {
		return 0
	}
	return time.Duration(float64(d) * float64(p.Windows) / float64(p.Timed))
}

// PartsCPU is the parts' CPU time summed (scaled from the timed windows).
// On short windows it reads high (the 128-GPU mixed run's 40 us ones:
// 7-30% above the process's own CPU, which all windows timed matched):
// the clock's system call slows the window it times. ProjectedCPU, a
// ratio of timed figures, does not depend on it.
func (p *ParallelStats) PartsCPU() time.Duration {
	var t time.Duration
	for _, c := range p.PartCPU {
		t += c
	}
	return p.scaled(t)
}

// ProjectedCPU is the speedup Parts idle cores could give over the parts
// run on one, from CPU clocks rather than event counts: the parts' CPU
// over the sum of each window's busiest part's, plus the serial work
// between windows and each thread's share of the garbage collector's.
// Spinning at barriers is left out (idle cores have nothing else to do).
// A projection, not a measured wall time: it holds if the cores do not
// slow each other down (shared caches, memory, or one physical core's two
// hyperthreads), which a loaded machine's clocks cannot tell.
func (p *ParallelStats) ProjectedCPU() float64 {
	if p.CPUMaxSum <= 0 {
		return 1
	}
	path := p.scaled(p.CPUMaxSum) + p.scaledWindows(p.Between) + p.GCCPU/time.Duration(max(p.Threads, 1))
	return float64(p.PartsCPU()) / float64(path)
}

// Ideal is the speedup of Parts threads over one if synchronisation were
// free: events over the sum of each window's busiest part.
func (p *ParallelStats) Ideal() float64 {
	if p.MaxSum == 0 {
		return 1
	}
	return float64(p.Events) / float64(p.MaxSum)
}

// IdealWider is the ideal speedup with windows widerBy[i] times as long.
func (p *ParallelStats) IdealWider(i int) float64 {
	if p.Wider[i] == 0 {
		return 1
	}
	return float64(p.Events) / float64(p.Wider[i])
}

// widerBy are the factors the summary widens windows by (IdealWider): how
// much a longer lookahead could raise the ceiling. On the 1024-GPU DP
// AllReduce at 8 parts, hardly (7.08 at 1x, 7.10 at 16x): its parts'
// shares drift over hundreds of windows as the rails fall out of step,
// which no window length evens out.
var widerBy = [...]int{2, 4, 16}

// widener groups consecutive windows' events per part for Wider.
type widener struct {
	acc [len(widerBy)][]uint64
	n   int // windows added
}

func newWidener(parts int) *widener {
	w := &widener{}
	for i := range w.acc {
		w.acc[i] = make([]uint64, parts)
	}
	return w
}

// add counts one window's events per part into p.Wider, closing each
// group that it completes.
func (w *widener) add(p *ParallelStats, events []uint64) {
	w.n++
	for i, g := range widerBy {
		acc := w.acc[i]
		for k, e := range events {
			acc[k] += e
		}
		if w.n%g == 0 {
			p.Wider[i] += slices.Max(acc)
			clear(acc)
		}
	}
}

// close counts the last, partial groups.
func (w *widener) close(p *ParallelStats) {
	for i, g := range widerBy {
		if w.n%g != 0 {
			p.Wider[i] += slices.Max(w.acc[i])
			clear(w.acc[i])
		}
	}
	w.n = 0
}

// IdealTaken is the ideal speedup of TakenBy[i] threads taking the parts
// heaviest first (Taken).
func (p *ParallelStats) IdealTaken(i int) float64 {
	if p.Taken[i] == 0 {
		return 1
	}
	return float64(p.Events) / float64(p.Taken[i])
}

// takenBy is the thread counts the summary schedules the parts on: the
// powers of two below the parts.
func takenBy(parts int) []int {
	var ts []int
	for t := 2; t < parts; t *= 2 {
		ts = append(ts, t)
	}
	return ts
}

// takeOrder sorts the parts by their events in the last window, heaviest
// first (ties: the lower part), the order the crew's threads take them in
// the next window once each has taken its own (crew.claim; with as many
// parts as threads the order is not used): a part's load changes slowly from one window to the
// next, so this is nearly the longest-first schedule. On the 1024-GPU DP
// AllReduce's 16 parts (in part order: 7.20 on 8 threads), 7.74.
func takeOrder(order []int32, events []uint64) {
	slices.SortFunc(order, func(a, b int32) int {
		return cmp.Or(cmp.Compare(events[b], events[a]), cmp.Compare(a, b))
	})
}

// take adds to p.Taken the window whose events per part are events, the
// parts taken in order by each count of threads.
func (p *ParallelStats) take(order []int32, events []uint64, free []uint64) {
	for i, t := range p.TakenBy {
		p.Taken[i] += schedule(order, events, free[:t])
	}
}

// takeCPU adds to p.TakenCPU a timed window whose CPU per part (ns) is
// cpu, as take does.
func (p *ParallelStats) takeCPU(order []int32, cpu []uint64, free []uint64) {
	for i, t := range p.TakenBy {
		p.TakenCPU[i] += time.Duration(schedule(order, cpu, free[:t]))
	}
}

// schedule is the time the busiest of len(busy) threads takes when they
// take the parts in order, each by the first thread free, part k costing
// cost[k].
func schedule(order []int32, cost []uint64, busy []uint64) uint64 {
	clear(busy)
	for _, k := range order {
		j := 0
		for x := 1; x < len(busy); x++ {
			if busy[x] < busy[j] {
				j = x
			}
		}
		busy[j] += cost[k]
	}
	return slices.Max(busy)
}

// ProjectedTaken is ProjectedCPU for TakenBy[i] threads taking the parts
// (heaviest first).
func (p *ParallelStats) ProjectedTaken(i int) float64 {
	t := p.TakenBy[i]
	if p.TakenCPU[i] <= 0 {
		return 1
	}
	path := p.scaled(p.TakenCPU[i]) + p.scaledWindows(p.Between) + p.GCCPU/time.Duration(t)
	return float64(p.PartsCPU()) / float64(path)
}

// IdealThreads is the same bound with Threads threads taking the parts.
func (p *ParallelStats) IdealThreads() float64 {
	if p.ThreadSum == 0 {
		return 1
	}
	return float64(p.Events) / float64(p.ThreadSum)
}

// WaitShare is the share of the threads' time spent at barriers.
func (p *ParallelStats) WaitShare() float64 {
	if p.Loop <= 0 || p.Threads < 2 {
		return 0
	}
	return float64(p.Wait) / (float64(p.Loop) * float64(p.Threads))
}

// Summary is the one block flowsim-packet prints on stderr.
func (p *ParallelStats) Summary() string {
	mean := 0.0
	if p.Windows > 0 {
		mean = float64(p.Events) / float64(p.Windows)
	}
	var minE, maxE uint64
	for i, e := range p.PartEvents {
		if i == 0 || e < minE {
			minE = e
		}
		maxE = max(maxE, e)
	}
	full := 0.0
	if p.SpanPs > 0 {
		full = float64(p.Windows) * float64(p.LookaheadPs) / float64(p.SpanPs)
	}
	var wider []string
	for i, g := range widerBy {
		wider = append(wider, fmt.Sprintf("%dx %.2f", g, p.IdealWider(i)))
	}
	taken := ""
	if len(p.TakenBy) > 0 {
		var ts []string
		for i, t := range p.TakenBy {
			x := fmt.Sprintf("%d threads %.2f", t, p.IdealTaken(i))
			if p.PartsCPU() > 0 {
				x += fmt.Sprintf(" (projected from CPU %.2f)", p.ProjectedTaken(i))
			}
			ts = append(ts, x)
		}
		taken = fmt.Sprintf("parallel: the parts taken heaviest first by fewer threads, ideal speedup at %s\n", strings.Join(ts, ", "))
	}
	return fmt.Sprintf("parallel: %d parts (%s) on %d threads, lookahead %.0f ns: ideal speedup %.2f (at %d threads %.2f; windows longer by %s)\n"+
		"parallel: %d windows (barriers), %.0f events a window on mean; windows cover %.0f%% of the event loop's %.3f us (first window to last, which runs on past the last flow's end, the run's simulated time, while a timer is pending); parts' events %d to %d (%.2f max/mean); %d crossings (%.3f an event; %d PFC frames, %d packets with their queue pair's makings)\n"+
		"parallel: loop %.3f s, barrier wait %.1f%% of the threads' time; %d windows run by one thread alone\n",
		p.Parts, p.Cut, p.Threads, float64(p.LookaheadPs)/1e3, p.Ideal(), p.Threads, p.IdealThreads(), strings.Join(wider, ", "),
		p.Windows, mean, 100*full, float64(p.SpanPs)/1e6, minE, maxE, float64(maxE)*float64(p.Parts)/float64(max(p.Events, 1)), p.Crossings, float64(p.Crossings)/float64(max(p.Events, 1)), p.Frames, p.Pairs,
		p.Loop.Seconds(), 100*p.WaitShare(), p.Alone) + taken + p.cpuLine()
}

// cpuLine is the summary's CPU figures (none where threads' clocks are
// not read).
func (p *ParallelStats) cpuLine() string {
	parts := p.PartsCPU()
	if parts <= 0 {
		return ""
	}
	var lo, hi time.Duration
	for i, c := range p.PartCPU {
		if i == 0 || c < lo {
			lo = c
		}
		hi = max(hi, c)
	}
	between := p.scaledWindows(p.Between)
	rest := max(p.ProcessCPU-parts-between-p.GCCPU, 0)
	return fmt.Sprintf("parallel: CPU %.2f s: parts %.2f s (%.2f to %.2f), between windows %.2f s, garbage collector %.2f s, barriers and the rest %.2f s; the busiest part a window summed %.2f s: projected speedup on idle cores %.2f over the parts on one thread (clocks read in 1 window of %d)\n",
		p.ProcessCPU.Seconds(), parts.Seconds(), p.scaled(lo).Seconds(), p.scaled(hi).Seconds(), between.Seconds(), p.GCCPU.Seconds(), rest.Seconds(), p.scaled(p.CPUMaxSum).Seconds(), p.ProjectedCPU(), timedEvery)
}

// gcCPU is the garbage collector's CPU time so far (s), as the runtime
// estimates it.
func gcCPU() float64 {
	m := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(m)
	if m[0].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return m[0].Value.Float64()
}

// windowLog writes one CSV line a window: its number, start and end
// (ps), each part's events and the caller's wait at its barrier (ns).
type windowLog struct {
	w   *bufio.Writer
	buf []byte
	err error
}

func newWindowLog(w io.Writer, parts int) *windowLog {
	l := &windowLog{w: bufio.NewWriterSize(w, 1<<16)}
	l.buf = append(l.buf, "window,start_ps,end_ps"...)
	for k := range parts {
		l.buf = append(l.buf, ",part"...)
		l.buf = strconv.AppendInt(l.buf, int64(k), 10)
	}
	l.buf = append(l.buf, ",max,wait_ns\n"...)
	l.flushLine()
	return l
}

func (l *windowLog) line(w int, start, end int64, events []uint64, most uint64, wait time.Duration) {
	l.buf = strconv.AppendInt(l.buf[:0], int64(w), 10)
	for _, v := range []int64{start, end} {
		l.buf = append(l.buf, ',')
		l.buf = strconv.AppendInt(l.buf, v, 10)
	}
	for _, e := range events {
		l.buf = append(l.buf, ',')
		l.buf = strconv.AppendUint(l.buf, e, 10)
	}
	l.buf = append(l.buf, ',')
	l.buf = strconv.AppendUint(l.buf, most, 10)
	l.buf = append(l.buf, ',')
	l.buf = strconv.AppendInt(l.buf, int64(wait), 10)
	l.buf = append(l.buf, '\n')
	l.flushLine()
}

func (l *windowLog) flushLine() {
	if l.err == nil {
		_, l.err = l.w.Write(l.buf)
	}
}

func (l *windowLog) close() error {
	if l.err == nil {
		l.err = l.w.Flush()
	}
	return l.err
}
