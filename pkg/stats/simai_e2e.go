package stats

import (
	"fmt"
	"io"
	"math"

	"github.com/fabricsim/fabricsim/formats/simaie2e"
)

// E2E returns the critical rank's report in EndToEnd.csv's terms.
func (it *Iteration) E2E() *simaie2e.File {
	c := &it.Critical
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	e := &simaie2e.File{Source: it.Source, Summary: [9]float64{us(c.ExposedDPNs), us(c.ExposedDPEPNs), us(c.ExposedTPNs + c.ExposedOtherNs),
		us(c.ExposedEPNs), us(c.ExposedPPNs), us(c.BubbleNs), us(c.ComputeNs), us(c.ExposedNs), us(it.IterationNs)}}
	bw := func(v Num) float64 {
		if !v.Valid() {
			return math.NaN()
		}
		return simaiGBps(v)
	}
	for _, l := range it.Layers {
		e.Layers = append(e.Layers, simaie2e.Layer{Name: l.Name, Values: [15]float64{us(l.FwdComputeNs), us(l.WgComputeNs), us(l.IgComputeNs),
			us(l.FwdExposedNs), us(l.WgExposedNs), us(l.IgExposedNs), us(l.FwdCommNs), bw(l.FwdAlgbw), bw(l.FwdBusbw),
			us(l.WgCommNs), bw(l.WgAlgbw), bw(l.WgBusbw), us(l.IgCommNs), bw(l.IgAlgbw), bw(l.IgBusbw)}})
	}
	return e
}

// IterationComparison sets one iteration report against another (a
// SimAI EndToEnd.csv or a second trace): Ratio = Ours / Theirs.
type IterationComparison struct {
	Ours    string          `json:"ours"`
	Theirs  string          `json:"theirs"`
	Summary []E2ERatio      `json:"summary"`
	Layers  []LayerE2ERatio `json:"layers"`
	// LayersOnlyOurs and LayersOnlyTheirs count layer names one side
	// lacks.
	LayersOnlyOurs   int `json:"layers_only_ours"`
	LayersOnlyTheirs int `json:"layers_only_theirs"`
}

// E2ERatio is one summary column.
type E2ERatio struct {
	Column   string `json:"column"`
	OursUs   Num    `json:"ours_us"`
	TheirsUs Num    `json:"theirs_us"`
	Ratio    Num    `json:"ratio"`
}

// LayerE2ERatio compares one layer name, its rows summed on each side
// (SimAI lists a layer once per workload line; fabricsim once per line
// of a microbatch): compute (fwd + wg + ig), exposed and total
// communication.
type LayerE2ERatio struct {
	Name          string `json:"layer_name"`
	OursRows      int    `json:"rows_ours"`
	TheirsRows    int    `json:"rows_theirs"`
	ComputeOurs   Num    `json:"compute_ours_us"`
	ComputeTheirs Num    `json:"compute_theirs_us"`
	ComputeRatio  Num    `json:"compute_ratio"`
	ExposedOurs   Num    `json:"exposed_ours_us"`
	ExposedTheirs Num    `json:"exposed_theirs_us"`
	ExposedRatio  Num    `json:"exposed_ratio"`
	CommOurs      Num    `json:"comm_ours_us"`
	CommTheirs    Num    `json:"comm_theirs_us"`
	CommRatio     Num    `json:"comm_ratio"`
}

type layerSums struct {
	rows                   int
	compute, exposed, comm float64
}

func layerSumsOf(e *simaie2e.File) (map[string]*layerSums, []string) {
	m := map[string]*layerSums{}
	var order []string
	for _, l := range e.Layers {
		s := m[l.Name]
		if s == nil {
			s = &layerSums{}
			m[l.Name] = s
			order = append(order, l.Name)
		}
		v := l.Values
		s.rows++
		s.compute += v[0] + v[1] + v[2]
		s.exposed += v[3] + v[4] + v[5]
		s.comm += nz(v[6]) + nz(v[9]) + nz(v[12])
	}
	return m, order
}

