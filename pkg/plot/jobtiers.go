package plot

import (
	"image/color"
	"slices"
	"strconv"

	"github.com/fabricsim/fabricsim/pkg/stats"
	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// jobTierPlot is the heat map of a file of several jobs: a row per job, a
// column per tier (host side first), each cell coloured by the job's part
// of the tier's mean utilization and labelled with it in percent, from
// white (none) to dark red (the hottest cell).
func jobTierPlot(ll *stats.LinkLoads) *gplot.Plot {
	jobs := ll.Jobs()
	var tiers []string
	for _, j := range ll.JobTiers {
		if !slices.Contains(tiers, j.Tier) {
			tiers = append(tiers, j.Tier)
		}
	}
	g := &jobGrid{z: make([][]float64, len(tiers))} // job r's row at Y(r): the first on top
	for c := range g.z {
		g.z[c] = make([]float64, len(jobs))
	}
	var labels plotter.XYLabels
	for _, j := range ll.JobTiers {
		c, r := slices.Index(tiers, j.Tier), slices.Index(jobs, j.Job)
		g.z[c][r] = 100 * j.UtilTierMean
		g.max = max(g.max, g.z[c][r])
		labels.XYs = append(labels.XYs, plotter.XY{X: float64(c), Y: g.Y(r)})
		labels.Labels = append(labels.Labels, strconv.FormatFloat(100*j.UtilTierMean, 'f', 1, 64)+"%")
	}
	p := gplot.New()
	p.Title.Text = "Link utilization by job and tier (%: the job's part of the tier's mean over its loaded links)"
	p.X.Label.Text = "tier (role the bytes leave - role they enter), host side first"
	p.Y.Label.Text = "job"
	h := plotter.NewHeatMap(g, whiteToRed{})
	h.Min, h.Max = 0, max(g.max, 1e-9)
	p.Add(h)
	if l, err := plotter.NewLabels(labels); err == nil {
		for i := range l.TextStyle {
			l.TextStyle[i].XAlign, l.TextStyle[i].YAlign = draw.XCenter, draw.YCenter
		}
		p.Add(l)
	}
	p.NominalX(tiers...)
	top := slices.Clone(jobs) // the first job on top
	slices.Reverse(top)
	p.NominalY(top...)
	p.X.Min, p.X.Max = -0.5, float64(len(tiers))-0.5
	p.Y.Min, p.Y.Max = -0.5, float64(len(jobs))-0.5
	p.X.Tick.Label.Rotation = 0.5
	p.X.Tick.Label.XAlign = draw.XRight
	return p
}

// jobTierHeight suits the heat map to its number of jobs.
func jobTierHeight(ll *stats.LinkLoads) vg.Length {
	return vg.Inch * vg.Length(min(12, 2.2+0.45*float64(len(ll.Jobs()))))
}

// jobGrid is the heat map's grid: z[tier][job], in percent.
type jobGrid struct {
	z   [][]float64
	max float64
}

func (g *jobGrid) Dims() (c, r int) {
	if len(g.z) == 0 {
		return 0, 0
	}
	return len(g.z), len(g.z[0])
}
func (g *jobGrid) Z(c, r int) float64 { return g.z[c][r] }
func (g *jobGrid) X(c int) float64    { return float64(c) }
func (g *jobGrid) Y(r int) float64    { return float64(len(g.z[0]) - 1 - r) }

// whiteToRed is a sequential palette from white to a dark red, light
// enough at the low end for the cells' black labels to stay legible
// throughout.
type whiteToRed struct{}

func (whiteToRed) Colors() []color.Color {
	const n = 64
	cs := make([]color.Color, n)
	for i := range cs {
		t := float64(i) / (n - 1)
		cs[i] = color.RGBA{R: uint8(255 - 40*t), G: uint8(255 - 175*t), B: uint8(255 - 185*t), A: 255}
	}
	return cs
}

var _ palette.Palette = whiteToRed{}
