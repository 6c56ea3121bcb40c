package plot

import (
	"math"
	"strconv"

	"github.com/fabricsim/fabricsim/pkg/units"
	gplot "gonum.org/v1/plot"
)

// Every plot's axes go through here, so that each shows its quantity in
// the unit its data calls for (units.TimeScale, units.SizeScale) and says
// which in its title: data stay in raw units (ns, bytes) and only the
// tick labels are scaled.

// humanTicks are gonum's default ticks computed on the scaled values, so
// they fall on round numbers of the unit, labelled without trailing
// zeros. gonum aims at three labels, which leaves a plateau axis hard to
// read, and takes no count: with fewer than four, ticks at a round step
// for about five labels are used instead.
type humanTicks struct{ div float64 }

// Ticks implements gplot.Ticker.
func (h humanTicks) Ticks(lo, hi float64) []gplot.Tick {
	div := h.div
	if div == 0 {
		div = 1
	}
	t := gplot.DefaultTicks{}.Ticks(lo/div, hi/div)
	labelled := 0
	for _, x := range t {
		if x.Label != "" {
			labelled++
		}
	}
	if labelled < 4 {
		t = roundTicks(lo/div, hi/div, 5)
	}
	for i := range t {
		if t[i].Label != "" {
			t[i].Label = tickLabel(t[i].Value)
		}
		t[i].Value *= div
	}
	return t
}

// roundTicks labels multiples of the step of 1, 2, 2.5 or 5 times a power
// of ten that gives at least want of them over [lo, hi], with a minor
// tick between each two.
func roundTicks(lo, hi float64, want int) []gplot.Tick {
	if !(hi > lo) {
		return nil
	}
	mag := math.Pow(10, math.Floor(math.Log10((hi-lo)/float64(want))))
	step := 10 * mag
	for _, m := range []float64{5, 2.5, 2, 1} {
		if math.Floor(hi/(m*mag))-math.Ceil(lo/(m*mag))+1 >= float64(want) {
			step = m * mag
			break
		}
	}
	var t []gplot.Tick
	for k := math.Ceil(lo/step*2) / 2; k*step <= hi; k += 0.5 {
		v := k * step
		if k == math.Trunc(k) {
			t = append(t, gplot.Tick{Value: v, Label: "x"}) // labelled by the caller
		} else {
			t = append(t, gplot.Tick{Value: v})
		}
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
func timeAxis(ax *gplot.Axis, quantity string, maxNs float64) units.Scale {
	s := units.TimeScale(maxNs)
	ax.Label.Text = quantity + " (" + s.Unit + ")"
	ax.Tick.Marker = humanTicks{s.Div}
	return s
}

// sizeAxis is timeAxis for sizes in bytes.
func sizeAxis(ax *gplot.Axis, quantity string, maxBytes float64) units.Scale {
	s := units.SizeScale(maxBytes)
	ax.Label.Text = quantity + " (" + s.Unit + ")"
	ax.Tick.Marker = humanTicks{s.Div}
	return s
}

// plainAxis titles ax with its quantity and unit (unit "" for a ratio)
// and labels its ticks plainly.
func plainAxis(ax *gplot.Axis, quantity, unit string) {
	ax.Label.Text = quantity
	if unit != "" {
		ax.Label.Text += " (" + unit + ")"
	}
	ax.Tick.Marker = humanTicks{1}
}

// fitAxis sets ax's range to the values with a margin, from 0 when they
// start near it, else from just below the smallest so that differences
// of a few percent show (a bar chart then says where its axis starts).
func fitAxis(ax *gplot.Axis, lo, hi float64) (fromZero bool) {
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

// intTicks label whole numbers only (ranks, nodes): multiples of 1, 2 or
// 5 times a power of ten, at most eight of them labelled; gonum's ticks
// fall on halves when the range ends on them.
type intTicks struct{}

// Ticks implements gplot.Ticker.
func (intTicks) Ticks(lo, hi float64) []gplot.Tick {
	step := 1.0
	for i := 0; (hi-lo)/step > 8; i++ {
		step *= []float64{2, 2.5, 2}[i%3] // 1, 2, 5, 10, 20, 50, ...
	}
	var t []gplot.Tick
	for v := math.Ceil(lo/step)*step + 0; v <= hi; v += step { // + 0: not "-0"
		t = append(t, gplot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', 0, 64)})
	}
	return t
}

// logTicks are gonum's log ticks with, on an axis of under three decades,
// the minor ticks at 2 and 5 x 10^k labelled too: a slowdown CDF from 1
// to 20 was labelled "1" and "10" alone, so 3 and 5 could not be read.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []gplot.Tick {
	ts := gplot.LogTicks{Prec: -1}.Ticks(lo, hi)
	if lo <= 0 || hi/lo >= 1000 {
		return ts
	}
	for i, t := range ts {
		if t.Label != "" || t.Value <= 0 {
			continue
		}
		if m := t.Value / math.Pow(10, math.Floor(math.Log10(t.Value)+1e-9)); math.Abs(m-2) < 1e-6 || math.Abs(m-5) < 1e-6 {
			ts[i].Label = tickLabel(t.Value)
		}
	}
	return ts
}
