package plot

import (
	"fmt"
	"math"

	"github.com/fabricsim/fabricsim/pkg/stats"
	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// cdfPoints caps a CDF at this many points: more are invisible at any
// sensible image size and slow to draw.
const cdfPoints = 2000

// CDF draws the empirical CDFs of series (slowdowns): the fraction of
// flows with slowdown ≤ x. The x axis is logarithmic when the values span
// a factor of ten or more.
func CDF(title string, series []stats.Series) *gplot.Plot {
	p := gplot.New()
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
		p.X.Scale = gplot.LogScale{}
		p.X.Tick.Marker = logTicks{}
		p.X.Min, p.X.Max = lo/1.05, hi*math.Pow(hi/lo, 0.45)
	} else {
		pad := max(0.6*(hi-lo), 0.05*math.Abs(hi), 1e-9)
		p.X.Min, p.X.Max = lo-pad/10, hi+pad
	}
	return p
}
