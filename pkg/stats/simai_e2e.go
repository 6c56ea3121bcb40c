package stats

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// E2E is an iteration report in SimAI's EndToEnd.csv terms (µs): read
// from SimAI's file, or made from a fabricsim iteration (Iteration.E2E)
// so that the two compare column by column.
type E2E struct {
	Source string
	// Summary holds SimAI's summary columns (E2ESummaryNames), NaN where
	// the file does not give them (the older layout has only the totals).
	Summary [9]float64
	Layers  []E2ELayer
}

// E2ESummaryNames name E2E.Summary's columns, as SimAI's header does.
var E2ESummaryNames = [9]string{"Expose DP comm", "Expose DP_EP comm", "Expose TP comm", "Expose_EP_comm", "Expose_PP_comm",
	"bubble time", "total comp", "total exposed comm", "Total time"}

// E2ELayer is one layer row: its name and the values of E2ELayerNames.
type E2ELayer struct {
	Name   string
	Values [15]float64
}

// E2ELayerNames name the per-layer columns after layer_name and the run.
var E2ELayerNames = [15]string{"fwd compute", "wg compute", "ig compute", "fwd exposed comm", "wg exposed comm", "ig exposed comm",
	"fwd total comm", "algbw", "busbw", "wg total comm", "algbw", "busbw", "ig total comm", "algbw", "busbw"}

// IsSimAIE2E reports whether head (a file's first bytes) is SimAI's
// EndToEnd.csv: its first line starts with one of its two headers.
func IsSimAIE2E(head []byte) bool {
	return bytes.HasPrefix(head, []byte("File name,")) || bytes.HasPrefix(head, []byte("layer_name,"))
}

