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
	it.SoloSource, it.SoloIterationNs = solo.Source, solo.IterationNs
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
		t.rows = append(t.rows, []string{text(it.Job), ms(float64(it.IterationNs)), ms(float64(it.SoloIterationNs)),
			strconv.FormatFloat(it.Slowdown, 'f', 4, 64) + "x", text(it.SoloSource)})
	}
	if markdown {
		t.writeMarkdown(w)
	} else {
		t.writeText(w)
	}
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
}

// SlowdownTable is the slowdown table of a mix's iterations (source: the
// mix's trace), the jobs SetSolo compared, in the trace's order.
func SlowdownTable(source string, its []*Iteration) *DataTable {
	var rows []SlowdownRow
	for _, it := range its {
		if it.SoloIterationNs > 0 {
			rows = append(rows, SlowdownRow{it.Job, it.IterationNs, it.SoloIterationNs, it.Slowdown, it.SoloSource})
		}
	}
	return newDataTable(source, rows)
}
