package plot

import (
	"math"
	"slices"

	"github.com/fabricsim/fabricsim/pkg/stats"
	"github.com/fabricsim/fabricsim/pkg/units"
	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// BusbwSeries is one curve of a bus bandwidth plot.
type BusbwSeries struct {
	Name      string
	Rows      []stats.NCCLTestsRow
	Reference bool // published measurements: points only, dashed
}

// Busbw draws bus bandwidth against size as nccl-tests users read it:
// GB/s over a log2 size axis, one line per series. Rows of size 0 have no
// place on a log axis and are left out.
func Busbw(title string, series []BusbwSeries) *gplot.Plot {
	p := gplot.New()
	p.Title.Text = title
	p.X.Label.Text = "message size"
	plainAxis(&p.Y, "bus bandwidth", "GB/s")
	p.X.Scale = gplot.LogScale{}
	p.X.Tick.Marker = sizeTicks{}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	p.Y.Min = 0
	for i, s := range series {
		pts := make(plotter.XYs, 0, len(s.Rows))
		for _, r := range s.Rows {
			if r.SizeBytes > 0 && !math.IsNaN(r.BusbwGBps) {
				pts = append(pts, plotter.XY{X: float64(r.SizeBytes), Y: r.BusbwGBps})
			}
		}
		if len(pts) == 0 {
			continue
		}
		slices.SortFunc(pts, func(a, b plotter.XY) int { return cmpFloat(a.X, b.X) })
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			continue // every value is finite by construction
		}
		c := seriesColor(s.Name, i)
		l.Color, sc.Color = c, c
		l.Width = vg.Points(1.5)
		sc.Shape = draw.CircleGlyph{}
		sc.Radius = vg.Points(2)
		if s.Reference {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			sc.Shape = draw.BoxGlyph{}
			sc.Radius = vg.Points(4) // a published plateau is often one point
		}
		p.Add(l, sc)
		p.Legend.Add(s.Name, l, sc)
		p.Y.Max = max(p.Y.Max, pts[len(pts)-1].Y)
	}
	for _, s := range series {
		for _, r := range s.Rows {
			if !math.IsNaN(r.BusbwGBps) { // a failed collective's
				p.Y.Max = max(p.Y.Max, r.BusbwGBps)
			}
		}
	}
	p.Y.Max *= 1.05 + 0.06*float64(len(series)) // room for the legend above the plateau
	return p
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sizeTicks marks powers of two on a log axis: every fourth labelled
// (1B, 16B, 256B, 4KiB, ...), the rest as minor ticks.
type sizeTicks struct{}

// Ticks implements gplot.Ticker.
func (sizeTicks) Ticks(lo, hi float64) []gplot.Tick {
	var out []gplot.Tick
	if lo <= 0 {
		lo = 1
	}
	for k := math.Floor(math.Log2(lo)); k <= math.Ceil(math.Log2(hi)) && k < 63; k++ {
		v := math.Exp2(k)
		if v < lo || v > hi {
			continue
		}
		t := gplot.Tick{Value: v}
		if int(k)%4 == 0 || hi/lo < 64 {
			t.Label = units.HumanSize(int64(v))
		}
		out = append(out, t)
	}
	return out
}
