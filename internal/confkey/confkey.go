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
