package stats

import (
	"fmt"
	"github.com/fabricsim/fabricsim/pkg/units"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
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
	sum := &textTable{
		title: fmt.Sprintf("Iteration: %s over %s; critical rank %d%s (most compute + exposed communication)",
			units.HumanDuration(it.IterationNs*1000), ranks, it.CriticalRank, stage),
		head:  []string{"", "critical (ms)", "share", "mean (ms)", "share"},
		align: "lrrrr",
		rows:  it.breakdownRows(),
		after: "exposed: the rank idle (no compute) while a collective it takes part in is in flight; bubble: idle with none in flight",
	}
	lay := &textTable{
		title: fmt.Sprintf("Layers on rank %d, summed over microbatches (ms; busbw GB/s)", it.CriticalRank),
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

func (it *Iteration) headline() string {
	h := "Iteration report of " + it.Source
	if it.Partial {
		h = fmt.Sprintf("PARTIAL (the run stopped early; %d flows never finished and are not in these figures) ", it.UnfinishedFlows) + h
	}
	if it.Backend != "" {
		h += " (" + it.Backend + ")"
	}
	return h
}

// WriteText writes the report for people.
func (it *Iteration) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%s\n\n", it.headline())
	for _, t := range it.tables() {
		t.writeText(w)
	}
}

// WriteMarkdown writes the report as Markdown tables.
func (it *Iteration) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "## %s\n\n", mdEscape(it.headline()))
	for _, t := range it.tables() {
		t.writeMarkdown(w)
	}
}

// simaiGBps converts bytes per ns to SimAI's bandwidth unit, bytes/s
// divided by 2^30.
func simaiGBps(v Num) float64 { return float64(v) * 1e9 / (1 << 30) }

// e2eValue formats a µs value as SimAI does (no decimals).
func e2eValue(ns float64) string {
	if math.IsNaN(ns) || math.IsInf(ns, 0) {
		return "NaN or Inf"
	}
	return strconv.FormatFloat(ns/1e3, 'f', 0, 64)
}

// E2EKeys is the header of SimAI's EndToEnd.csv summary line.
const E2EKeys = "File name, Expose DP comm, Expose DP_EP comm, Expose TP comm, Expose_EP_comm, Expose_PP_comm, bubble time, total comp, total exposed comm, Total time"

// E2ELayerHeader is the header of SimAI's per-layer rows; the second
// field is the run name.
func E2ELayerHeader(run string) string {
	return "layer_name," + run + ",fwd compute,wg compute,ig compute,fwd exposed comm,wg exposed comm,ig exposed comm,fwd total comm,algbw,busbw,wg total comm,algbw,busbw,ig total comm,algbw,busbw"
}

// WriteSimAIE2E writes the critical rank's report in the layout of
// SimAI's EndToEnd.csv (analytical backend): the summary header and its
// values line (µs with shares of the total time), then one row per layer
// (µs; algbw and busbw in SimAI's unit, bytes/s / 2^30). Exposed
// communication outside DP, DP_EP, TP, EP and PP joins TP's column, where
// SimAI puts every non-EP forward and input-gradient wait.
func (it *Iteration) WriteSimAIE2E(w io.Writer) error {
	run := strings.TrimSuffix(filepath.Base(it.Source), filepath.Ext(it.Source))
	run = strings.NewReplacer(",", "_", "\n", " ").Replace(run)
	c := &it.Critical
	total := float64(it.IterationNs)
	v := func(ns int64) string { return e2eValue(float64(ns)) + " (" + share(float64(ns), total) + ")" }
	vals := []string{run, v(c.ExposedDPNs), v(c.ExposedDPEPNs), v(c.ExposedTPNs + c.ExposedOtherNs), v(c.ExposedEPNs),
		v(c.ExposedPPNs), v(c.BubbleNs), v(c.ComputeNs), v(c.ExposedNs), e2eValue(total)}
	if _, err := fmt.Fprintf(w, "%s\n%s\n%s\n", E2EKeys, strings.Join(vals, ", "), E2ELayerHeader(run)); err != nil {
		return err
	}
	bw := func(v Num) string {
		if !v.Valid() {
			return "0.00"
		}
		return strconv.FormatFloat(simaiGBps(v), 'f', 2, 64)
	}
	n := func(ns int64) string { return e2eValue(float64(ns)) }
	name := strings.NewReplacer(",", "_", "\n", " ")
	for _, l := range it.Layers {
		row := []string{name.Replace(l.Name), run, n(l.FwdComputeNs), n(l.WgComputeNs), n(l.IgComputeNs),
			n(l.FwdExposedNs), n(l.WgExposedNs), n(l.IgExposedNs),
			n(l.FwdCommNs), bw(l.FwdAlgbw), bw(l.FwdBusbw), n(l.WgCommNs), bw(l.WgAlgbw), bw(l.WgBusbw),
			n(l.IgCommNs), bw(l.IgAlgbw), bw(l.IgBusbw)}
		if _, err := fmt.Fprintln(w, strings.Join(row, ",")); err != nil {
			return err
		}
	}
	return nil
}
