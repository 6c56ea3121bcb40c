package plot

import (
	"image/color"
	"math"

	"github.com/fabricsim/fabricsim/formats/links"
	"github.com/fabricsim/fabricsim/pkg/stats"
	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// linkGroupColors gives each group type the same Okabe-Ito colour in every
// link-load plot; other names take the rest of the palette in order.
var linkGroupColors = map[string]color.Color{
	"TP": okabeIto[0], "DP": okabeIto[1], "EP": okabeIto[4], "PP": okabeIto[3], "DP_EP": okabeIto[2],
	links.None: color.Gray{Y: 170},
}

func groupColor(g string, other *int) color.Color {
	if c, ok := linkGroupColors[g]; ok {
		return c
	}
	c := []color.Color{okabeIto[5], okabeIto[6]}[*other%2]
	*other++
	return c
}

// groupLabel is a group type's legend entry.
func groupLabel(g string) string {
	if g == links.None {
		return "no group"
	}
	return g
}

// Links draws the report as two panels (three for a file of several jobs,
// the third jobTierPlot's heat map): the mean utilization of each
// tier's links stacked by group type, with the most utilized link of the
// tier marked; and the hottest directed links as horizontal bars stacked
// by group type. It returns the panels and their heights for Write.
func Links(ll *stats.LinkLoads) ([]*gplot.Plot, []vg.Length) {
	if len(ll.JobTiers) > 0 { // a file of several jobs: their heat map too
		return []*gplot.Plot{tierPlot(ll), topPlot(ll), jobTierPlot(ll)}, []vg.Length{vg.Inch * 4.5, topHeight(ll), jobTierHeight(ll)}
	}
	return []*gplot.Plot{tierPlot(ll), topPlot(ll)}, []vg.Length{vg.Inch * 4.5, topHeight(ll)}
}

// linkColors gives each group type of the report its colour.
func linkColors(ll *stats.LinkLoads) map[string]color.Color {
	c := map[string]color.Color{}
	other := 0
	for _, g := range ll.GroupTypes() {
		c[g] = groupColor(g, &other)
	}
	return c
}

// tierPlot is panel 1: per tier, the mean utilization over its directed
// links carrying bytes, stacked by group type, and the tier's maximum.
func tierPlot(ll *stats.LinkLoads) *gplot.Plot {
	p := gplot.New()
	p.Title.Text = ll.Title()
	p.Y.Label.Text = "link utilization (%), mean over the tier's loaded links"
	p.X.Label.Text = "tier (role the bytes leave - role they enter), host side first"
	p.Add(plotter.NewGrid())
	var names []string
	var all []stats.TierLoad
	for _, t := range ll.Tiers {
		if t.GroupType == stats.GroupAll {
			names = append(names, t.Tier)
			all = append(all, t)
		}
	}
	if len(all) == 0 {
		p.Title.Text += " (no link carried bytes)"
		return p
	}
	width := vg.Points(max(8, min(40, 420/float64(len(all)))))
	colors := linkColors(ll)
	var below *plotter.BarChart
	var legend []legendEntry
	top := 0.0
	for _, g := range ll.GroupTypes() {
		vals := make(plotter.Values, len(all))
		for i, t := range all {
			for _, l := range ll.Tiers {
				if l.Tier == t.Tier && l.GroupType == g {
					vals[i] = l.UtilTierMean * 100
				}
			}
		}
		b, err := stackBar(p, vals, width, colors[g], below, false)
		if err != nil {
			continue // values are finite: the reader refuses NaN and Inf
		}
		below = b
		legend = append(legend, legendEntry{groupLabel(g) + " (mean)", b})
	}
	addLegend(p, legend)
	maxPts := make(plotter.XYs, len(all))
	for i, t := range all {
		maxPts[i] = plotter.XY{X: float64(i), Y: t.UtilMax * 100}
		top = max(top, t.UtilMax*100)
	}
	if s, err := plotter.NewScatter(maxPts); err == nil {
		s.GlyphStyle = draw.GlyphStyle{Color: color.Black, Radius: width / 2, Shape: dashGlyph{}}
		p.Add(s)
		p.Legend.Add("max (most utilized link)", &plotter.Line{LineStyle: draw.LineStyle{Color: color.Black, Width: vg.Points(2.5)}})
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4 // no bar against an axis
	if len(names) > 6 {
		p.X.Tick.Label.Rotation = math.Pi / 8
		p.X.Tick.Label.XAlign = draw.XRight
		p.X.Tick.Label.YAlign = draw.YCenter
	}
	// The legend goes beside the panel (Write): the axis fits the
	// highest maximum.
	p.Y.Tick.Marker = humanTicks{1}
	p.Y.Min = 0
	p.Y.Max = max(top, 1e-9) * 1.05
	p.Legend.Top = true
	return p
}

type legendEntry struct {
	name string
	bar  gplot.Thumbnailer
}

// addLegend lists vertically stacked bars top segment first, as drawn.
func addLegend(p *gplot.Plot, entries []legendEntry) {
	for i := len(entries) - 1; i >= 0; i-- {
		p.Legend.Add(entries[i].name, entries[i].bar)
	}
}

// dashGlyph draws a horizontal stroke as wide as the glyph: the maximum
// over a bar.
type dashGlyph struct{}

// DrawGlyph implements draw.GlyphDrawer.
func (dashGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	c.StrokeLine2(draw.LineStyle{Color: sty.Color, Width: vg.Points(2.5)}, pt.X-sty.Radius, pt.Y, pt.X+sty.Radius, pt.Y)
}

// topPlot is panel 2: the hottest directed links, hottest on top, their
// utilization stacked by group type.
func topPlot(ll *stats.LinkLoads) *gplot.Plot {
	p := gplot.New()
	p.Title.Text = "Hottest directed links"
	p.X.Label.Text = "link utilization (%) over the run"
	p.Add(plotter.NewGrid())
	n := len(ll.Top)
	if n == 0 {
		p.Title.Text += " (none carried bytes)"
		return p
	}
	labels := make([]string, n)
	for i := range ll.Top {
		l := &ll.Top[i]
		labels[n-1-i] = l.Label() // the hottest at the top
	}
	width := vg.Points(max(3, min(16, 300/float64(n))))
	colors := linkColors(ll)
	var below *plotter.BarChart
	top := 0.0
	for _, g := range ll.GroupTypes() {
		vals := make(plotter.Values, n)
		used := false
		for i := range ll.Top {
			if u, ok := ll.Top[i].GroupUtil(g); ok {
				vals[n-1-i], used = u*100, true
			}
		}
		if !used {
			continue
		}
		b, err := stackBar(p, vals, width, colors[g], below, true)
		if err != nil {
			continue
		}
		below = b
		p.Legend.Add(groupLabel(g), b) // left to right as stacked
	}
	for i := range ll.Top {
		top = max(top, ll.Top[i].Utilization*100)
	}
	p.NominalY(labels...)
	p.X.Tick.Marker = humanTicks{1}
	p.X.Min = 0
	p.X.Max = max(top, 1e-9) * 1.3 // room for the legend at the bottom right
	p.Legend.Top, p.Legend.Left = false, false
	return p
}

// topHeight suits panel 2 to its number of links.
func topHeight(ll *stats.LinkLoads) vg.Length {
	return vg.Inch * vg.Length(min(24, max(3, 1.2+0.25*float64(len(ll.Top)))))
}

// stackBar adds to p a borderless bar chart of vals in c, on top of below
// (nil: the first of a stack).
func stackBar(p *gplot.Plot, vals plotter.Values, width vg.Length, c color.Color, below *plotter.BarChart, horizontal bool) (*plotter.BarChart, error) {
	b, err := plotter.NewBarChart(vals, width)
	if err != nil {
		return nil, err
	}
	b.Horizontal = horizontal
	b.Color = c
	b.LineStyle.Width = 0
	if below != nil {
		b.StackOn(below)
	}
	p.Add(b)
	return b, nil
}
