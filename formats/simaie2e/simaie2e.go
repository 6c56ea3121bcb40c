// Package simaie2e reads and writes SimAI's EndToEnd.csv, the iteration
// report SimAI's backends write: a summary (exposed communication per
// group type, bubble, compute, total) and one row per layer. Its column
// names are listed once here, for the reader and the writer alike.
package simaie2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// File is an iteration report in EndToEnd.csv's terms (µs): read from
// SimAI's file, or made from a fabricsim iteration so that the two compare
// column by column.
type File struct {
	Source string
	// Summary holds SimAI's summary columns (SummaryNames), NaN where the
	// file does not give them (the older layout has only the totals).
	Summary [9]float64
	Layers  []Layer
}

// SummaryNames name File.Summary's columns, as SimAI's header does.
var SummaryNames = [9]string{"Expose DP comm", "Expose DP_EP comm", "Expose TP comm", "Expose_EP_comm", "Expose_PP_comm",
	"bubble time", "total comp", "total exposed comm", "Total time"}

// Layer is one layer row: its name and the values of LayerNames (µs;
// algbw and busbw in SimAI's unit, bytes/s / 2^30; NaN: none).
type Layer struct {
	Name   string
	Values [15]float64
}

// LayerNames name the per-layer columns after layer_name and the run.
var LayerNames = [15]string{"fwd compute", "wg compute", "ig compute", "fwd exposed comm", "wg exposed comm", "ig exposed comm",
	"fwd total comm", "algbw", "busbw", "wg total comm", "algbw", "busbw", "ig total comm", "algbw", "busbw"}

// SummaryHeader is the header of the summary line.
func SummaryHeader() string { return "File name, " + strings.Join(SummaryNames[:], ", ") }

// LayerHeader is the header of the per-layer rows; the second field is
// the run name.
func LayerHeader(run string) string {
	return "layer_name," + run + "," + strings.Join(LayerNames[:], ",")
}

// Write writes f in the layout of SimAI's analytical EndToEnd.csv under
// the run name run: the summary header and its values line (µs, each but
// the total with its share of the total time), then one row per layer
// (µs, no decimals; bandwidths with two, 0.00 where none).
func Write(w io.Writer, run string, f *File) error {
	clean := strings.NewReplacer(",", "_", "\n", " ") // a name is one CSV field
	run = clean.Replace(run)
	total := f.Summary[8]
	vals := []string{run}
	for i, v := range f.Summary {
		s := value(v)
		if i < len(f.Summary)-1 {
			s += " (" + share(v, total) + ")"
		}
		vals = append(vals, s)
	}
	if _, err := fmt.Fprintf(w, "%s\n%s\n%s\n", SummaryHeader(), strings.Join(vals, ", "), LayerHeader(run)); err != nil {
		return err
	}
	for _, l := range f.Layers {
		row := []string{clean.Replace(l.Name), run}
		for i, v := range l.Values {
			if LayerNames[i] == "algbw" || LayerNames[i] == "busbw" {
				if math.IsNaN(v) {
					row = append(row, "0.00")
				} else {
					row = append(row, strconv.FormatFloat(v, 'f', 2, 64))
				}
				continue
			}
			row = append(row, value(v))
		}
		if _, err := fmt.Fprintln(w, strings.Join(row, ",")); err != nil {
			return err
		}
	}
	return nil
}

// value formats a µs value as SimAI does (no decimals).
func value(us float64) string {
	if math.IsNaN(us) || math.IsInf(us, 0) {
		return "NaN or Inf"
	}
	return strconv.FormatFloat(us, 'f', 0, 64)
}

func share(v, of float64) string {
	if of <= 0 {
		return "-"
	}
	return strconv.FormatFloat(100*v/of, 'f', 2, 64) + "%"
}

// IsE2E reports whether head (a file's first bytes) is SimAI's
// EndToEnd.csv: its first line starts with one of its two headers.
func IsE2E(head []byte) bool {
	return bytes.HasPrefix(head, []byte("File name,")) || bytes.HasPrefix(head, []byte("layer_name,"))
}

