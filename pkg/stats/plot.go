package stats

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/units"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// PlotFormat returns "png" or "svg" from a file name, or an error.
func PlotFormat(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".png", ".svg":
		return ext[1:], nil
	}
	return "", fmt.Errorf("%s: plot files are .png or .svg", path)
}

// Series is one line of a CDF plot: sorted values and their name.
type Series struct {
	Name   string
	Values []float64
}

// SlowdownSeries returns the run's slowdowns, one series per conn_type
// (sorted by name) and, when there are several, one for all flows.
func (run *Run) SlowdownSeries() []Series {
	by := map[string][]float64{}
	for _, b := range run.buckets {
		by[b.key.conn] = append(by[b.key.conn], b.slow...)
	}
	var out []Series
	for conn, v := range by {
		if len(v) == 0 {
			continue
		}
		slices.Sort(v)
		out = append(out, Series{Name: cmpStr(conn, "flows"), Values: v})
	}
	slices.SortFunc(out, func(a, b Series) int { return strings.Compare(a.Name, b.Name) })
	if len(out) > 1 {
		out = append(out, Series{Name: "all", Values: run.allSlow})
	}
	return out
}

// AllSlowdowns is every slowdown of the run, sorted. The slice is the
// run's own: callers must not modify it.
func (run *Run) AllSlowdowns() []float64 { return run.allSlow }

// connColors gives every conn_type the same colour in every plot, from
// Okabe and Ito's colour-blind-safe palette (the two PXN kinds, rarer, in
// darker tones of its yellow and blue); other names take the palette in
// order. "all" is black and drawn dashed under the others.
var connColors = map[string]color.Color{
	"RING": okabeIto[1], "TREE": okabeIto[3], "NVLS": okabeIto[0], "NET": okabeIto[2],
	"A2A": okabeIto[4], "P2P": okabeIto[5],
	"PXN_INIT": color.RGBA{0x99, 0x80, 0x00, 0xff}, "PXN_FINAL": color.RGBA{0x00, 0x3f, 0x66, 0xff},
	"MSCCL": color.Gray{Y: 100}, stream.ConnDelay: color.Gray{Y: 160}, "all": color.Black,
}

func seriesColor(name string, i int) color.Color {
	if c, ok := connColors[name]; ok {
		return c
	}
	return okabeItoAt(i)
}

// cdfPoints caps a CDF at this many points: more are invisible at any
// sensible image size and slow to draw.
const cdfPoints = 2000

// CDFPlot draws the empirical CDFs of series (slowdowns): the fraction of
// flows with slowdown ≤ x. The x axis is logarithmic when the values span
// a factor of ten or more.
func CDFPlot(title string, series []Series) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	plainAxis(&p.X, "slowdown (FCT / ideal FCT, ratio)", "")
	plainAxis(&p.Y, "fraction of flows with a smaller slowdown", "")
	p.Y.Min, p.Y.Max = 0, 1
	p.Add(plotter.NewGrid())
	// Bottom right is where CDFs are empty: every curve has risen by
	// its largest value, and the x axis is stretched past that below.
	p.Legend.Top, p.Legend.Left = false, false
	lo, hi := math.Inf(1), math.Inf(-1)
	// "all" first, so that it lies under a conn_type it equals (one
	// conn_type carries most flows) instead of hiding it.
	order := make([]int, 0, len(series))
	for i, s := range series {
		if s.Name == "all" {
			order = append([]int{i}, order...)
		} else {
			order = append(order, i)
		}
	}
	for _, i := range order {
		s := series[i]
		n := len(s.Values)
		if n == 0 {
			continue
		}
		lo, hi = min(lo, s.Values[0]), max(hi, s.Values[n-1])
		pts := make(plotter.XYs, 0, min(n, cdfPoints)+1)
		pts = append(pts, plotter.XY{X: s.Values[0], Y: 0})
		step := max(1, n/cdfPoints)
		for j := step - 1; j < n; j += step {
			pts = append(pts, plotter.XY{X: s.Values[j], Y: float64(j+1) / float64(n)})
		}
		if last := pts[len(pts)-1]; last.Y < 1 {
			pts = append(pts, plotter.XY{X: s.Values[n-1], Y: 1})
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			continue // NaN cannot occur: slowdowns are finite ratios
		}
		l.Color = seriesColor(s.Name, i)
		l.Width = vg.Points(1.5)
		l.StepStyle = plotter.PostStep
		if s.Name == "all" {
			l.Width = vg.Points(2.5)
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (%d)", s.Name, n), l)
	}
	if math.IsInf(lo, 1) {
		p.Title.Text += " (no flow with an ideal FCT)"
		p.X.Min, p.X.Max = 0, 1
		return p
	}
	if lo > 0 && hi/lo >= 10 {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.X.Min, p.X.Max = lo/1.05, hi*math.Pow(hi/lo, 0.45)
	} else {
		pad := max(0.6*(hi-lo), 0.05*math.Abs(hi), 1e-9)
		p.X.Min, p.X.Max = lo-pad/10, hi+pad
	}
	return p
}

