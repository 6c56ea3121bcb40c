package plot

import (
	"cmp"
	"image/color"
	"math"
	"slices"

	"github.com/fabricsim/fabricsim/pkg/stats"
	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Timeline draws, per source node (GPU id = rank), when it had flows
// in flight: the union of its flows' [start, end) intervals, one lane per
// conn_type, so overlapping flows merge into busy periods and the drawing
// stays cheap for large runs. Delay nodes appear in grey (compute,
// launch latency).
func Timeline(run *stats.Run, title string) *gplot.Plot {
	p := gplot.New()
	p.Title.Text = title
	p.Y.Label.Text = "source node (GPU id = rank)"
	tl := &timeline{scale: 1}
	conns := map[string]int{}
	var names []string
	for _, f := range run.KeptFlows() {
		if _, ok := conns[f.ConnType]; !ok {
			conns[f.ConnType] = 0
			names = append(names, f.ConnType)
		}
	}
	slices.Sort(names)
	for i, n := range names {
		conns[n] = i
	}
	type key struct {
		src  int32
		conn int
	}
	spans := map[key][][2]int64{}
	for _, f := range run.KeptFlows() {
		if f.EndNs <= f.StartNs {
			continue
		}
		k := key{f.Src, conns[f.ConnType]}
		spans[k] = append(spans[k], [2]int64{f.StartNs, f.EndNs})
	}
	keys := make([]key, 0, len(spans))
	for k := range spans {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Or(cmp.Compare(a.src, b.src), cmp.Compare(a.conn, b.conn)) })
	nl := float64(len(names))
	tl.minY, tl.maxY = math.Inf(1), math.Inf(-1)
	for _, k := range keys {
		y := float64(k.src) + (float64(k.conn)-(nl-1)/2)*0.8/max(nl, 1)
		tl.lanes = append(tl.lanes, lane{y: y, conn: k.conn, spans: mergeSpans(spans[k])})
		tl.minY, tl.maxY = min(tl.minY, float64(k.src)-0.5), max(tl.maxY, float64(k.src)+0.5)
	}
	tl.colors = make([]color.Color, len(names))
	for i, n := range names {
		c := seriesColor(n, i)
		tl.colors[i] = c
		l := &plotter.Line{LineStyle: draw.LineStyle{Color: c, Width: vg.Points(4)}}
		p.Legend.Add(cmp.Or(n, "flows"), l)
	}
	p.Legend.Top = true
	if len(tl.lanes) == 0 {
		p.Title.Text += " (no flow with a duration)"
		return p
	}
	tl.rows = int(tl.maxY - tl.minY)
	// The axes fit the data: nodes 0-15 for 16 GPUs (the legend goes
	// beside the panel, see Write), time in the unit of the run.
	_, xmax, _, _ := tl.DataRange()
	timeAxis(&p.X, "time", xmax)
	p.Y.Min, p.Y.Max = tl.minY, tl.maxY
	p.Y.Tick.Marker = intTicks{}
	p.Add(tl)
	return p
}

// ShareTimeAxis gives timeline panels (Timeline) one time axis, the
// union of theirs, in one unit, so that runs compare by eye.
func ShareTimeAxis(plots []*gplot.Plot) {
	if len(plots) == 0 {
		return
	}
	lo, hi := plots[0].X.Min, plots[0].X.Max
	for _, p := range plots[1:] {
		lo, hi = min(lo, p.X.Min), max(hi, p.X.Max)
	}
	for _, p := range plots {
		p.X.Min, p.X.Max = lo, hi
		timeAxis(&p.X, "time", hi)
	}
}

// mergeSpans sorts intervals and merges overlapping or touching ones.
func mergeSpans(s [][2]int64) [][2]int64 {
	slices.SortFunc(s, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	out := s[:0]
	for _, v := range s {
		if n := len(out); n > 0 && v[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], v[1])
			continue
		}
		out = append(out, v)
	}
	return out
}

type lane struct {
	y     float64
	conn  int
	spans [][2]int64
}

type timeline struct {
	lanes      []lane
	colors     []color.Color
	minY, maxY float64
	rows       int
	scale      float64 // ns per x unit; 0 means µs (1e3)
	// shared: lanes at the same y never overlap in time (an iteration's
	// segments), so each may be as thick as its half row, and is drawn
	// to scale.
	shared bool
}

// Plot implements gplot.Plotter.
func (t *timeline) Plot(c draw.Canvas, p *gplot.Plot) {
	trX, trY := p.Transforms(&c)
	scale := t.scale
	if scale == 0 {
		scale = 1e3
	}
	// Lanes share a rank's row; keep them thin enough not to overlap.
	row := (c.Max.Y - c.Min.Y) / vg.Length(max(1, t.rows))
	w := max(vg.Points(0.5), min(vg.Points(6), row/vg.Length(max(1, len(t.colors)))*0.8))
	if t.shared {
		w = max(vg.Points(0.5), min(vg.Points(8), row*0.38))
	}
	for _, l := range t.lanes {
		sty := draw.LineStyle{Color: t.colors[l.conn], Width: w}
		y := trY(l.y)
		for _, s := range l.spans {
			x0, x1 := trX(float64(s[0])/scale), trX(float64(s[1])/scale)
			if x1-x0 < vg.Points(0.5) && !t.shared { // keep very short flows visible
				x1 = x0 + vg.Points(0.5)
			}
			c.StrokeLine2(sty, x0, y, x1, y)
		}
	}
}

// DataRange implements gplot.DataRanger: time in µs (or scale ns), node ids.
func (t *timeline) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = math.Inf(1), math.Inf(-1)
	scale := t.scale
	if scale == 0 {
		scale = 1e3
	}
	for _, l := range t.lanes {
		xmin = min(xmin, float64(l.spans[0][0])/scale)
		xmax = max(xmax, float64(l.spans[len(l.spans)-1][1])/scale)
	}
	return xmin, xmax, t.minY, t.maxY
}

// TimelineHeight suits a timeline panel to its number of rows.
func TimelineHeight(run *stats.Run) vg.Length {
	ranks := map[int32]bool{}
	for _, f := range run.KeptFlows() {
		ranks[f.Src] = true
	}
	return vg.Inch * vg.Length(min(24, max(3.5, 2+0.12*float64(len(ranks)))))
}
