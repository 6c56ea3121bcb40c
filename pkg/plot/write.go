// Package plot draws what pkg/stats reports (flow slowdown CDFs, flows in
// flight, an iteration per rank, link loads, bus bandwidth against size,
// latency curves, sweeps) with gonum's plot, and writes the panels as
// one PNG or SVG image. It is kept apart from pkg/stats so that the
// analysis, and everything that only reads its numbers, needs no gonum.
package plot

import (
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Format returns "png" or "svg" from a file name, or an error.
func Format(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".png", ".svg":
		return ext[1:], nil
	}
	return "", fmt.Errorf("%s: plot files are .png or .svg", path)
}

// Write draws plots one above the other into one PNG or SVG image,
// each panel as tall as heights says (timelines of many ranks need more).
func Write(w io.Writer, format string, plots []*gplot.Plot, heights []vg.Length) error {
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
func drawPanel(c draw.Canvas, p *gplot.Plot) {
	leg := p.Legend
	w := leg.Rectangle(c).Size().X
	if !leg.Top || leg.Left || w == 0 {
		p.Draw(c)
		return
	}
	gap := vg.Points(8)
	p.Legend = gplot.NewLegend()
	p.Draw(draw.Crop(c, 0, -(w + gap), 0, 0))
	p.Legend = leg
	side := c
	side.Min.X = c.Max.X - w
	side.Max.Y -= p.Title.TextStyle.Height(p.Title.Text) + p.Title.Padding // level with the data
	leg.Left = true
	leg.Draw(side)
}
