package stats

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Sweeps: each point of an experiment writes a CSV table (fctstats
// --format csv, with the point's parameters as --param columns); the
// gather step concatenates them into one table and plots results
// against a parameter.

// AddParam appends a column holding value on every row: an int64 column
// when value is an integer, float64 when a number, else a string.
func (dt *DataTable) AddParam(name, value string) error {
	if slices.Contains(dt.Names, name) {
		return fmt.Errorf("--param %s: the table already has a column %s", name, name)
	}
	k, c := parseCell(value)
	dt.Names = append(dt.Names, name)
	dt.kinds = append(dt.kinds, k)
	for i := range dt.rows {
		dt.rows[i] = append(dt.rows[i], c)
	}
	return nil
}

// parseCell types one value as AddParam does.
func parseCell(s string) (reflect.Kind, cell) {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return reflect.Int64, cell{i: i}
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return reflect.Float64, cell{f: f}
	}
	return reflect.String, cell{s: s}
}

// ConcatCSV reads CSV tables with one header (fctstats --format csv output,
// one per sweep point) and joins their rows into one table. Every file
// must have the same header. A column is int64 when every value is an
// integer, float64 when every value is a number or empty (NaN, as the CSV
// writer writes it), else a string.
func ConcatCSV(files []string, open func(string) (io.ReadCloser, error)) (*DataTable, error) {
	var names []string
	var raw [][]string
	for _, name := range files {
		f, err := open(name)
		if err != nil {
			return nil, err
		}
		cr := csv.NewReader(f)
		cr.ReuseRecord = false
		for line := 1; ; line++ {
			rec, err := cr.Read()
			if errors.Is(err, io.EOF) {
				if line == 1 {
					f.Close()
					return nil, fmt.Errorf("%s: empty, no header", name)
				}
				break
			}
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("%s: %v", name, err)
			}
			switch {
			case line > 1:
				raw = append(raw, rec)
			case names == nil:
				names = rec
			case !slices.Equal(rec, names):
				f.Close()
				return nil, fmt.Errorf("%s: line 1: columns %v, but %s has %v", name, rec, files[0], names)
			}
		}
		f.Close()
	}
	dt := &DataTable{Names: names, kinds: make([]reflect.Kind, len(names))}
	for j := range names {
		k := reflect.Int64
		for _, r := range raw {
			v := r[j]
			if _, err := strconv.ParseInt(v, 10, 64); err == nil {
				continue
			}
			if _, err := strconv.ParseFloat(v, 64); err == nil || v == "" {
				k = reflect.Float64
				continue
			}
			k = reflect.String
			break
		}
		dt.kinds[j] = k
	}
	for _, r := range raw {
		row := make([]cell, len(names))
		for j, v := range r {
			switch dt.kinds[j] {
			case reflect.Int64:
				row[j].i, _ = strconv.ParseInt(v, 10, 64)
			case reflect.Float64:
				row[j].f = math.NaN()
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					row[j].f = f
				}
			default:
				row[j].s = v
			}
		}
		dt.rows = append(dt.rows, row)
	}
	return dt, nil
}

// column returns a numeric column's values.
func (dt *DataTable) column(name string) ([]float64, error) {
	j := slices.Index(dt.Names, name)
	if j < 0 {
		return nil, fmt.Errorf("no column %q (the table has %s)", name, strings.Join(dt.Names, ", "))
	}
	if dt.kinds[j] == reflect.String {
		return nil, fmt.Errorf("column %q is not numeric", name)
	}
	out := make([]float64, len(dt.rows))
	for i, r := range dt.rows {
		out[i] = r[j].f
		if dt.kinds[j] != reflect.Float64 {
			out[i] = float64(r[j].i)
		}
	}
	return out, nil
}

// SweepPlots draws each y column against column x, one panel per y
// column, points joined in x order; x is on a log2 axis when it is
// positive and spans a factor of 8 or more (chunk and message sizes). A
// text column x (a routing, a workload) gives bars instead, one per row in
// table order, labelled with its value.
func (dt *DataTable) SweepPlots(x string, ys []string) ([]*plot.Plot, error) {
	if j := slices.Index(dt.Names, x); j >= 0 && dt.kinds[j] == reflect.String {
		return dt.barPlots(j, ys)
	}
	xs, err := dt.column(x)
	if err != nil {
		return nil, fmt.Errorf("--x: %v", err)
	}
	logX := len(xs) > 0 && slices.Min(xs) > 0 && slices.Max(xs) >= 8*slices.Min(xs)
	var plots []*plot.Plot
	for i, y := range ys {
		vs, err := dt.column(y)
		if err != nil {
			return nil, fmt.Errorf("--y: %v", err)
		}
		pts := make(plotter.XYs, 0, len(xs))
		for k := range xs {
			if !math.IsNaN(vs[k]) && !math.IsInf(vs[k], 0) {
				pts = append(pts, plotter.XY{X: xs[k], Y: vs[k]})
			}
		}
		slices.SortStableFunc(pts, func(a, b plotter.XY) int { return cmpFloat(a.X, b.X) })
		p := plot.New()
		p.Title.Text = y + " against " + x
		p.X.Label.Text, p.Y.Label.Text = x, y
		if logX {
			p.X.Scale = plot.LogScale{}
			p.X.Tick.Marker = sizeTicks{}
		}
		p.Add(plotter.NewGrid())
		if len(pts) > 0 {
			l, sc, err := plotter.NewLinePoints(pts)
			if err != nil {
				return nil, fmt.Errorf("--y %s: %v", y, err)
			}
			c := seriesColor(y, i)
			l.Color, sc.Color = c, c
			l.Width = vg.Points(1.5)
			sc.Shape = draw.CircleGlyph{}
			sc.Radius = vg.Points(2.5)
			p.Add(l, sc)
		}
		plots = append(plots, p)
	}
	return plots, nil
}

// barPlots draws each y column as bars over text column j, one per row.
func (dt *DataTable) barPlots(j int, ys []string) ([]*plot.Plot, error) {
	labels := make([]string, len(dt.rows))
	for i, r := range dt.rows {
		labels[i] = r[j].s
	}
	var plots []*plot.Plot
	for i, y := range ys {
		vs, err := dt.column(y)
		if err != nil {
			return nil, fmt.Errorf("--y: %v", err)
		}
		vals := make(plotter.Values, len(vs))
		for k, v := range vs {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				vals[k] = v
			}
		}
		p := plot.New()
		p.Title.Text = y + " by " + dt.Names[j]
		p.X.Label.Text, p.Y.Label.Text = dt.Names[j], y
		p.Add(plotter.NewGrid())
		if len(vals) > 0 {
			b, err := plotter.NewBarChart(vals, vg.Points(max(8, 240/float64(len(vals)))))
			if err != nil {
				return nil, fmt.Errorf("--y %s: %v", y, err)
			}
			b.Color = seriesColor(y, i)
			b.LineStyle.Width = 0
			p.Add(b)
			p.NominalX(labels...)
			p.X.Tick.Label.Rotation = math.Pi / 6
			p.X.Tick.Label.XAlign = draw.XRight
		}
		plots = append(plots, p)
	}
	return plots, nil
}
