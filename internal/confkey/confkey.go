// Package confkey describes the keys of a SimAI.conf-style configuration:
// each key's type, unit, range and default in one table row, so that the
// parser, the validation, the defaults and the documentation
// (flowsim-packet --keys) all read the same row.
package confkey

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/fabricsim/fabricsim/pkg/units"
)

// Key documents one key. Range is an interval in the key's unit, as
// "(0,1]", "[0,inf)" or "[64,1048576]"; empty when the key is not a
// number. Default is the value as a file writes it, empty when the key
// has none (it is off unless given).
type Key struct {
	Name    string
	Type    string // flag, integer, number, rate, time, choice, map, list, ignored
	Unit    string
	Range   string
	Default string
	Doc     string
}

// Interval is a parsed Range.
type Interval struct {
	Lo, Hi         float64
	LoOpen, HiOpen bool
	text           string
}

// ParseInterval reads "(a,b]"-style text; either end may be inf. It
// panics on a malformed table entry: a programming error, caught by the
// tables' tests.
func ParseInterval(s string) Interval {
	if s == "" {
		return Interval{Lo: math.Inf(-1), Hi: math.Inf(1)}
	}
	if len(s) < 5 || !strings.ContainsRune("([", rune(s[0])) || !strings.ContainsRune(")]", rune(s[len(s)-1])) {
		panic(fmt.Sprintf("confkey: range %q", s))
	}
	lo, hi, ok := strings.Cut(s[1:len(s)-1], ",")
	if !ok {
		panic(fmt.Sprintf("confkey: range %q", s))
	}
	end := func(t string) float64 {
		x, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
		if err != nil {
			panic(fmt.Sprintf("confkey: range %q: %v", s, err))
		}
		return x
	}
	return Interval{Lo: end(lo), Hi: end(hi), LoOpen: s[0] == '(', HiOpen: s[len(s)-1] == ')', text: s}
}

// Check says why x is outside the interval (unit names it), nil if inside.
func (r Interval) Check(x float64, unit string) error {
	if math.IsNaN(x) || x < r.Lo || x > r.Hi || (r.LoOpen && x == r.Lo) || (r.HiOpen && x == r.Hi) {
		if unit != "" {
			unit = " " + unit
		}
		return fmt.Errorf("%g%s is outside %s", x, unit, r.text)
	}
	return nil
}

// timeUnits are the units a time row may be kept in, in ps.
var timeUnits = map[string]float64{"ns": 1e3, "us": 1e6}

// Value reads one value of a flag, integer, number, time or rate row, in
// the row's unit, and checks it against the row's range: every table
// reads a spelling the same way. A flag is 0 or 1; an integer a whole
// number; a time a plain number in the row's unit (SimAI's µs) or one
// with a unit ("5us", "1ms"); a rate a plain number of bit/s (ns-3's
// DataRate) or one with a unit ("50Mb/s"). Other types are not values.
func (k *Key) Value(v string) (float64, error) {
	var x float64
	var err error
	switch k.Type {
	case "time":
		x, err = k.time(v)
	case "rate":
		x, err = units.ParseNumber(v)
		if err != nil {
			x, err = units.ParseBandwidth(v)
		}
	case "flag", "integer", "number":
		x, err = units.ParseNumber(v) // strictly: "1_0" is not 10 here

	default:
		panic(fmt.Sprintf("confkey: %s: a %s row has no value", k.Name, k.Type))
	}
	switch {
	case err != nil:
		return 0, err
	case math.IsNaN(x) || math.IsInf(x, 0):
		return 0, fmt.Errorf("%q is not a number", v)
	case k.Type == "flag" && x != 0 && x != 1:
		return 0, fmt.Errorf("%q: expected 0 or 1", v)
	case k.Type == "integer" && x != math.Trunc(x): // 1.5 read as 1 would be nonsense accepted
		return 0, fmt.Errorf("%g is not a whole number", x)
	}
	return x, ParseInterval(k.Range).Check(x, k.Unit)
}

// time reads a time row's value in its unit.
func (k *Key) time(v string) (float64, error) {
	per, ok := timeUnits[k.Unit]
	if !ok {
		panic(fmt.Sprintf("confkey: %s: time unit %q", k.Name, k.Unit))
	}
	if x, err := units.ParseNumber(v); err == nil {
		return x, nil
	}
	ps, err := units.ParseDuration(v)
	return float64(ps) / per, err
}

// PsOf is a time in unit ("us" or "ns") in ps, to the nearest: the one
// rounding rule of every time key. Rows' ranges keep it within int64.
func PsOf(x float64, unit string) int64 {
	per, ok := timeUnits[unit]
	if !ok {
		panic(fmt.Sprintf("confkey: time unit %q", unit))
	}
	return int64(math.Round(x * per))
}

// Table formats keys for people: one line each, the columns aligned.
func Table(keys []Key) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "KEY\tTYPE\tRANGE\tDEFAULT\tMEANING")
	for _, k := range keys {
		def := short(k.Default)
		if def == "" {
			def = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", k.Name, typeUnit(k), k.Range, def, k.Doc)
	}
	w.Flush()
	return b.String()
}

func typeUnit(k Key) string {
	if k.Unit == "" {
		return k.Type
	}
	return k.Type + " (" + k.Unit + ")"
}

// short cuts a long default (a rate map) to its start.
func short(s string) string {
	if len(s) <= 24 {
		return s
	}
	return s[:20] + " ..."
}
