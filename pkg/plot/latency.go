package plot

import (
	"image/color"
	"math"

	"github.com/fabricsim/fabricsim/pkg/stats"
	"github.com/fabricsim/fabricsim/pkg/units"
	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// LatencyCurves draws latency curves (stats.Run.LatencyCurve), one line per
// run named by its curve's Name, against time, as the hybrid-PDES paper's
// Figure 3 draws its runs. A window (toNs > fromNs) is shaded and named
// windowName in the legend (the surrogate pipeline marks its surrogate's).
func LatencyCurves(title string, curves []stats.Curve, fromNs, toNs int64, windowName string) *gplot.Plot {
	p := gplot.New()
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
	p.Legend.Top = true // beside the panel (Write)
	return p
}
