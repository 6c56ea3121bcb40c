package stats

import (
	"image/color"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// segmentColors: compute in greens by phase, exposed communication in the
// colours the group types have elsewhere, bubble light grey.
var segmentColors = [numSegKinds]color.Color{
	SegFwd: color.RGBA{0x27, 0xae, 0x60, 0xff}, SegIg: color.RGBA{0x1e, 0x84, 0x49, 0xff},
	SegWg: color.RGBA{0x82, 0xe0, 0xaa, 0xff}, SegCompute: color.RGBA{0x14, 0x5a, 0x32, 0xff},
	SegExposedDP: color.RGBA{0xe6, 0x7e, 0x22, 0xff}, SegExposedDPEP: color.RGBA{0xd3, 0x54, 0x00, 0xff},
	SegExposedTP: color.RGBA{0x29, 0x80, 0xb9, 0xff}, SegExposedEP: color.RGBA{0xc0, 0x39, 0x2b, 0xff},
	SegExposedPP: color.RGBA{0x8e, 0x44, 0xad, 0xff}, SegExposedOther: color.RGBA{0x7f, 0x8c, 0x8d, 0xff},
	SegBubble: color.Gray{Y: 215},
}

// IterationPlot draws each rank's iteration as one row cut into what
// filled it: compute by phase, exposed communication by group type, and
// bubble. The iteration must come from AnalyzeIteration with
// KeepSegments.
func (it *Iteration) IterationPlot(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	// Time in ms once the iteration is long enough for µs to clutter.
	scale, unit := 1e3, "us"
	if it.IterationNs >= 10e6 {
		scale, unit = 1e6, "ms"
	}
	p.X.Label.Text = "time (" + unit + ")"
	p.Y.Label.Text = "rank"
	// Ranks are rows in order, labelled with their number (and stage):
	// one rank per stage at collective granularity is 0, 768, 1536, ...
	tl := &timeline{colors: segmentColors[:], minY: math.Inf(1), maxY: math.Inf(-1), scale: scale, shared: true}
	used := [numSegKinds]bool{}
	var ticks []plot.Tick
	every := max(1, len(it.Ranks)/24)
	for row, r := range it.Ranks {
		if row%every == 0 {
			label := strconv.Itoa(int(r.Rank))
			if r.Stage >= 0 && len(it.Ranks) <= 48 {
				label += " (stage " + strconv.Itoa(int(r.Stage)) + ")"
			}
			ticks = append(ticks, plot.Tick{Value: float64(row), Label: label})
		}
		var by [numSegKinds][][2]int64
		for _, s := range it.segments[r.Rank] {
			by[s.Kind] = append(by[s.Kind], [2]int64{s.StartNs, s.EndNs})
			used[s.Kind] = true
		}
		for k, spans := range by {
			if len(spans) > 0 {
				tl.lanes = append(tl.lanes, lane{y: float64(row), conn: k, spans: spans})
			}
		}
		tl.minY, tl.maxY = min(tl.minY, float64(row)-0.5), max(tl.maxY, float64(row)+0.5)
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	for k, u := range used {
		if u {
			l := &plotter.Line{LineStyle: draw.LineStyle{Color: segmentColors[k], Width: vg.Points(4)}}
			p.Legend.Add(SegmentNames[k], l)
		}
	}
	p.Legend.Top = true
	if len(tl.lanes) == 0 {
		return p
	}
	tl.rows = int(tl.maxY - tl.minY)
	slices.SortFunc(tl.lanes, func(a, b lane) int { return a.conn - b.conn })
	p.Add(tl)
	p.X.Min = float64(it.StartNs) / scale
	p.X.Max = float64(it.EndNs) / scale
	// Room above the top rank for the legend (about 14 pt per entry).
	n := 0
	for _, u := range used {
		if u {
			n++
		}
	}
	d := float64(it.PlotHeight()/vg.Inch) - 1
	if need := float64(n) * 14.0 / 72; need < d {
		p.Y.Max = tl.maxY + need*(tl.maxY-tl.minY)/(d-need)
	}
	return p
}

// PlotHeight suits the iteration panel to its number of ranks.
func (it *Iteration) PlotHeight() vg.Length {
	// Room for the legend's eight entries above a few rows, about a fifth
	// of an inch per rank beyond.
	return vg.Inch * vg.Length(min(24, max(5, 2+0.2*float64(len(it.Ranks)))))
}
