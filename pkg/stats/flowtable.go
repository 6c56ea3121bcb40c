package stats

import (
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/formats/trace"
)

// FlowRow is one row of the per-flow table: the input's name, every
// trace column, and the flow's slowdown (fct / ideal fct; NaN for delay
// nodes and flows without an ideal FCT).
type FlowRow struct {
	Source string `parquet:"source,dict"`
	trace.Row
	Slowdown float64 `parquet:"slowdown"`
}

// flowColumns are the trace's columns in order, from trace.Row's tags,
// so the table follows the trace schema.
var flowColumns = func() (cols []struct {
	name  string
	index int
}) {
	t := reflect.TypeFor[trace.Row]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("parquet"), ",")
		if name != "" && name != "-" {
			cols = append(cols, struct {
				name  string
				index int
			}{name, i})
		}
	}
	return cols
}()

// FlowTableWriter streams the per-flow table as CSV or Parquet: rows go
// out as they are read, so memory does not grow with the trace.
type FlowTableWriter struct {
	w      io.Writer
	csv    bool
	buf    []byte
	pw     *parquet.GenericWriter[FlowRow]
	batch  []FlowRow
	header bool
}

// NewFlowTableWriter writes format "csv" or "parquet" to w.
func NewFlowTableWriter(w io.Writer, format string) *FlowTableWriter {
	t := &FlowTableWriter{w: w, csv: format == "csv"}
	if !t.csv {
		schema := parquet.NewSchema("schema", parquet.SchemaOf(FlowRow{}))
		t.pw = parquet.NewGenericWriter[FlowRow](w, schema, parquet.Compression(&zstd.Codec{Level: zstd.SpeedFastest}))
		t.batch = make([]FlowRow, 0, 4096)
	}
	return t
}

// Slowdown is fct / ideal fct, NaN for delay nodes and a zero ideal.
func Slowdown(r *trace.Row) float64 {
	if r.ConnType == stream.ConnDelay || r.IdealFctNs <= 0 {
		return math.NaN()
	}
	return float64(r.FctNs) / float64(r.IdealFctNs)
}

// Add writes every row of in.
func (t *FlowTableWriter) Add(in *Input) error {
	source := in.Name
	if n := in.Partial(); n > 0 {
		// Every row of a partial trace says so (--allow-partial).
		source = fmt.Sprintf("%s [PARTIAL: %d flows never finished]", in.Name, n)
	}
	return in.Each(func(r *trace.Row) error { return t.write(source, r) })
}

func (t *FlowTableWriter) write(source string, r *trace.Row) error {
	if !t.csv {
		t.batch = append(t.batch, FlowRow{Source: source, Row: *r, Slowdown: Slowdown(r)})
		if len(t.batch) == cap(t.batch) {
			return t.flushBatch()
		}
		return nil
	}
	b := t.buf[:0]
	if !t.header {
		t.header = true
		b = append(b, "source"...)
		for _, c := range flowColumns {
			b = append(append(b, ','), c.name...)
		}
		b = append(b, ",slowdown\n"...)
	}
	b = appendCSVString(b, source)
	v := reflect.ValueOf(r).Elem()
	for _, c := range flowColumns {
		b = append(b, ',')
		f := v.Field(c.index)
		if f.Kind() == reflect.String {
			b = appendCSVString(b, f.String())
		} else {
			b = strconv.AppendInt(b, f.Int(), 10)
		}
	}
	b = append(b, ',')
	if s := Slowdown(r); !math.IsNaN(s) {
		b = strconv.AppendFloat(b, s, 'g', -1, 64)
	}
	b = append(b, '\n')
	t.buf = b
	_, err := t.w.Write(b)
	return err
}

// appendCSVString quotes s when CSV needs it (RFC 4180).
func appendCSVString(b []byte, s string) []byte {
	if !strings.ContainsAny(s, ",\"\r\n") {
		return append(b, s...)
	}
	return append(append(append(b, '"'), strings.ReplaceAll(s, `"`, `""`)...), '"')
}

func (t *FlowTableWriter) flushBatch() error {
	if _, err := t.pw.Write(t.batch); err != nil {
		return fmt.Errorf("parquet: %v", err)
	}
	t.batch = t.batch[:0]
	return nil
}

// Close finishes the table (the Parquet footer, with meta as its
// key/value metadata, set last because whether an input was partial is
// known once all are read; a CSV header when there were no rows).
func (t *FlowTableWriter) Close(meta map[string]string) error {
	if t.csv {
		if !t.header {
			t.header = true
			names := []string{"source"}
			for _, c := range flowColumns {
				names = append(names, c.name)
			}
			_, err := io.WriteString(t.w, strings.Join(append(names, "slowdown"), ",")+"\n")
			return err
		}
		return nil
	}
	if err := t.flushBatch(); err != nil {
		return err
	}
	eachKeyValue(meta, t.pw.SetKeyValueMetadata)
	if err := t.pw.Close(); err != nil {
		return fmt.Errorf("parquet: %v", err)
	}
	return nil
}