// TimelinePlot draws, per source node (GPU id = rank), when it had flows
// in flight: the union of its flows' [start, end) intervals, one lane per
// conn_type, so overlapping flows merge into busy periods and the drawing
// stays cheap for large runs. Delay nodes appear in grey (compute,
// launch latency).
func (run *Run) TimelinePlot(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "source node (GPU id = rank)"
	tl := &timeline{scale: 1}
	conns := map[string]int{}
	var names []string
	for _, f := range run.flows {
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
	for _, f := range run.flows {
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
		p.Legend.Add(cmpStr(n, "flows"), l)
	}
	p.Legend.Top = true
	if len(tl.lanes) == 0 {
		p.Title.Text += " (no flow with a duration)"
		return p
	}
	tl.rows = int(tl.maxY - tl.minY)
	// The axes fit the data: nodes 0-15 for 16 GPUs (the legend goes
	// beside the panel, see WritePlots), time in the unit of the run.
	_, xmax, _, _ := tl.DataRange()
	timeAxis(&p.X, "time", xmax)
	p.Y.Min, p.Y.Max = tl.minY, tl.maxY
	p.Y.Tick.Marker = intTicks{}
	p.Add(tl)
	return p
}

// ShareTimeAxis gives timeline panels (TimelinePlot) one time axis, the
// union of theirs, in one unit, so that runs compare by eye.
func ShareTimeAxis(plots []*plot.Plot) {
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

// Plot implements plot.Plotter.
func (t *timeline) Plot(c draw.Canvas, p *plot.Plot) {
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

// DataRange implements plot.DataRanger: time in µs (or scale ns), node ids.
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

// WritePlots draws plots one above the other into one PNG or SVG image,
// each panel as tall as heights says (timelines of many ranks need more).
func WritePlots(w io.Writer, format string, plots []*plot.Plot, heights []vg.Length) error {
	width := vg.Inch * 9
	var total vg.Length
	for _, h := range heights {
		total += h
	}
	var c vg.CanvasWriterTo
	switch format {
	case "png":
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, total), vgimg.UseDPI(110))}
	case "svg":
		c = vgsvg.New(width, total)
	default:
		return fmt.Errorf("plot format %q (png or svg)", format)
	}
	dc := draw.New(c)
	// White background: PNG viewers with dark themes show transparency as black.
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	top := dc.Max.Y
	for i, p := range plots {
		panel := dc
		panel.Max.Y = top
		panel.Min.Y = top - heights[i]
		top = panel.Min.Y
		drawPanel(draw.Crop(panel, vg.Points(6), -vg.Points(10), vg.Points(6), -vg.Points(6)), p)
	}
	_, err := c.WriteTo(w)
	return err
}

// drawPanel draws p into c. A legend at the top right (timelines,
// stacked bars) goes beside the data instead of over it, so that the axes
// can fit the data rather than leave headroom for it.
func drawPanel(c draw.Canvas, p *plot.Plot) {
	leg := p.Legend
	w := leg.Rectangle(c).Size().X
	if !leg.Top || leg.Left || w == 0 {
		p.Draw(c)
		return
	}
	gap := vg.Points(8)
	p.Legend = plot.NewLegend()
	p.Draw(draw.Crop(c, 0, -(w + gap), 0, 0))
	p.Legend = leg
	side := c
	side.Min.X = c.Max.X - w
	side.Max.Y -= p.Title.TextStyle.Height(p.Title.Text) + p.Title.Padding // level with the data
	leg.Left = true
	leg.Draw(side)
}

// TimelineHeight suits a timeline panel to its number of rows.
func (run *Run) TimelineHeight() vg.Length {
	ranks := map[int32]bool{}
	for _, f := range run.flows {
		ranks[f.Src] = true
	}
	return vg.Inch * vg.Length(min(24, max(3.5, 2+0.12*float64(len(ranks)))))
}

// LatencyCurvePlot draws latency curves (Run.LatencyCurve), one line per
// run named by its curve's Name, against time, as the hybrid-PDES paper's
// Figure 3 draws its runs. A window (toNs > fromNs) is shaded and named
// windowName in the legend (the surrogate pipeline marks its surrogate's).
func LatencyCurvePlot(title string, curves []Curve, fromNs, toNs int64, windowName string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Add(plotter.NewGrid())
	maxX, lo, hi := float64(toNs), math.Inf(1), math.Inf(-1)
	var lines []*plotter.Line
	var names []string
	for i, c := range curves {
		pts := make(plotter.XYs, len(c.Ms))
		for j := range c.Ms {
			pts[j] = plotter.XY{X: c.Ms[j] * 1e6, Y: c.Us[j] * 1e3} // ns, the axes' unit
			maxX, lo, hi = max(maxX, pts[j].X), min(lo, pts[j].Y), max(hi, pts[j].Y)
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			continue // latencies are finite
		}
		// Colour and dash both differ: runs that agree lie on one
		// another, and the dashes let the one below show through.
		l.Color = okabeItoAt(i)
		l.Width = vg.Points(1.5)
		l.Dashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)}}[i%3]
		lines = append(lines, l)
		names = append(names, c.Name)
	}
	timeAxis(&p.Y, "mean latency of the flows delivered", hi)
	fitAxis(&p.Y, lo, hi)
	timeAxis(&p.X, "time", maxX)
	if len(curves) > 0 {
		p.X.Label.Text += ", bins of " + units.HumanDuration(curves[0].BinNs*1000)
	}
	if toNs > fromNs && len(lines) > 0 {
		a, b := float64(fromNs), float64(toNs)
		win, err := plotter.NewPolygon(plotter.XYs{{X: a, Y: p.Y.Min}, {X: b, Y: p.Y.Min}, {X: b, Y: p.Y.Max}, {X: a, Y: p.Y.Max}})
		if err == nil {
			win.Color = color.Gray{Y: 230}
			win.LineStyle.Width = 0
			p.Add(win) // under the curves
			p.Legend.Add(windowName, win)
		}
	}
	for i, l := range lines {
		p.Add(l)
		p.Legend.Add(names[i], l)
	}
	p.Legend.Top = true // beside the panel (WritePlots)
	return p
}
