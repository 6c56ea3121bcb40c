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
)

// Sweeps: each point of an experiment writes a CSV table (fctstats
// --format csv, with the point's parameters as --param columns); the
// gather step concatenates them into one table (pkg/plot's Sweep plots
// results against a parameter).

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

// addColumn appends a column of the given kind, one cell per row.
func (dt *DataTable) addColumn(name string, k reflect.Kind, cells []cell) {
	dt.Names = append(dt.Names, name)
	dt.kinds = append(dt.kinds, k)
	for i := range dt.rows {
		dt.rows[i] = append(dt.rows[i], cells[i])
	}
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
		if len(raw) > 0 && allBool(raw, j) {
			k = reflect.Bool // fctstats' partial column
		}
		for _, r := range raw {
			if k == reflect.Bool {
				break
			}
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
			case reflect.Bool:
				if v == "true" {
					row[j].i = 1
				}
			default:
				row[j].s = v
			}
		}
		dt.rows = append(dt.rows, row)
	}
	return dt, nil
}

// AnyTrue tells whether the table has a boolean column name with a true
// in some row.
func (dt *DataTable) AnyTrue(name string) bool {
	j := slices.Index(dt.Names, name)
	if j < 0 || dt.kinds[j] != reflect.Bool {
		return false
	}
	for _, r := range dt.rows {
		if r[j].i != 0 {
			return true
		}
	}
	return false
}

// allBool tells whether column j holds true or false in every row.
func allBool(raw [][]string, j int) bool {
	for _, r := range raw {
		if r[j] != "true" && r[j] != "false" {
			return false
		}
	}
	return true
}

// Column returns a numeric column's values (integers as float64, empty
// cells as NaN); an error names the table's columns, or says the column
// is text.
func (dt *DataTable) Column(name string) ([]float64, error) {
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

// IsText tells whether the table has a text column name (a routing, a
// workload) or a boolean one (partial): one that Strings gives, and
// plots take as categories.
func (dt *DataTable) IsText(name string) bool {
	j := slices.Index(dt.Names, name)
	return j >= 0 && (dt.kinds[j] == reflect.String || dt.kinds[j] == reflect.Bool)
}

// Strings returns a text column's values, row by row (nil when the table
// has no text column name).
func (dt *DataTable) Strings(name string) []string {
	if !dt.IsText(name) {
		return nil
	}
	j := slices.Index(dt.Names, name)
	out := make([]string, len(dt.rows))
	for i, r := range dt.rows {
		out[i] = r[j].s
		if dt.kinds[j] == reflect.Bool {
			out[i] = strconv.FormatBool(r[j].i != 0)
		}
	}
	return out
}
