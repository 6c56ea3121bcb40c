package stats

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/formats/simaie2e"
	"github.com/fabricsim/fabricsim/pkg/units"
)

// Tables of the iteration report for CSV and Parquet.
const (
	TableIteration = "iteration" // one row per rank
	TableLayers    = "layers"    // one row per layer of the critical rank
)

// DataTable returns the iteration's per-rank or per-layer table.
func (it *Iteration) DataTable(name string) (*DataTable, error) {
	switch name {
	case TableIteration:
		return newDataTable(it.Source, it.Ranks), nil
	case TableLayers:
		return newDataTable(it.Source, it.Layers), nil
	}
	return nil, fmt.Errorf("the iteration report has the tables %s and %s, not %q", TableIteration, TableLayers, name)
}

func ms(ns float64) string { return strconv.FormatFloat(ns/1e6, 'f', 3, 64) }

func share(ns, of float64) string {
	if of <= 0 {
		return "-"
	}
	return strconv.FormatFloat(100*ns/of, 'f', 2, 64) + "%"
}

// breakdownRows are the summary lines: category, critical rank, share,
// mean over ranks, share.
func (it *Iteration) breakdownRows() [][]string {
	c, m := &it.Critical, &it.Mean
	total := float64(it.IterationNs)
	row := func(name string, crit int64, mean Num) []string {
		return []string{name, ms(float64(crit)), share(float64(crit), total), ms(float64(mean)), share(float64(mean), total)}
	}
	rows := [][]string{row("compute", c.ComputeNs, m.ComputeNs)}
	ce, me := c.Exposed(), [6]Num{m.ExposedDPNs, m.ExposedDPEPNs, m.ExposedTPNs, m.ExposedEPNs, m.ExposedPPNs, m.ExposedOtherNs}
	for i, t := range ExposedTypes {
		rows = append(rows, row("exposed "+t, ce[i], me[i]))
	}
	if ce[otherType] > 0 || me[otherType] > 0 {
		rows = append(rows, row("exposed other", ce[otherType], me[otherType]))
	}
	rows = append(rows, row("exposed (all)", c.ExposedNs, m.ExposedNs), row("bubble", c.BubbleNs, m.BubbleNs),
		row("iteration", it.IterationNs, Num(it.IterationNs)))
	return rows
}

func (it *Iteration) tables() []*textTable {
	stage := ""
	if it.Critical.Stage >= 0 {
		stage = fmt.Sprintf(", stage %d", it.Critical.Stage)
	}
	ranks := units.Plural(int64(len(it.Ranks)), "rank")
	if it.PerStage {
		ranks += " (each standing for its pipeline stage: collective granularity)"
	}
	solo := ""
	if it.SoloIterationNs > 0 {
		// A bound when either run was cut, as in the slowdown table.
		solo = fmt.Sprintf("; %s its solo iteration (%s%s in %s)", slowdownCell(it),
			bound(it.SoloPartial), units.HumanDuration(it.SoloIterationNs*1000), it.SoloSource)
	}
	sum := &textTable{
		title: fmt.Sprintf("Iteration: %s%s over %s; critical rank %d%s (most compute + exposed communication)%s",
			bound(it.Partial), units.HumanDuration(it.IterationNs*1000), ranks, it.CriticalRank, stage, solo),
		head:  []string{"", "critical (ms)", "share", "mean (ms)", "share"},
		align: "lrrrr",
		rows:  it.breakdownRows(),
		after: "exposed: the rank idle (no compute) while a collective it takes part in is in flight; bubble: idle with none in flight",
	}
	lay := &textTable{
		title: fmt.Sprintf("Layers on rank %d, summed over microbatches (ms; busbw GB/s%s)", it.CriticalRank, cutNote(it.Partial)),
		head: []string{"layer", "name", "fwd comp", "ig comp", "wg comp", "fwd exp", "ig exp", "wg exp",
			"fwd comm", "fwd busbw", "ig comm", "ig busbw", "wg comm", "wg busbw"},
		align: "rlrrrrrrrrrrrr",
	}
	for _, l := range it.Layers {
		lay.rows = append(lay.rows, []string{count(l.Layer), text(l.Name), ms(float64(l.FwdComputeNs)), ms(float64(l.IgComputeNs)),
			ms(float64(l.WgComputeNs)), ms(float64(l.FwdExposedNs)), ms(float64(l.IgExposedNs)), ms(float64(l.WgExposedNs)),
			ms(float64(l.FwdCommNs)), gbps(l.FwdBusbw), ms(float64(l.IgCommNs)), gbps(l.IgBusbw), ms(float64(l.WgCommNs)), gbps(l.WgBusbw)})
	}
	return []*textTable{sum, lay}
}

// cutNote says, in a partial report, why some bandwidths are missing.
func cutNote(partial bool) string {
	if partial {
		return "; - where a collective of the phase was cut by the stop"
	}
	return ""
}

func (it *Iteration) headline() string {
	h := "Iteration report of " + it.Source
	if it.Partial {
		h = fmt.Sprintf("PARTIAL (the run stopped early; %d flows never finished and are not in these figures) ", it.UnfinishedFlows) + h
	}
	if it.Backend != "" {
		h += " (" + it.Backend + ")"
	}
	if it.Approximate != "" {
		h = "APPROXIMATE (" + it.Approximate + ") " + h
	}
	return h
}

// WriteText writes the report for people.
func (it *Iteration) WriteText(w io.Writer) {
	fmt.Fprintln(w, it.headline())
	writeNotes(w, it.Notes, "")
	fmt.Fprintln(w)
	for _, t := range it.tables() {
		t.writeText(w)
	}
}

// WriteMarkdown writes the report as Markdown tables.
func (it *Iteration) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "## %s\n\n", mdEscape(it.headline()))
	writeNotes(w, it.Notes, "> ")
	for _, t := range it.tables() {
		t.writeMarkdown(w)
	}
}

// simaiGBps converts bytes per ns to SimAI's bandwidth unit, bytes/s
// divided by 2^30.
func simaiGBps(v Num) float64 { return float64(v) * 1e9 / (1 << 30) }

// WriteSimAIE2E writes the critical rank's report in the layout of
// SimAI's EndToEnd.csv (analytical backend), named after the trace file:
// exposed communication outside DP, DP_EP, TP, EP and PP joins TP's
// column, where SimAI puts every non-EP forward and input-gradient wait.
func (it *Iteration) WriteSimAIE2E(w io.Writer) error {
	run := strings.TrimSuffix(filepath.Base(it.Source), filepath.Ext(it.Source))
	return simaie2e.Write(w, run, it.E2E())
}
