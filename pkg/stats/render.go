package stats

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/pkg/units"
)

// textTable is a table for people; align has an 'l' (text) or 'r'
// (number) per column.
type textTable struct {
	title string
	head  []string
	align string
	rows  [][]string
	after string // a note printed under the table
}

func (t *textTable) writeText(w io.Writer) {
	width := make([]int, len(t.head))
	for i, h := range t.head {
		width[i] = len(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	fmt.Fprintln(w, t.title)
	line := func(cells []string) {
		var b strings.Builder
		for i, c := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if t.align[i] == 'l' {
				b.WriteString(c)
				if i < len(cells)-1 {
					b.WriteString(pad)
				}
			} else {
				b.WriteString(pad + c)
			}
		}
		fmt.Fprintln(w, "  "+b.String())
	}
	line(t.head)
	for _, r := range t.rows {
		line(r)
	}
	if t.after != "" {
		fmt.Fprintln(w, "  "+t.after)
	}
	fmt.Fprintln(w)
}

func (t *textTable) writeMarkdown(w io.Writer) {
	fmt.Fprintf(w, "### %s\n\n", t.title)
	fmt.Fprintf(w, "| %s |\n|", strings.Join(t.head, " | "))
	for i := range t.head {
		if t.align[i] == 'l' {
			fmt.Fprint(w, " --- |")
		} else {
			fmt.Fprint(w, " ---: |")
		}
	}
	fmt.Fprintln(w)
	for _, r := range t.rows {
		esc := make([]string, len(r))
		for i, c := range r {
			esc[i] = mdEscape(c)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(esc, " | "))
	}
	if t.after != "" {
		fmt.Fprintf(w, "\n%s\n", t.after)
	}
	fmt.Fprintln(w)
}

// Human number formats: times in µs to the nanosecond, bandwidths to
// 10 MB/s, ratios and slowdowns to three decimals; "-" for no value.
func us(ns int64) string                         { return strconv.FormatFloat(float64(ns)/1e3, 'f', 3, 64) }
func usf(ns Num) string                          { return numf(ns/1e3, 3) }
func gbps(v Num) string                          { return numf(v, 2) }
func factor(v Num) string                        { return numf(v, 3) }
func text(s string) string                       { return cmpStr(s, "-") }
func count[T ~int | ~int64 | ~int32](n T) string { return strconv.FormatInt(int64(n), 10) }

func numf(v Num, prec int) string {
	if !v.Valid() {
		return "-"
	}
	s := strconv.FormatFloat(float64(v), 'f', prec, 64)
	if strings.Trim(s, "-0.") == "" {
		return strings.TrimPrefix(s, "-") // a tiny negative is not "-0.000"
	}
	return s
}

// minMax is a summary's min or max time, "-" when every one failed.
func minMax(s Summary, ns int64) string {
	if s.Count == 0 {
		return "-"
	}
	return us(ns)
}

// keyCells are the op, size, group, algo and ranks columns of a
// collective's row.
func keyCells(k CollKey) []string {
	return []string{text(k.Op), units.HumanSize(k.SizeBytes), text(k.GroupType), text(k.Algorithm), count(k.NRanks)}
}

func cmpStr(s, empty string) string {
	if s == "" {
		return empty
	}
	return s
}

// Tables of a run, for people.
func (run *Run) tables(maxRows int) []*textTable {
	var out []*textTable
	if len(run.Summary) > 0 {
		t := &textTable{
			title: "Collectives, identical ones together (algbw = size / mean time, busbw = algbw x nccl-tests factor, 1 GB = 1e9 B)",
			head:  []string{"op", "size", "group", "algo", "ranks", "count", "mean us", "min us", "max us", "algbw GB/s", "busbw GB/s"},
			align: "llllrrrrrrr",
		}
		for _, s := range run.Summary {
			t.rows = append(t.rows, append(keyCells(s.CollKey),
				count(s.Count), usf(s.TimeMeanNs), minMax(s, s.TimeMinNs), minMax(s, s.TimeMaxNs), gbps(s.AlgbwGBps), gbps(s.BusbwGBps)))
		}
		var after []string
		if n := run.Totals.FailedCollectives; n > 0 {
			after = append(after, fmt.Sprintf("FAILED: %d collectives had flows a failed link cut off (status failed); they are not counted or timed here", n))
		}
		if n := run.Totals.CutCollectives; n > 0 {
			after = append(after, fmt.Sprintf("CUT: %s cut by the run's stop (status cut) not counted or timed here", units.Plural(int64(n), "collective")))
		}
		t.after = strings.Join(after, "\n  ")
		out = append(out, t)
		t = &textTable{
			title: "Each collective (time = last end - first start of its rows)",
			head:  []string{"id", "op", "size", "group", "algo", "ranks", "flows", "start us", "time us", "algbw GB/s", "busbw GB/s"},
			align: "rllllrrrrrr",
		}
		for i, c := range run.Collectives {
			if maxRows > 0 && i == maxRows {
				t.after = fmt.Sprintf("... %d more collectives (--max-rows 0 lists all; --format csv gives every one)", len(run.Collectives)-maxRows)
				break
			}
			time := us(c.TimeNs)
			switch c.Status {
			case trace.StatusFailed:
				time = fmt.Sprintf("FAILED (%d flows)", c.FailedFlows)
			case StatusCut:
				time = fmt.Sprintf(">=%s CUT (%d flows unfinished)", time, c.CutFlows)
			}
			t.rows = append(t.rows, append(append([]string{count(c.ID)}, keyCells(c.CollKey)...),
				count(c.Flows), us(c.StartNs), time, gbps(c.AlgbwGBps), gbps(c.BusbwGBps)))
		}
		out = append(out, t)
	}
	t := &textTable{
		title: "Flows by size and connection type: FCT in us, slowdown = fct / ideal fct (delay nodes excluded; nearest-rank percentiles)",
		head:  []string{"size", "conn", "flows", "fct p50", "p95", "p99", "max", "slowdown p50", "p95", "p99", "max"},
		align: "llrrrrrrrrr",
	}
	for _, f := range append(run.Flows[:len(run.Flows):len(run.Flows)], run.AllFlows) {
		t.rows = append(t.rows, []string{f.Bucket, text(f.ConnType), count(f.Flows),
			us(f.FctP50Ns), us(f.FctP95Ns), us(f.FctP99Ns), us(f.FctMaxNs),
			factor(f.SlowdownP50), factor(f.SlowdownP95), factor(f.SlowdownP99), factor(f.SlowdownMax)})
	}
	out = append(out, t)
	return out
}

// headline is the one-line description of a run.
func (run *Run) headline() string {
	tot := run.Totals
	var b strings.Builder
	if run.Partial {
		fmt.Fprintf(&b, "PARTIAL (the run stopped early; %d flows never finished and are not in these figures%s) ", run.UnfinishedFlows, run.cutSaid())
	}
	if run.Approximate != "" {
		fmt.Fprintf(&b, "APPROXIMATE (%s) ", run.Approximate)
	}
	b.WriteString(run.Source + ": ")
	if run.Input == string(KindSimAIFCT) {
		b.WriteString("SimAI fct.txt")
	} else {
		fmt.Fprintf(&b, "%s trace (%s)", run.Backend, run.Input)
		if t := run.Topology; t != nil && t.Family != "" {
			fmt.Fprintf(&b, " of %s, %d GPUs", t.Family, t.GPUs)
		}
	}
	fmt.Fprintf(&b, ": %d rows = %d flows + %d delay nodes, %s, %s, makespan %s",
		tot.Rows, tot.Flows, tot.DelayRows, units.HumanSize(tot.SumSizeBytes), units.Plural(int64(tot.Collectives), "collective"), units.HumanDuration(tot.MakespanNs*1000))
	if run.Input == string(KindSimAIFCT) {
		b.WriteString(" (fct.txt has no collective ids)")
	}
	for i, j := range run.Jobs {
		sep := ", "
		if i == 0 {
			sep = "; per job (makespan from its start): "
		}
		if j.Rows == 0 {
			fmt.Fprintf(&b, "%s%s: never started (CUT: its %d flows never finished)", sep, j.Job, j.CutFlows)
			continue
		}
		fmt.Fprintf(&b, "%s%s %s%s from %s", sep, j.Job, bound(j.CutFlows > 0), units.HumanDuration(j.MakespanNs*1000), units.HumanDuration(j.StartNs*1000))
		if j.CutFlows > 0 {
			fmt.Fprintf(&b, " (CUT: %d of its flows never finished)", j.CutFlows)
		}
	}
	if tot.FailedFlows > 0 {
		fmt.Fprintf(&b, "; FAILED: %d flows were not delivered (status failed), %d collectives did not complete", tot.FailedFlows, tot.FailedCollectives)
	}
	return b.String()
}

// cutSaid says, after "; ", which collectives a partial run's stop cut;
// nothing for an input with no collectives to say it of (fct.txt, raw
// flows).
func (run *Run) cutSaid() string {
	switch {
	case run.CutUnknown:
		return "; the trace does not say which collectives the stop cut (written before fabricsim.cut): any collective's time may be a lower bound"
	case run.cut == nil:
		return ""
	}
	failed := ""
	if n := run.cutFailed(); n > 0 {
		// Status failed wins (it never completed, stop or not), yet the
		// headline must agree with fabricsim.cut.
		failed = fmt.Sprintf(" (and %s cut that a failed link had cut off too, reported FAILED)", units.Plural(n, "collective"))
	}
	return fmt.Sprintf("; %s cut, marked CUT, their times lower bounds%s; %s never started",
		units.Plural(int64(run.Totals.CutCollectives), "collective"), failed, units.Plural(run.Totals.NotStartedCollectives, "collective"))
}

// cutFailed counts the collectives the stop cut that also failed.
func (run *Run) cutFailed() int64 {
	var n int64
	for _, c := range run.Collectives {
		if c.Status == trace.StatusFailed && c.CutFlows > 0 {
			n++
		}
	}
	return n
}

// writeNotes writes the trace's notes (what the stream's producers left
// out), one line each after prefix; Markdown gets a blank line after.
func writeNotes(w io.Writer, notes []string, prefix string) {
	for _, n := range notes {
		if prefix == "> " {
			n = mdEscape(n)
		}
		fmt.Fprintf(w, "%sNOTE (from the stream): %s\n", prefix, n)
	}
	if len(notes) > 0 && prefix == "> " {
		fmt.Fprintln(w)
	}
}

// WriteText writes the run's report for a terminal; maxRows bounds the
// per-collective listing (0: all).
func (run *Run) WriteText(w io.Writer, maxRows int) {
	fmt.Fprintln(w, run.headline())
	writeNotes(w, run.Notes, "")
	fmt.Fprintln(w)
	for _, t := range run.tables(maxRows) {
		t.writeText(w)
	}
}

// WriteMarkdown writes the report as GitHub-flavoured Markdown.
func (run *Run) WriteMarkdown(w io.Writer, maxRows int) {
	fmt.Fprintf(w, "## %s\n\n", mdEscape(run.headline()))
	writeNotes(w, run.Notes, "> ")
	for _, t := range run.tables(maxRows) {
		t.writeMarkdown(w)
	}
}

func (c *Comparison) tables(maxRows int) []*textTable {
	var out []*textTable
	if len(c.Summary) > 0 {
		t := &textTable{
			title: "Collectives, identical ones together: mean completion time",
			head:  []string{"op", "size", "group", "algo", "ranks", "count", "A us", "B us", "B / A"},
			align: "llllrrrrr",
		}
		for _, s := range c.Summary {
			t.rows = append(t.rows, append(keyCells(s.CollKey),
				count(s.Count), usf(s.TimeMeanANs), usf(s.TimeMeanBNs), factor(s.Ratio)))
		}
		out = append(out, t)
		t = &textTable{
			title: "Each collective: completion time",
			head:  []string{"id", "op", "size", "group", "algo", "ranks", "A us", "B us", "B / A"},
			align: "rllllrrrr",
		}
		for i, r := range c.Collectives {
			if maxRows > 0 && i == maxRows {
				t.after = fmt.Sprintf("... %d more collectives (--max-rows 0 lists all; --format csv gives every one)", len(c.Collectives)-maxRows)
				break
			}
			ratio := factor(r.Ratio)
			if r.Status != "ok" {
				ratio = strings.ToUpper(r.Status)
			}
			t.rows = append(t.rows, append(append([]string{count(r.ID)}, keyCells(r.CollKey)...),
				us(r.TimeANs), us(r.TimeBNs), ratio))
		}
		out = append(out, t)
	}
	return out
}

func (c *Comparison) headlines() []string {
	var l []string
	if c.UnfinishedFlowsA+c.UnfinishedFlowsB > 0 {
		l = append(l, fmt.Sprintf("PARTIAL: a run stopped early; flows that never finished: %d in A, %d in B (not in these figures)", c.UnfinishedFlowsA, c.UnfinishedFlowsB))
	}
	l = append(l,
		fmt.Sprintf("A = %s, B = %s; ratios are B / A (above 1: B slower)", c.A, c.B),
		fmt.Sprintf("makespan: A %s, B %s, B / A %s", units.HumanDuration(c.MakespanANs*1000), units.HumanDuration(c.MakespanBNs*1000), factor(c.MakespanRatio)),
		fmt.Sprintf("flow latencies: %d of %d (A) and %d (B) flows matched by %s (%d only in A, %d only in B): MSE %s us^2, RMSE %s us, mean error %s us, max |error| %s us",
			c.Matched, c.FlowsA, c.FlowsB, c.MatchedBy, c.OnlyA, c.OnlyB, numf(c.MSEus2, 3), numf(c.RMSEus, 3), numf(c.MeanErrUs, 3), us(c.MaxAbsErrNs)),
		fmt.Sprintf("latency curves (mean latency of the flows ending in each %s us): %d bins in both runs (%d only in A, %d only in B): MSE %s us^2, mean error %s us",
			us(c.CurveBinNs), c.CurveBins, c.CurveOnlyA, c.CurveOnlyB, numf(c.CurveMSEus2, 3), numf(c.CurveMeanErrUs, 3)))
	failed, cut := 0, 0
	for _, r := range c.Collectives {
		if strings.Contains(r.Status, trace.StatusFailed) {
			failed++
		}
		if strings.Contains(r.Status, StatusCut) {
			cut++
		}
	}
	if failed > 0 {
		l = append(l, fmt.Sprintf("FAILED: %d collectives had flows a failed link cut off in A or B: no ratio, left out of the means", failed))
	}
	if cut > 0 {
		l = append(l, fmt.Sprintf("CUT: %d collectives were cut by the stop of a partial run, A or B: no ratio, left out of the means", cut))
	}
	if c.CollectivesOnlyA+c.CollectivesOnlyB > 0 {
		l = append(l, fmt.Sprintf("collectives: %d only in A, %d only in B", c.CollectivesOnlyA, c.CollectivesOnlyB))
	}
	if len(c.Collectives) == 0 {
		l = append(l, "no collective in both runs (a SimAI fct.txt has no collective ids)")
	}
	return l
}

// WriteText writes the comparison for a terminal.
func (c *Comparison) WriteText(w io.Writer, maxRows int) {
	for _, l := range c.headlines() {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w)
	for _, t := range c.tables(maxRows) {
		t.writeText(w)
	}
}

// WriteMarkdown writes the comparison as Markdown.
func (c *Comparison) WriteMarkdown(w io.Writer, maxRows int) {
	fmt.Fprintf(w, "## Comparison\n\n")
	for _, l := range c.headlines() {
		fmt.Fprintf(w, "- %s\n", mdEscape(l))
	}
	fmt.Fprintln(w)
	for _, t := range c.tables(maxRows) {
		t.writeMarkdown(w)
	}
}

// mdEscape keeps text literal in Markdown: "|" would end a table cell and
// "<stdin>" would vanish as an HTML tag.
var mdEscape = strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace
