package stats

import (
	"fmt"
	"io"
	"strconv"
)

// SetSolo compares the iteration with solo, the same job's iteration run
// alone on the fabric: Slowdown is this iteration over solo's (1: the
// other jobs cost it nothing).
func (it *Iteration) SetSolo(solo *Iteration) error {
	if solo.IterationNs <= 0 {
		return fmt.Errorf("%s: job %q has an empty iteration (0 ns): nothing to compare with", solo.Source, solo.Job)
	}
	it.SoloSource, it.SoloIterationNs, it.SoloPartial = solo.Source, solo.IterationNs, solo.Partial
	it.Slowdown = float64(it.IterationNs) / float64(solo.IterationNs)
	return nil
}

// SoloOf picks job's iteration among a solo trace's (source): the only
// one, or the one of that job.
func SoloOf(its []*Iteration, job, source string) (*Iteration, error) {
	if len(its) == 1 && (its[0].Job == "" || its[0].Job == job) {
		return its[0], nil
	}
	var jobs []string
	for _, it := range its {
		if it.Job == job {
			return it, nil
		}
		jobs = append(jobs, strconv.Quote(it.Job))
	}
	return nil, fmt.Errorf("%s: no iteration of job %q (it holds jobs %v)", source, job, jobs)
}

// WriteSlowdowns writes, for people, each job's iteration beside the
// others against its solo one (only the iterations SetSolo compared).
func WriteSlowdowns(w io.Writer, its []*Iteration, markdown bool) {
	t := &textTable{title: "Slowdown against solo (iteration in the mix / iteration alone)",
		head: []string{"job", "mix (ms)", "solo (ms)", "slowdown", "solo trace"}, align: "lrrrl"}
	for _, it := range its {
		if it.SoloIterationNs == 0 {
			continue
		}
		t.rows = append(t.rows, []string{text(it.Job), bound(it.Partial) + ms(float64(it.IterationNs)), bound(it.SoloPartial) + ms(float64(it.SoloIterationNs)),
			slowdownCell(it), text(it.SoloSource)})
		if it.Partial || it.SoloPartial {
			t.after = "PARTIAL: >= an iteration a run's stop cut (a lower bound); the slowdown then a bound (>= or <=), or unknown (?) when both were cut"
		}
	}
	if markdown {
		t.writeMarkdown(w)
	} else {
		t.writeText(w)
	}
}

// bound marks a figure of a partial run as a lower bound.
func bound(partial bool) string {
	if partial {
		return ">="
	}
	return ""
}

// slowdownCell is the slowdown of a mix's job over its solo run, as a
// bound when one of them was cut: a cut mix makes it at least, a cut solo
// at most, both nothing.
func slowdownCell(it *Iteration) string {
	x := strconv.FormatFloat(it.Slowdown, 'f', 4, 64) + "x"
	switch {
	case it.Partial && it.SoloPartial:
		return "?"
	case it.Partial:
		return ">=" + x
	case it.SoloPartial:
		return "<=" + x
	}
	return x
}

// TableSlowdown is the table of --solo for CSV and Parquet: one row per
// job compared with its solo run.
const TableSlowdown = "slowdown"

// SlowdownRow is a job's iteration in a mix against alone.
type SlowdownRow struct {
	Job             string  `json:"job"`
	IterationNs     int64   `json:"iteration_ns"`
	SoloIterationNs int64   `json:"solo_iteration_ns"`
	Slowdown        float64 `json:"slowdown"`
	SoloSource      string  `json:"solo_source"`
	// SoloPartial: the solo run stopped early (a column only with
	// fctstats --allow-partial, as PartialColumns).
	SoloPartial bool `json:"solo_partial"`
}

// SlowdownTable is the slowdown table of a mix's iterations (source: the
// mix's trace), the jobs SetSolo compared, in the trace's order; with
// partial, the column solo_partial too.
func SlowdownTable(source string, its []*Iteration, partial bool) *DataTable {
	var rows []SlowdownRow
	for _, it := range its {
		if it.SoloIterationNs > 0 {
			rows = append(rows, SlowdownRow{it.Job, it.IterationNs, it.SoloIterationNs, it.Slowdown, it.SoloSource, it.SoloPartial})
		}
	}
	dt := newDataTable(source, rows)
	if !partial {
		dt.Drop("solo_partial")
	}
	return dt
}
