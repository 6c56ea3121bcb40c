// Package progress draws a long run's progress on a terminal's stderr:
// what a program knows of where it is (flows done of total, simulated
// time, events/s, rows read) with a progress bar and an ETA, or a spinner
// with counts when the total is unknown. It draws nothing for the first
// two seconds (a quick run stays silent), nothing when stderr is not a
// terminal (pipes and logs get no escape sequences) and nothing under
// --quiet. Programs report through a *Meter; a nil *Meter is off and every
// method on it returns at once, so callers need no checks of their own.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Delay is how long a run goes before progress is drawn.
const Delay = 2 * time.Second

// Quiet is the --quiet flag every program embeds.
type Quiet struct {
	Quiet bool `help:"Draw no progress on stderr (drawn only when stderr is a terminal and the run takes over 2 s); summary lines and warnings stay."`
}

// Env asks for progress where stderr is not a terminal (a log file, a
// test): FABRICSIM_PROGRESS=2s draws after that delay (0s: at once).
// --quiet still wins.
const Env = "FABRICSIM_PROGRESS"

// Meter returns the meter for program name: on when stderr is a terminal
// or Env asks for it, and --quiet is not given; else nil (off).
func (q Quiet) Meter(name string) *Meter {
	if q.Quiet {
		return nil
	}
	if v, ok := os.LookupEnv(Env); ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			fmt.Fprintf(os.Stderr, "%s: warning: environment %s=%q is not a delay such as 2s or 0s: no progress drawn\n", name, Env, v)
			return nil
		}
		return Start(os.Stderr, name, d)
	}
	if !term.IsTerminal(int(os.Stderr.Fd())) {
		return nil
	}
	return Start(os.Stderr, name, Delay)
}

// Meter is one run's progress. Its methods may be called from any one
// goroutine; the first drawing happens on a timer's.
type Meter struct {
	mu       sync.Mutex
	w        io.Writer
	name     string
	throttle time.Duration
	timer    *time.Timer
	drawing  bool // the delay has passed
	stopped  bool
	bar      *progressbar.ProgressBar
	barTotal int64     // the total bar was made for (-1: a spinner)
	barCount bool      // the bar shows a count (a Phase's spinner does not)
	last     time.Time // of the last drawing

	unit        string
	done, total int64
	detail      string
}

// Start returns a meter that draws on w once delay has passed (at once
// when delay is 0). Stop it before writing to w.
func Start(w io.Writer, name string, delay time.Duration) *Meter {
	m := &Meter{w: w, name: name, throttle: 200 * time.Millisecond, unit: "flows"}
	if delay <= 0 {
		m.drawing = true
		return m
	}
	m.timer = time.AfterFunc(delay, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if !m.stopped {
			m.drawing = true
			m.draw()
		}
	})
	return m
}

// Unit names what done and total count ("flows", "rows").
func (m *Meter) Unit(unit string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.unit = unit
	m.mu.Unlock()
}

// Set reports done of total (total <= 0, stored as -1: unknown, drawn as a spinner with
// the count) and a detail such as "simulated 1.2ms".
func (m *Meter) Set(done, total int64, detail string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if total <= 0 {
		total = -1
	}
	m.done, m.total, m.detail = done, total, detail
	// A new stage (its total changed) is drawn at once, its updates at
	// most every throttle.
	if m.drawing && !m.stopped && (m.bar == nil || m.barTotal != total || m.barCount != m.counting() || time.Since(m.last) >= m.throttle) {
		m.draw()
	}
}

// Phase reports a stage with nothing to count yet, e.g. "reading x.stream".
func (m *Meter) Phase(detail string) { m.Set(0, 0, detail) }

// Stop erases what was drawn and draws no more; w is free for the
// program's own lines after it.
func (m *Meter) Stop() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.timer != nil {
		m.timer.Stop()
	}
	m.stopped = true
	m.end()
}

// Hide erases what is drawn, for a line of the program's own (a
// warning); the next report draws again.
func (m *Meter) Hide() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.end()
}

// end finishes the bar, which erases it (OptionClearOnFinish) and ends a
// spinner's ticking goroutine.
func (m *Meter) end() {
	if m.bar != nil {
		_ = m.bar.Finish()
		m.bar = nil
	}
}

// draw brings the bar up to date, making a new one when the total
// changes (a known total's bar and an unknown total's spinner differ).
// The meter throttles, not the bar: the bar's own throttle would drop
// the count drawn right after a new description.
func (m *Meter) draw() {
	m.last = time.Now()
	total, count := m.total, m.counting()
	if m.bar != nil && (m.barTotal != total || m.barCount != count) {
		m.end()
	}
	desc := m.name + ":"
	if m.detail != "" {
		desc += " " + m.detail
	}
	if m.bar == nil {
		m.barTotal, m.barCount = total, count
		opts := []progressbar.Option{
			progressbar.OptionSetWriter(m.w),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionSetItsString(m.unit),
			progressbar.OptionSetWidth(20),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionUseANSICodes(true),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionSpinnerType(14),
			// Drawn at once: a phase's spinner has no count to set.
			progressbar.OptionSetRenderBlankState(true),
		}
		if count {
			opts = append(opts, progressbar.OptionShowCount())
		}
		m.bar = progressbar.NewOptions64(total, opts...)
	} else {
		m.bar.Describe(desc)
	}
	done := m.done
	if total > 0 {
		// The bar refuses a count past its total; one more flow than
		// announced must not stop the drawing.
		done = min(done, total-1)
	}
	_ = m.bar.Set64(done)
}

// counting is whether there is a count to show: not in a Phase.
func (m *Meter) counting() bool { return m.total > 0 || m.done > 0 }

// Flows is the detail of a simulator: simulated time reached and, when
// counted (events > 0), events per second of wall time since start.
func Flows(now fmt.Stringer, events uint64, start time.Time) string {
	if events == 0 {
		return "simulated " + now.String()
	}
	rate := float64(events) / max(time.Since(start).Seconds(), 1e-3)
	return fmt.Sprintf("simulated %s, %.1f Mevents/s", now, rate/1e6)
}
