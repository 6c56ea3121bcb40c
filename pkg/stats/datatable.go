package stats

import (
	"encoding/csv"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// Table names for CSV and Parquet output.
const (
	TableCollectives = "collectives"
	TableSummary     = "summary"
	TableBuckets     = "buckets"
	TableFlows       = "flows"  // one row per flow, streamed (FlowTableWriter)
	TableTotals      = "totals" // a comparison's one row: flows matched, latency error, bytes
)

// DataTable is one table for machines (CSV, Parquet): a source column (the
// input file) followed by the fields of the report rows, named as in the
// JSON output, in raw units (ns, bytes, GB/s).
type DataTable struct {
	Names []string
	kinds []reflect.Kind // String, Int64, Int32, Float64, Bool (i 0 or 1)
	rows  [][]cell
}

type cell struct {
	s string
	i int64
	f float64
}

// newDataTable builds a table from report rows via their json tags, so
// CSV, Parquet and JSON can never disagree on a column's name.
func newDataTable[T any](source string, rows []T) *DataTable {
	t := reflect.TypeFor[T]()
	dt := &DataTable{Names: []string{"source"}, kinds: []reflect.Kind{reflect.String}}
	var fields [][]int
	// Visible fields, so that those of an embedded struct (CollKey) come
	// in its place, as JSON flattens them; the embedded field itself is
	// skipped.
	for _, f := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous || name == "" || name == "-" || !f.IsExported() {
			continue
		}
		k := f.Type.Kind()
		switch k {
		case reflect.Int, reflect.Int64:
			k = reflect.Int64
		case reflect.Int32, reflect.String, reflect.Float64, reflect.Bool:
		default:
			continue // nested values are JSON-only
		}
		fields = append(fields, f.Index)
		dt.Names = append(dt.Names, name)
		dt.kinds = append(dt.kinds, k)
	}
	for _, r := range rows {
		v := reflect.ValueOf(r)
		row := make([]cell, 0, len(dt.Names))
		row = append(row, cell{s: source})
		for j, i := range fields {
			fv := v.FieldByIndex(i)
			switch dt.kinds[j+1] {
			case reflect.String:
				row = append(row, cell{s: fv.String()})
			case reflect.Int64, reflect.Int32:
				row = append(row, cell{i: fv.Int()})
			case reflect.Bool:
				c := cell{}
				if fv.Bool() {
					c.i = 1
				}
				row = append(row, c)
			case reflect.Float64:
				row = append(row, cell{f: fv.Float()})
			}
		}
		dt.rows = append(dt.rows, row)
	}
	return dt
}

// Len is the number of rows.
func (dt *DataTable) Len() int { return len(dt.rows) }

// Drop removes the named columns the table has.
func (dt *DataTable) Drop(names ...string) {
	for j := len(dt.Names) - 1; j >= 0; j-- {
		if !slices.Contains(names, dt.Names[j]) {
			continue
		}
		dt.Names = slices.Delete(dt.Names, j, j+1)
		dt.kinds = slices.Delete(dt.kinds, j, j+1)
		for i := range dt.rows {
			dt.rows[i] = slices.Delete(dt.rows[i], j, j+1)
		}
	}
}

// AddBool appends a column holding v in every row: BOOLEAN in Parquet,
// true or false in CSV.
func (dt *DataTable) AddBool(name string, v bool) error {
	if slices.Contains(dt.Names, name) {
		return fmt.Errorf("the table already has a column %s", name)
	}
	c := cell{}
	if v {
		c.i = 1
	}
	dt.addColumn(name, reflect.Bool, slices.Repeat([]cell{c}, len(dt.rows)))
	return nil
}

// Append adds the rows of other, which must have the same columns.
func (dt *DataTable) Append(other *DataTable) { dt.rows = append(dt.rows, other.rows...) }

// DataTable returns the run's collectives, summary or buckets table,
// without PartialColumns: as the tables were before partial traces.
func (run *Run) DataTable(name string) (*DataTable, error) {
	dt, err := run.PartialDataTable(name)
	if err == nil {
		dt.Drop(PartialColumns...)
	}
	return dt, err
}