// Read parses SimAI's EndToEnd.csv in either layout: the summary
// header and values line followed by per-layer rows (analytical), or
// per-layer rows (with a trailing "workload finished at" column) closed
// by a SUM row and a "total exposed comm,…,total comp,…,total time,…"
// line (packet-level backends). Errors name the line and field.
func Read(r io.Reader, name string) (*File, error) {
	e := &File{Source: name}
	for i := range e.Summary {
		e.Summary[i] = math.NaN()
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	fail := func(field, format string, a ...any) error {
		if field != "" {
			field = ", field " + field
		}
		return fmt.Errorf("%s: line %d%s: %s", name, line, field, fmt.Sprintf(format, a...))
	}
	num := func(field, s string) (float64, error) {
		s = strings.TrimSpace(s)
		if v, pct, ok := strings.Cut(s, " ("); ok { // "123 (4.56%)"
			// The share must be a number too: "(abc%)" is no SimAI output.
			p, okp := strings.CutSuffix(pct, "%)")
			if x, err := strconv.ParseFloat(p, 64); !okp || err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
				return 0, fail(field, "%q: the share in parentheses is not a percentage", clip(s))
			}
			s = v
		}
		if s == "NaN or Inf" || s == "nan" || s == "-nan" { // what SimAI prints for no value
			return math.NaN(), nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || f < 0 {
			return 0, fail(field, "%q is not a non-negative number", clip(s))
		}
		if f > maxValue {
			return 0, fail(field, "%q is beyond %g (µs: more than int64 nanoseconds hold)", clip(s), maxValue)
		}
		return f, nil
	}
	// Total time divides every ratio: zero is no iteration.
	total := func(field string, v float64) error {
		if v == 0 {
			return fail(field, "0: an iteration takes time")
		}
		return nil
	}
	var summaryNext, inLayers, sawHeader bool
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		f := strings.Split(text, ",")
		switch {
		case summaryNext:
			summaryNext = false
			if len(f) != 10 {
				return nil, fail("", "the summary values have %d fields, want 10 (%s)", len(f), SummaryHeader())
			}
			for i := range e.Summary {
				v, err := num(SummaryNames[i], f[i+1])
				if err != nil {
					return nil, err
				}
				if i == len(e.Summary)-1 {
					if err := total(SummaryNames[i], v); err != nil {
						return nil, err
					}
				}
				e.Summary[i] = v
			}
		case strings.HasPrefix(text, "File name,"):
			for i, k := range f[1:] {
				if i >= len(SummaryNames) || strings.TrimSpace(k) != SummaryNames[i] {
					return nil, fail("", "summary header %q, want %q", text, SummaryHeader())
				}
			}
			if len(f) != 10 {
				return nil, fail("", "summary header has %d fields, want 10", len(f))
			}
			summaryNext, sawHeader = true, true
		case strings.HasPrefix(text, "layer_name,"):
			if len(f) < 17 {
				return nil, fail("", "layer header has %d fields, want at least 17", len(f))
			}
			for i, k := range LayerNames {
				if strings.TrimSpace(f[i+2]) != k {
					return nil, fail("", "layer header column %d is %q, want %q", i+3, f[i+2], k)
				}
			}
			inLayers, sawHeader = true, true
		case strings.HasPrefix(text, "total exposed comm,"):
			if len(f) != 6 || f[2] != "total comp" || f[4] != "total time" {
				return nil, fail("", "want total exposed comm,V,total comp,V,total time,V")
			}
			for i, at := range [3]int{7, 6, 8} {
				v, err := num(f[2*i], f[2*i+1])
				if err != nil {
					return nil, err
				}
				if at == 8 {
					if err := total(f[2*i], v); err != nil {
						return nil, err
					}
				}
				if math.IsNaN(e.Summary[at]) {
					e.Summary[at] = v
				}
			}
		case inLayers:
			if len(f) < 17 {
				return nil, fail("", "layer row has %d fields, want at least 17", len(f))
			}
			if f[0] == "SUM" {
				continue
			}
			l := Layer{Name: f[0]}
			for i, k := range LayerNames {
				if strings.TrimSpace(f[i+2]) == "NONE" {
					l.Values[i] = math.NaN()
					continue
				}
				v, err := num(k, f[i+2])
				if err != nil {
					return nil, err
				}
				l.Values[i] = v
			}
			e.Layers = append(e.Layers, l)
		default:
			return nil, fail("", "not a line of SimAI's EndToEnd.csv: %q", clip(text))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: line %d: %v", name, line+1, err)
	}
	if !sawHeader {
		return nil, fmt.Errorf("%s: no EndToEnd.csv header (File name,… or layer_name,…)", name)
	}
	if summaryNext {
		return nil, fail("", "the summary header has no values line after it")
	}
	return e, nil
}

// maxValue bounds EndToEnd.csv's values (µs, GB/s): the longest time
// int64 nanoseconds hold. 1e308 is no measurement, and overflows to
// infinity on the way to nanoseconds.
const maxValue = math.MaxInt64 / 1e3

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}
