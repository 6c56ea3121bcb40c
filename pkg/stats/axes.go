package stats

import (
	"image/color"
	"math"
	"strconv"

	"github.com/fabricsim/fabricsim/pkg/units"
	"gonum.org/v1/plot"
)

// Every plot's axes go through here, so that each shows its quantity in
// the unit its data calls for (units.TimeScale, units.SizeScale) and says
// which in its title: data stay in raw units (ns, bytes) and only the
// tick labels are scaled.

// humanTicks are gonum's default ticks computed on the scaled values, so
// they fall on round numbers of the unit, labelled without trailing
// zeros; when gonum labels fewer than four, its minor ticks are labelled
// too (a plateau axis with three numbers cannot be read).
type humanTicks struct{ div float64 }

// Ticks implements plot.Ticker.
func (h humanTicks) Ticks(lo, hi float64) []plot.Tick {
	div := h.div
	if div == 0 {
		div = 1
	}
	t := plot.DefaultTicks{}.Ticks(lo/div, hi/div)
	labelled := 0
	for _, x := range t {
		if x.Label != "" {
			labelled++
		}
	}
	all := labelled < 4 && len(t) <= 12
	for i := range t {
		if t[i].Label != "" || all {
			t[i].Label = tickLabel(t[i].Value)
		}
		t[i].Value *= div
	}
	return t
}

// tickLabel writes a tick value rounded to six significant digits (the
// scaled steps are round), without trailing zeros.
func tickLabel(v float64) string {
	if v == 0 {
		return "0"
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// timeAxis titles ax "quantity (unit)" and labels its ticks in the time
// unit that suits values up to maxNs nanoseconds (data in ns).
func timeAxis(ax *plot.Axis, quantity string, maxNs float64) units.Scale {
	s := units.TimeScale(maxNs)
	ax.Label.Text = quantity + " (" + s.Unit + ")"
	ax.Tick.Marker = humanTicks{s.Div}
	return s
}

// sizeAxis is timeAxis for sizes in bytes.
func sizeAxis(ax *plot.Axis, quantity string, maxBytes float64) units.Scale {
	s := units.SizeScale(maxBytes)
	ax.Label.Text = quantity + " (" + s.Unit + ")"
	ax.Tick.Marker = humanTicks{s.Div}
	return s
}

// plainAxis titles ax with its quantity and unit (unit "" for a ratio)
// and labels its ticks plainly.
func plainAxis(ax *plot.Axis, quantity, unit string) {
	ax.Label.Text = quantity
	if unit != "" {
		ax.Label.Text += " (" + unit + ")"
	}
	ax.Tick.Marker = humanTicks{1}
}

// fitAxis sets ax's range to the values with a margin, from 0 when they
// start near it, else from just below the smallest so that differences
// of a few percent show (a bar chart then says where its axis starts).
func fitAxis(ax *plot.Axis, lo, hi float64) (fromZero bool) {
	if math.IsInf(lo, 0) || math.IsInf(hi, 0) || hi < lo {
		return true
	}
	span := hi - lo
	if lo <= 0 || span > 0.5*hi {
		ax.Min, ax.Max = min(0, lo), hi+0.08*max(span, math.Abs(hi))
		return true
	}
	pad := max(span, 0.02*hi)
	ax.Min, ax.Max = max(0, lo-0.5*pad), hi+0.5*pad
	return ax.Min == 0
}

// okabeItoAt is the i-th Okabe-Ito colour, round the palette.
func okabeItoAt(i int) color.Color { return okabeIto[i%len(okabeIto)] }

// intTicks are humanTicks on whole numbers only (ranks, nodes).
type intTicks struct{}

// Ticks implements plot.Ticker.
func (intTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for _, t := range (humanTicks{1}).Ticks(lo, hi) {
		if t.Value == math.Trunc(t.Value) {
			out = append(out, t)
		}
	}
	return out
}
