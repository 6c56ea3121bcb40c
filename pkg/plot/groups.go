package plot

import (
	"fmt"
	"math"
	"slices"

	"github.com/fabricsim/fabricsim/pkg/stats"
	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// GroupedDots draws each y column by text column x, one dot per row, the
// rows of each value of text column group in a colour and shape of their
// own, side by side within an x slot, named in the legend: a job's
// slowdown per placement, one colour per job. The y axis is fitted to the
// dots as Sweep fits it (the title says when it does not start at 0), with
// a dashed line at 1 when the column is a slowdown (the run alone).
func GroupedDots(dt *stats.DataTable, x string, ys []string, group string) ([]*gplot.Plot, error) {
	titles := map[string]string{}
	x = cutTitle(x, titles)
	group = cutTitle(group, titles)
	ys = slices.Clone(ys)
	for i := range ys {
		ys[i] = cutTitle(ys[i], titles)
	}
	if !dt.IsText(x) {
		return nil, fmt.Errorf("--group needs a text --x column (a placement, a case); %q is not one", x)
	}
	if !dt.IsText(group) {
		return nil, fmt.Errorf("--group: %q is not a text column of the table", group)
	}
	labels, of := dt.Strings(x), dt.Strings(group)
	var names, groups []string
	for k := range labels {
		if !slices.Contains(names, labels[k]) {
			names = append(names, labels[k])
		}
		if !slices.Contains(groups, of[k]) {
			groups = append(groups, of[k])
		}
	}
	xname, _ := columnQuantity(x, titles)
	gname, _ := columnQuantity(group, titles)
	// The groups share 60% of a slot, centred on it.
	step := 0.6 / float64(max(len(groups), 1))
	var plots []*gplot.Plot
	for _, y := range ys {
		vs, err := dt.Column(y)
		if err != nil {
			return nil, fmt.Errorf("--y: %v", err)
		}
		yq, ym := columnQuantity(y, titles)
		p := gplot.New()
		p.Title.Text = fmt.Sprintf("%s by %s, per %s", yq, xname, gname)
		p.X.Label.Text = xname
		p.Add(plotter.NewGrid())
		var all plotter.XYs
		for gi, g := range groups {
			var pts plotter.XYs
			for k, v := range vs {
				if of[k] != g || math.IsNaN(v) || math.IsInf(v, 0) {
					continue
				}
				off := (float64(gi) - float64(len(groups)-1)/2) * step
				pts = append(pts, plotter.XY{X: float64(slices.Index(names, labels[k])) + off, Y: v * ym})
			}
			if len(pts) == 0 {
				continue
			}
			all = append(all, pts...)
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return nil, fmt.Errorf("--y %s: %v", y, err)
			}
			sc.Color = okabeItoAt(gi)
			sc.Shape = groupShapes[gi%len(groupShapes)]
			sc.Radius = vg.Points(4)
			p.Add(sc)
			p.Legend.Add(gname+" "+g, sc)
		}
		lo, hi := extent(all, func(q plotter.XY) float64 { return q.Y })
		if y == "slowdown" && len(all) > 0 {
			lo, hi = min(lo, 1), max(hi, 1)
			one, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 1}, {X: float64(len(names)) - 0.5, Y: 1}})
			if err == nil {
				one.Color, one.Dashes = okabeItoAt(len(groups)), []vg.Length{vg.Points(4), vg.Points(3)}
				p.Add(one)
				p.Legend.Add("alone (1)", one)
			}
		}
		columnAxis(&p.Y, y, titles, hi)
		if !fitAxis(&p.Y, lo, hi) {
			p.Title.Text += " (axis not from 0)"
		}
		p.Legend.Top, p.Legend.Left = true, true
		p.NominalX(names...)
		p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5
		plots = append(plots, p)
	}
	return plots, nil
}

// groupShapes tell the groups apart without colour.
var groupShapes = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PyramidGlyph{}, draw.CrossGlyph{}, draw.RingGlyph{}}
