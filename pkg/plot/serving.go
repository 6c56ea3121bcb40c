package plot

import (
	"fmt"
	"math"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/fabricsim/fabricsim/pkg/stats"
)

// Serving draws a serving run: the CDFs of its requests' TTFT, TPOT, KV
// transfer time and end-to-end latency on one logarithmic time axis, and
// each request's TTFT against its arrival (queueing shows as a rise).
func Serving(s *stats.Serving) ([]*gplot.Plot, []vg.Length) {
	cdf := gplot.New()
	cdf.Title.Text = fmt.Sprintf("Request latencies, %s, %d requests", s.Model, s.Requests)
	cdf.X.Label.Text = "latency (ms, log scale)"
	plainAxis(&cdf.Y, "fraction of requests with a smaller latency", "")
	cdf.Y.Min, cdf.Y.Max = 0, 1
	cdf.Add(plotter.NewGrid())
	cdf.Legend.Top, cdf.Legend.Left = false, false
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, l := range []struct {
		name string
		v    []int64
	}{{"TTFT", s.TTFT}, {"TPOT", s.TPOT}, {"KV transfer", s.KV}, {"end to end", s.E2E}} {
		n := len(l.v)
		if n == 0 {
			continue
		}
		pts := make(plotter.XYs, 0, min(n, cdfPoints)+1)
		step := max(1, n/cdfPoints)
		for j := step - 1; j < n; j += step {
			x := max(float64(l.v[j])/1e6, 1e-6) // ms; a log axis needs x > 0
			pts = append(pts, plotter.XY{X: x, Y: float64(j+1) / float64(n)})
			lo, hi = min(lo, x), max(hi, x)
		}
		ln, err := plotter.NewLine(pts)
		if err != nil {
			continue
		}
		ln.Color = okabeItoAt(i)
		ln.Width = vg.Points(1.5)
		ln.StepStyle = plotter.PostStep
		cdf.Add(ln)
		cdf.Legend.Add(fmt.Sprintf("%s (%d)", l.name, n), ln)
	}
	if lo < hi {
		cdf.X.Scale = gplot.LogScale{}
		cdf.X.Tick.Marker = gplot.LogTicks{Prec: -1}
		cdf.X.Min, cdf.X.Max = lo/1.2, hi*1.2
	} else {
		cdf.X.Min, cdf.X.Max = 0, max(hi*2, 1)
	}

	ttft := gplot.New()
	ttft.Title.Text = "Time to first token against arrival"
	maxArr, maxTTFT := 1.0, 1.0
	pts := make(plotter.XYs, len(s.Arrival))
	for i := range s.Arrival {
		pts[i] = plotter.XY{X: float64(s.Arrival[i]), Y: float64(s.ArrTTFT[i])}
		maxArr, maxTTFT = max(maxArr, pts[i].X), max(maxTTFT, pts[i].Y)
	}
	timeAxis(&ttft.X, "arrival", maxArr)
	timeAxis(&ttft.Y, "time to first token", maxTTFT)
	ttft.X.Min, ttft.Y.Min = 0, 0
	ttft.X.Max, ttft.Y.Max = maxArr*1.02, maxTTFT*1.05
	ttft.Add(plotter.NewGrid())
	if len(pts) > 0 {
		sc, err := plotter.NewScatter(pts)
		if err == nil {
			sc.GlyphStyle = draw.GlyphStyle{Shape: draw.CircleGlyph{}, Radius: vg.Points(1.5), Color: okabeIto[0]}
			ttft.Add(sc)
		}
	}
	return []*gplot.Plot{cdf, ttft}, []vg.Length{vg.Inch * 4, vg.Inch * 3}
}