// ReadSimAIE2E parses SimAI's EndToEnd.csv in either layout: the summary
// header and values line followed by per-layer rows (analytical), or
// per-layer rows (with a trailing "workload finished at" column) closed
// by a SUM row and a "total exposed comm,…,total comp,…,total time,…"
// line (packet-level backends). Errors name the line and field.
func ReadSimAIE2E(r io.Reader, name string) (*E2E, error) {
	e := &E2E{Source: name}
	for i := range e.Summary {
		e.Summary[i] = math.NaN()
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	fail := func(field, format string, a ...any) error {
		if field != "" {
			field = ", field " + field
		}
		return fmt.Errorf("%s: line %d%s: %s", name, line, field, fmt.Sprintf(format, a...))
	}
	num := func(field, s string) (float64, error) {
		s = strings.TrimSpace(s)
		if v, pct, ok := strings.Cut(s, " ("); ok { // "123 (4.56%)"
			// The share must be a number too: "(abc%)" is no SimAI output.
			p, okp := strings.CutSuffix(pct, "%)")
			if x, err := strconv.ParseFloat(p, 64); !okp || err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
				return 0, fail(field, "%q: the share in parentheses is not a percentage", clip(s))
			}
			s = v
		}
		if s == "NaN or Inf" || s == "nan" || s == "-nan" { // what SimAI prints for no value
			return math.NaN(), nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || f < 0 {
			return 0, fail(field, "%q is not a non-negative number", clip(s))
		}
		if f > maxE2EValue {
			return 0, fail(field, "%q is beyond %g (µs: more than int64 nanoseconds hold)", clip(s), maxE2EValue)
		}
		return f, nil
	}
	// Total time divides every ratio: zero is no iteration.
	total := func(field string, v float64) error {
		if v == 0 {
			return fail(field, "0: an iteration takes time")
		}
		return nil
	}
	var summaryNext, inLayers, sawHeader bool
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		f := strings.Split(text, ",")
		switch {
		case summaryNext:
			summaryNext = false
			if len(f) != 10 {
				return nil, fail("", "the summary values have %d fields, want 10 (%s)", len(f), E2EKeys)
			}
			for i := range e.Summary {
				v, err := num(E2ESummaryNames[i], f[i+1])
				if err != nil {
					return nil, err
				}
				if i == len(e.Summary)-1 {
					if err := total(E2ESummaryNames[i], v); err != nil {
						return nil, err
					}
				}
				e.Summary[i] = v
			}
		case strings.HasPrefix(text, "File name,"):
			for i, k := range f[1:] {
				if i >= len(E2ESummaryNames) || strings.TrimSpace(k) != E2ESummaryNames[i] {
					return nil, fail("", "summary header %q, want %q", text, E2EKeys)
				}
			}
			if len(f) != 10 {
				return nil, fail("", "summary header has %d fields, want 10", len(f))
			}
			summaryNext, sawHeader = true, true
		case strings.HasPrefix(text, "layer_name,"):
			if len(f) < 17 {
				return nil, fail("", "layer header has %d fields, want at least 17", len(f))
			}
			for i, k := range E2ELayerNames {
				if strings.TrimSpace(f[i+2]) != k {
					return nil, fail("", "layer header column %d is %q, want %q", i+3, f[i+2], k)
				}
			}
			inLayers, sawHeader = true, true
		case strings.HasPrefix(text, "total exposed comm,"):
			if len(f) != 6 || f[2] != "total comp" || f[4] != "total time" {
				return nil, fail("", "want total exposed comm,V,total comp,V,total time,V")
			}
			for i, at := range [3]int{7, 6, 8} {
				v, err := num(f[2*i], f[2*i+1])
				if err != nil {
					return nil, err
				}
				if at == 8 {
					if err := total(f[2*i], v); err != nil {
						return nil, err
					}
				}
				if math.IsNaN(e.Summary[at]) {
					e.Summary[at] = v
				}
			}
		case inLayers:
			if len(f) < 17 {
				return nil, fail("", "layer row has %d fields, want at least 17", len(f))
			}
			if f[0] == "SUM" {
				continue
			}
			l := E2ELayer{Name: f[0]}
			for i, k := range E2ELayerNames {
				if strings.TrimSpace(f[i+2]) == "NONE" {
					l.Values[i] = math.NaN()
					continue
				}
				v, err := num(k, f[i+2])
				if err != nil {
					return nil, err
				}
				l.Values[i] = v
			}
			e.Layers = append(e.Layers, l)
		default:
			return nil, fail("", "not a line of SimAI's EndToEnd.csv: %q", clip(text))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: line %d: %v", name, line+1, err)
	}
	if !sawHeader {
		return nil, fmt.Errorf("%s: no EndToEnd.csv header (File name,… or layer_name,…)", name)
	}
	if summaryNext {
		return nil, fail("", "the summary header has no values line after it")
	}
	return e, nil
}

// maxE2EValue bounds EndToEnd.csv's values (µs, GB/s): the longest time
// int64 nanoseconds hold. 1e308 is no measurement, and overflows to
// infinity on the way to nanoseconds.
const maxE2EValue = math.MaxInt64 / 1e3

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// E2E returns the critical rank's report in EndToEnd.csv's terms.
func (it *Iteration) E2E() *E2E {
	c := &it.Critical
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	e := &E2E{Source: it.Source, Summary: [9]float64{us(c.ExposedDPNs), us(c.ExposedDPEPNs), us(c.ExposedTPNs + c.ExposedOtherNs),
		us(c.ExposedEPNs), us(c.ExposedPPNs), us(c.BubbleNs), us(c.ComputeNs), us(c.ExposedNs), us(it.IterationNs)}}
	bw := func(v Num) float64 {
		if !v.Valid() {
			return math.NaN()
		}
		return simaiGBps(v)
	}
	for _, l := range it.Layers {
		e.Layers = append(e.Layers, E2ELayer{Name: l.Name, Values: [15]float64{us(l.FwdComputeNs), us(l.WgComputeNs), us(l.IgComputeNs),
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

func (e *E2E) layerSums() (map[string]*layerSums, []string) {
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
func CompareE2E(ours, theirs *E2E) *IterationComparison {
	c := &IterationComparison{Ours: ours.Source, Theirs: theirs.Source}
	for i, n := range E2ESummaryNames {
		c.Summary = append(c.Summary, E2ERatio{Column: n, OursUs: Num(ours.Summary[i]), TheirsUs: Num(theirs.Summary[i]),
			Ratio: ratio(ours.Summary[i], theirs.Summary[i])})
	}
	om, order := ours.layerSums()
	tm, torder := theirs.layerSums()
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