// PartialDataTable is DataTable with PartialColumns, which say which
// collectives a partial run's stop cut (fctstats --allow-partial).
func (run *Run) PartialDataTable(name string) (*DataTable, error) {
	switch name {
	case TableCollectives:
		return newDataTable(run.Source, run.Collectives), nil
	case TableSummary:
		return newDataTable(run.Source, run.Summary), nil
	case TableBuckets:
		return newDataTable(run.Source, run.Flows), nil
	}
	return nil, fmt.Errorf("unknown table %q (collectives, summary or buckets)", name)
}

// DataTable returns the comparison's collectives or summary table; its
// source column holds "A vs B".
func (c *Comparison) DataTable(name string) (*DataTable, error) {
	src := c.A + " vs " + c.B
	switch name {
	case TableCollectives:
		return newDataTable(src, c.Collectives), nil
	case TableSummary:
		return newDataTable(src, c.Summary), nil
	case TableTotals:
		return newDataTable(src, []Comparison{*c}), nil
	}
	return nil, fmt.Errorf("a comparison has the tables collectives, summary and totals, not %q", name)
}

// WriteCSV writes the table with a header row. NaN (no value) is an empty
// field, which pandas reads as NaN.
func (dt *DataTable) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(dt.Names); err != nil {
		return err
	}
	rec := make([]string, len(dt.Names))
	for _, r := range dt.rows {
		for j, c := range r {
			switch dt.kinds[j] {
			case reflect.String:
				rec[j] = c.s
			case reflect.Float64:
				rec[j] = ""
				if !math.IsNaN(c.f) && !math.IsInf(c.f, 0) {
					rec[j] = strconv.FormatFloat(c.f, 'g', -1, 64)
				}
			case reflect.Bool:
				rec[j] = strconv.FormatBool(c.i != 0)
			default:
				rec[j] = strconv.FormatInt(c.i, 10)
			}
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// eachKeyValue calls set on meta's pairs in key order, so that a
// table's bytes do not depend on map order.
func eachKeyValue(meta map[string]string, set func(k, v string)) {
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		set(k, meta[k])
	}
}

// WriteParquet writes the table as Parquet with zstd compression, string
// columns dictionary-encoded, every column REQUIRED (a missing float is
// NaN), the root called "schema" as pyarrow names it, and meta as the
// file's key/value metadata (in key order).
func (dt *DataTable) WriteParquet(w io.Writer, meta map[string]string) error {
	fields := make([]reflect.StructField, len(dt.Names))
	for j, name := range dt.Names {
		tag := name
		var typ reflect.Type
		switch dt.kinds[j] {
		case reflect.String:
			typ, tag = reflect.TypeFor[string](), name+",dict"
		case reflect.Int64:
			typ = reflect.TypeFor[int64]()
		case reflect.Int32:
			typ = reflect.TypeFor[int32]()
		case reflect.Bool:
			typ = reflect.TypeFor[bool]()
		default:
			typ = reflect.TypeFor[float64]()
		}
		fields[j] = reflect.StructField{Name: fmt.Sprintf("F%d", j), Type: typ, Tag: reflect.StructTag(`parquet:"` + tag + `"`)}
	}
	rowType := reflect.StructOf(fields)
	model := reflect.New(rowType).Elem()
	schema := parquet.NewSchema("schema", parquet.SchemaOf(model.Interface()))
	opts := []parquet.WriterOption{schema, parquet.Compression(&zstd.Codec{Level: zstd.SpeedDefault})}
	eachKeyValue(meta, func(k, v string) { opts = append(opts, parquet.KeyValueMetadata(k, v)) })
	pw := parquet.NewWriter(w, opts...)
	for _, r := range dt.rows {
		for j, c := range r {
			f := model.Field(j)
			switch dt.kinds[j] {
			case reflect.String:
				f.SetString(c.s)
			case reflect.Float64:
				f.SetFloat(c.f)
			case reflect.Bool:
				f.SetBool(c.i != 0)
			default:
				f.SetInt(c.i)
			}
		}
		if err := pw.Write(model.Interface()); err != nil {
			return fmt.Errorf("parquet: %v", err)
		}
	}
	if err := pw.Close(); err != nil {
		return fmt.Errorf("parquet: %v", err)
	}
	return nil
}