func nz(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

// CompareE2E compares ours against theirs.
func CompareE2E(ours, theirs *simaie2e.File) *IterationComparison {
	c := &IterationComparison{Ours: ours.Source, Theirs: theirs.Source}
	for i, n := range simaie2e.SummaryNames {
		c.Summary = append(c.Summary, E2ERatio{Column: n, OursUs: Num(ours.Summary[i]), TheirsUs: Num(theirs.Summary[i]),
			Ratio: ratio(ours.Summary[i], theirs.Summary[i])})
	}
	om, order := layerSumsOf(ours)
	tm, torder := layerSumsOf(theirs)
	for _, n := range torder {
		if om[n] == nil {
			order = append(order, n)
		}
	}
	for _, n := range order {
		o, t := om[n], tm[n]
		switch {
		case t == nil:
			c.LayersOnlyOurs++
			continue
		case o == nil:
			c.LayersOnlyTheirs++
			continue
		}
		c.Layers = append(c.Layers, LayerE2ERatio{Name: n, OursRows: o.rows, TheirsRows: t.rows,
			ComputeOurs: Num(o.compute), ComputeTheirs: Num(t.compute), ComputeRatio: ratio(o.compute, t.compute),
			ExposedOurs: Num(o.exposed), ExposedTheirs: Num(t.exposed), ExposedRatio: ratio(o.exposed, t.exposed),
			CommOurs: Num(o.comm), CommTheirs: Num(t.comm), CommRatio: ratio(o.comm, t.comm)})
	}
	return c
}

// DataTable returns the comparison's summary (TableIteration) or layers
// table.
func (c *IterationComparison) DataTable(name string) (*DataTable, error) {
	src := c.Ours + " vs " + c.Theirs
	switch name {
	case TableIteration:
		return newDataTable(src, c.Summary), nil
	case TableLayers:
		return newDataTable(src, c.Layers), nil
	}
	return nil, fmt.Errorf("the iteration comparison has the tables %s and %s, not %q", TableIteration, TableLayers, name)
}

func (c *IterationComparison) tables() []*textTable {
	sum := &textTable{title: fmt.Sprintf("Iteration: %s (ours) against %s (theirs), µs; ratio = ours / theirs", c.Ours, c.Theirs),
		head: []string{"column", "ours", "theirs", "ratio"}, align: "lrrr"}
	f := func(v Num) string { return numf(v, 0) }
	for _, r := range c.Summary {
		sum.rows = append(sum.rows, []string{r.Column, f(r.OursUs), f(r.TheirsUs), factor(r.Ratio)})
	}
	lay := &textTable{title: "Layers by name, rows summed on each side (µs)",
		head:  []string{"layer", "rows", "compute", "theirs", "ratio", "exposed", "theirs", "ratio", "comm", "theirs", "ratio"},
		align: "lrrrrrrrrrr"}
	for _, l := range c.Layers {
		lay.rows = append(lay.rows, []string{text(l.Name), fmt.Sprintf("%d/%d", l.OursRows, l.TheirsRows),
			f(l.ComputeOurs), f(l.ComputeTheirs), factor(l.ComputeRatio), f(l.ExposedOurs), f(l.ExposedTheirs), factor(l.ExposedRatio),
			f(l.CommOurs), f(l.CommTheirs), factor(l.CommRatio)})
	}
	if c.LayersOnlyOurs+c.LayersOnlyTheirs > 0 {
		lay.after = fmt.Sprintf("layer names only in ours: %d, only in theirs: %d", c.LayersOnlyOurs, c.LayersOnlyTheirs)
	}
	return []*textTable{sum, lay}
}

// WriteText writes the comparison for people.
func (c *IterationComparison) WriteText(w io.Writer) {
	for _, t := range c.tables() {
		t.writeText(w)
	}
}

// WriteMarkdown writes the comparison as Markdown tables.
func (c *IterationComparison) WriteMarkdown(w io.Writer) {
	for _, t := range c.tables() {
		t.writeMarkdown(w)
	}
}
