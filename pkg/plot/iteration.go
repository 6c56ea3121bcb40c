package plot

import (
	"image/color"
	"math"
	"slices"
	"strconv"

	"github.com/fabricsim/fabricsim/pkg/stats"
	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// segmentColors: compute in greys by phase, so that exposed
// communication, in Okabe and Ito's colour-blind-safe colours per group
// type (as in the link-load plots), stands out against it however thin;
// bubble a pale yellow, told apart from both.
var segmentColors = [stats.NumSegmentKinds]color.Color{
	stats.SegFwd: color.Gray{Y: 110}, stats.SegIg: color.Gray{Y: 140},
	stats.SegWg: color.Gray{Y: 175}, stats.SegCompute: color.Gray{Y: 80},
	stats.SegExposedDP: okabeIto[1], stats.SegExposedDPEP: okabeIto[2],
	stats.SegExposedTP: okabeIto[0], stats.SegExposedEP: okabeIto[4],
	stats.SegExposedPP: okabeIto[3], stats.SegExposedOther: okabeIto[5],
	stats.SegBubble: color.RGBA{0xf5, 0xee, 0xb0, 0xff},
}

// Iteration draws each rank's iteration as one row cut into what
// filled it: compute by phase and bubble in the row's upper half, exposed
// communication by group type in its lower half, so that thousands of
// short exposed pieces between compute kernels stay visible instead of
// blending into it. Legend entries give each kind's share of the ranks'
// time. The iteration must come from stats.AnalyzeIteration with
// KeepSegments.
func Iteration(it *stats.Iteration, title string) *gplot.Plot {
	p := gplot.New()
	p.Title.Text = title
	// Time in the unit the iteration calls for, data in ns.
	timeAxis(&p.X, "time", float64(it.EndNs))
	p.Y.Label.Text = "rank"
	// Ranks are rows in order, labelled with their number (and stage):
	// one rank per stage at collective granularity is 0, 768, 1536, ...
	tl := &timeline{colors: segmentColors[:], minY: math.Inf(1), maxY: math.Inf(-1), scale: 1, shared: true}
	used := [stats.NumSegmentKinds]bool{}
	var total [stats.NumSegmentKinds]int64
	var ticks []gplot.Tick
	every := max(1, len(it.Ranks)/24)
	for row, r := range it.Ranks {
		if row%every == 0 {
			label := strconv.Itoa(int(r.Rank))
			if r.Stage >= 0 && len(it.Ranks) <= 48 {
				label += " (stage " + strconv.Itoa(int(r.Stage)) + ")"
			}
			ticks = append(ticks, gplot.Tick{Value: float64(row), Label: label})
		}
		var by [stats.NumSegmentKinds][][2]int64
		for _, s := range it.Segments(r.Rank) {
			by[s.Kind] = append(by[s.Kind], [2]int64{s.StartNs, s.EndNs})
			used[s.Kind] = true
			total[s.Kind] += s.EndNs - s.StartNs
		}
		for k, spans := range by {
			if len(spans) > 0 {
				y := float64(row) + 0.2 // compute and bubble above
				if stats.ExposedKind(stats.SegmentKind(k)) {
					y = float64(row) - 0.2
				}
				tl.lanes = append(tl.lanes, lane{y: y, conn: k, spans: spans})
			}
		}
		tl.minY, tl.maxY = min(tl.minY, float64(row)-0.5), max(tl.maxY, float64(row)+0.5)
	}
	p.Y.Tick.Marker = gplot.ConstantTicks(ticks)
	var all int64
	for _, t := range total {
		all += t
	}
	for k, u := range used {
		if u {
			l := &plotter.Line{LineStyle: draw.LineStyle{Color: segmentColors[k], Width: vg.Points(4)}}
			p.Legend.Add(stats.SegmentNames[k]+" "+strconv.FormatFloat(100*float64(total[k])/float64(max(all, 1)), 'f', 1, 64)+"%", l)
		}
	}
	p.Legend.Top = true
	if len(tl.lanes) == 0 {
		return p
	}
	tl.rows = int(tl.maxY - tl.minY)
	slices.SortFunc(tl.lanes, func(a, b lane) int { return a.conn - b.conn })
	p.Add(tl)
	p.X.Min = float64(it.StartNs)
	p.X.Max = float64(it.EndNs)
	// Rows fit the panel: the legend goes beside it (Write).
	p.Y.Min, p.Y.Max = tl.minY, tl.maxY
	return p
}

// IterationHeight suits the iteration panel to its number of ranks.
func IterationHeight(it *stats.Iteration) vg.Length {
	// The legend (up to eleven entries) beside the rows needs about 3
	// inches; about a fifth of an inch per rank beyond.
	return vg.Inch * vg.Length(min(24, max(3.5, 1.5+0.2*float64(len(it.Ranks)))))
}
