package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

func testMeta() Meta {
	return Meta{
		Backend: "packet",
		Params: map[string]any{
			"seed":   json.Number("9007199254740993"), // 2^53+1: survives only as json.Number
			"cc":     "dcqcn",
			"pfc":    true,
			"buffer": map[string]any{"kb": json.Number("9000")},
			"rates":  []any{json.Number("1.5"), "x"},
		},
		Topology: TopologyMeta{Family: "spectrum-x", GPUs: 128, Hash: "9f86d081884c7d65"},
	}
}

// genRows makes n rows with varied values. Strings that first appear after
// row 70,000 (beyond the first 64Ki batch) exercise dictionary growth.
func genRows(n int) []Row {
	rng := rand.New(rand.NewPCG(1, 2))
	conn := []string{"RING", "TREE", "NVLS", "NET", "DELAY"}
	ops := []string{"allreduce", "allgather", "reducescatter"}
	algs := []string{"ring", "tree", "nvls"}
	groups := []string{"TP", "DP", "PP"}
	layers := []string{"", "embedding", "attention", "mlp"}
	phases := []string{"", "fwd", "ig", "wg"}
	protos := []string{"", "LL", "Simple"}
	status := []string{"ok"}
	jobs := []string{"", "train-a"}
	rows := make([]Row, n)
	for i := range rows {
		if i == 70_000 {
			conn = append(conn, "PXN_INIT", "PXN_FINAL", "MSCCL", "A2A")
			ops = append(ops, "alltoall", "broadcast")
			algs = append(algs, "nvls-tree", "pxn")
			groups = append(groups, "EP", "DP_EP")
			layers = append(layers, "moe", "final_norm")
			phases = append(phases, "pp")
			protos = append(protos, "LL128")
			status = append(status, "failed")
			jobs = append(jobs, "train-b")
		}
		start := rng.Int64N(1 << 40)
		fct := rng.Int64N(1 << 30)
		r := Row{
			FlowID:        int64(i),
			CollectiveID:  int64(i / 1000),
			Src:           rng.Int32N(1 << 16),
			Dst:           rng.Int32N(1 << 16),
			SizeBytes:     rng.Int64N(1 << 34),
			StartNs:       start,
			EndNs:         start + fct,
			FctNs:         fct,
			IdealFctNs:    fct / 2,
			ConnType:      conn[rng.IntN(len(conn))],
			Channel:       rng.Int32N(32),
			Chunk:         rng.Int32N(1024),
			Op:            ops[rng.IntN(len(ops))],
			Algorithm:     algs[rng.IntN(len(algs))],
			GroupType:     groups[rng.IntN(len(groups))],
			CollSizeBytes: rng.Int64N(1 << 36),
			NRanks:        rng.Int32N(4096) + 1,
			Layer:         rng.Int32N(200) - 1,
			LayerName:     layers[rng.IntN(len(layers))],
			Phase:         phases[rng.IntN(len(phases))],
			Microbatch:    rng.Int32N(64) - 1,
			Stage:         rng.Int32N(16) - 1,
			Protocol:      protos[rng.IntN(len(protos))],
			PredictedNs:   rng.Int64N(1 << 40),
			Status:        status[rng.IntN(len(status))],
			Job:           jobs[i%len(jobs)],
		}
		if r.ConnType == "DELAY" {
			r.SizeBytes = 0
		}
		switch {
		case i == 1:
			r.FlowID, r.StartNs, r.Src = math.MaxInt64, math.MinInt64, math.MinInt32
			r.Layer, r.Microbatch, r.Stage, r.PredictedNs = math.MaxInt32, math.MinInt32, -1, math.MaxInt64
		case i == 2:
			r.ConnType, r.Op = "", "" // empty strings are values too
		case i >= 90_000 && i < 90_010:
			r.GroupType = fmt.Sprintf("custom-%d", i) // one-off strings late in the trace
		}
		rows[i] = r
	}
	return rows
}

func writeAll(t testing.TB, w Writer, rows []Row) {
	t.Helper()
	for i := range rows {
		if err := w.Write(&rows[i]); err != nil {
			t.Fatalf("Write row %d: %v", i, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func readBack(t testing.TB, r *Reader, err error) (Meta, []Row) {
	t.Helper()
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer r.Close()
	got, err := ReadAll(r)
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	return r.Meta(), got
}

func compareRows(t *testing.T, got, want []Row) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d rows, wrote %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("row %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

func TestRoundTrip(t *testing.T) {
	rows := genRows(100_000)
	m := testMeta()
	m.Schema = "ignored by writers"
	want := testMeta()
	want.Schema = SchemaName
	for _, ext := range []string{".arrows", ".arrow", ".parquet"} {
		t.Run(ext, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "run"+ext)
			w, err := Create(path, m)
			if err != nil {
				t.Fatal(err)
			}
			writeAll(t, w, rows)

			c, _ := ContainerForPath(path)
			r, err := Open(path)
			gm, got := readBack(t, r, err)
			if !reflect.DeepEqual(gm, want) {
				t.Errorf("meta:\n got %#v\nwant %#v", gm, want)
			}
			if r.Container() != c {
				t.Errorf("Open: container %v, want %v", r.Container(), c)
			}
			compareRows(t, got, rows)

			// The same bytes through NewReader, as from stdin.
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			r, err = NewReader(struct{ io.Reader }{bytes.NewReader(data)}, "<stdin>")
			gm, got = readBack(t, r, err)
			if !reflect.DeepEqual(gm, want) {
				t.Errorf("stdin meta: got %#v", gm)
			}
			if r.Container() != c {
				t.Errorf("NewReader: container %v, want %v", r.Container(), c)
			}
			compareRows(t, got, rows)
		})
	}
}

// v1FixtureRows are the rows of testdata/flows-v1.*, written by the v1
// writer (17 columns, schema fabricsim.flows/v1) with testMeta().
func v1FixtureRows() []Row {
	return []Row{
		{FlowID: 0, CollectiveID: 7, Src: 0, Dst: 1, SizeBytes: 1 << 20, StartNs: 100, EndNs: 1100, FctNs: 1000, IdealFctNs: 900, ConnType: "RING", Channel: 0, Chunk: 0, Op: "allreduce", Algorithm: "ring", GroupType: "TP", CollSizeBytes: 8 << 20, NRanks: 8},
		{FlowID: 1, CollectiveID: 7, Src: 1, Dst: 2, SizeBytes: 1 << 20, StartNs: 150, EndNs: 1300, FctNs: 1150, IdealFctNs: 900, ConnType: "RING", Channel: 1, Chunk: 3, Op: "allreduce", Algorithm: "ring", GroupType: "TP", CollSizeBytes: 8 << 20, NRanks: 8},
		{FlowID: 2, CollectiveID: -1, Src: 3, Dst: 3, SizeBytes: 0, StartNs: 1300, EndNs: 2300, FctNs: 1000, IdealFctNs: 1000, ConnType: "DELAY", Channel: -1, Chunk: -1, CollSizeBytes: 0, NRanks: 1},
	}
}

// TestReadV1 reads the v1 fixtures: the v2 fields come back with their
// defaults and Meta.Schema names v1.
func TestReadV1(t *testing.T) {
	want := v1FixtureRows()
	for i := range want {
		want[i].Layer, want[i].Microbatch, want[i].Stage, want[i].Status = -1, -1, -1, "ok"
	}
	wantMeta := testMeta()
	wantMeta.Schema = SchemaV1
	for _, name := range []string{"flows-v1.arrows", "flows-v1.arrow", "flows-v1.parquet"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", name)
			r, err := Open(path)
			gm, got := readBack(t, r, err)
			if !reflect.DeepEqual(gm, wantMeta) {
				t.Errorf("meta:\n got %#v\nwant %#v", gm, wantMeta)
			}
			compareRows(t, got, want)

			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			r, err = NewReader(struct{ io.Reader }{bytes.NewReader(data)}, "<stdin>")
			gm, got = readBack(t, r, err)
			if gm.Schema != SchemaV1 {
				t.Errorf("stdin: schema %q", gm.Schema)
			}
			compareRows(t, got, want)
		})
	}
	// A row reused across reads gets the defaults, not stale v2 values.
	r, err := Open(filepath.Join("testdata", "flows-v1.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	row := genRows(1)[0]
	if err := r.Next(&row); err != nil {
		t.Fatal(err)
	}
	if row != want[0] {
		t.Errorf("reused row:\n got %+v\nwant %+v", row, want[0])
	}
}

// TestV2ColumnsRequired: a v2 trace without one of the columns v2 added
// is an error naming the column; the same columns absent under v1
// metadata read.
func TestV2ColumnsRequired(t *testing.T) {
	for _, c := range columns[numV1Columns:] {
		err := readErr(t, "no-"+c.name+".arrows", arrowStreamOf(t, schemaVariant(dropField(c.name), nil), 3))
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("missing column %q", c.name)) {
			t.Errorf("arrow stream without %s: %v", c.name, err)
		}
		drop := pqField(c.name, func(*reflect.StructField) bool { return false })
		err = readErr(t, "no-"+c.name+".parquet", parquetVariant(t, drop, genRows(3), goodKV()))
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("missing column %q", c.name)) {
			t.Errorf("parquet without %s: %v", c.name, err)
		}
	}
	v1 := func(m map[string]string) { m[KeySchema] = SchemaV1 }
	dropV2 := func(fs []arrow.Field) []arrow.Field { return fs[:numV1Columns] }
	r, err := NewReader(bytes.NewReader(arrowStreamOf(t, schemaVariant(dropV2, v1), 3)), "v1.arrows")
	_, rows := readBack(t, r, err)
	if len(rows) != 3 || rows[2].Layer != -1 || rows[2].Status != "ok" {
		t.Errorf("v1 stream: %+v", rows)
	}
	// A v2 trace has no job column: its rows read with Job "", and the
	// other columns as written.
	v2 := func(m map[string]string) { m[KeySchema] = SchemaV2 }
	dropV3 := func(fs []arrow.Field) []arrow.Field { return fs[:numV2Columns] }
	r, err = NewReader(bytes.NewReader(arrowStreamOf(t, schemaVariant(dropV3, v2), 3)), "v2.arrows")
	m2, rows := readBack(t, r, err)
	if m2.Schema != SchemaV2 || len(rows) != 3 || rows[1].Job != "" || rows[1].Status == "" {
		t.Errorf("v2 stream: %s, %+v", m2.Schema, rows)
	}
	row := genRows(2)[1] // Job "train-a": a reused row loses it
	r, err = NewReader(bytes.NewReader(arrowStreamOf(t, schemaVariant(dropV3, v2), 3)), "v2.arrows")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Next(&row); err != nil || row.Job != "" {
		t.Errorf("v2 into a reused row: job %q, %v", row.Job, err)
	}
	// v2 columns with the wrong type are named too.
	err = readErr(t, "layer64.arrows", arrowStreamOf(t, schemaVariant(retype("layer", arrow.PrimitiveTypes.Int64), nil), 3))
	if err == nil || !strings.Contains(err.Error(), `"layer"`) {
		t.Errorf("layer as int64: %v", err)
	}
}

// TestArrowFileSpill forces the Arrow file writer's spool onto disk: from
// its first batch, after one held in memory, and never (the default).
func TestArrowFileSpill(t *testing.T) {
	defer func(v int) { spoolMemLimit = v }(spoolMemLimit)
	rows := genRows(2*batchRows + 1000)
	for _, limit := range []int{1 << 20, batchBytes(batchRows), spoolMemLimit} {
		spoolMemLimit = limit
		var buf bytes.Buffer
		w, err := NewWriter(&buf, ArrowFile, testMeta())
		if err != nil {
			t.Fatal(err)
		}
		writeAll(t, w, rows)
		r, err := NewReader(&buf, "spill.arrow")
		_, got := readBack(t, r, err)
		compareRows(t, got, rows)
	}
}

// TestArrowLayout checks the choices formats/trace.md documents: one
// dictionary per string column in the file, deltas in the stream, schema
// types and non-nullable fields.
func TestArrowLayout(t *testing.T) {
	rows := genRows(100_000)
	var file, stream bytes.Buffer
	for _, x := range []struct {
		c   Container
		buf *bytes.Buffer
	}{{ArrowFile, &file}, {ArrowStream, &stream}} {
		w, err := NewWriter(x.buf, x.c, testMeta())
		if err != nil {
			t.Fatal(err)
		}
		writeAll(t, w, rows)
	}

	fr, err := ipc.NewFileReader(bytes.NewReader(file.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	if got := fr.NumDictionaries(); got != numStr {
		t.Errorf("file has %d dictionary batches, want %d (one per string column)", got, numStr)
	}
	if got := fr.NumRecords(); got != 2 {
		t.Errorf("file has %d record batches, want 2", got)
	}
	sc := fr.Schema()
	for i, c := range columns {
		f := sc.Field(i)
		if f.Name != c.name || f.Nullable {
			t.Errorf("field %d = %s nullable=%v, want %s non-nullable", i, f.Name, f.Nullable, c.name)
		}
		want := map[colKind]string{kindInt64: "int64", kindInt32: "int32", kindString: "dictionary<values=utf8, indices=int32, ordered=false>"}[c.kind]
		if f.Type.String() != want {
			t.Errorf("field %s type %s, want %s", c.name, f.Type, want)
		}
	}

	// Walk the stream's messages: the second batch's new strings must come as
	// delta dictionary batches, not replacements.
	mr := ipc.NewMessageReader(bytes.NewReader(stream.Bytes()))
	defer mr.Release()
	var dicts, records int
	for {
		msg, err := mr.Message()
		if err != nil {
			break
		}
		switch msg.Type() {
		case ipc.MessageDictionaryBatch:
			dicts++
		case ipc.MessageRecordBatch:
			records++
		}
	}
	if records != 2 || dicts != 2*numStr {
		t.Errorf("stream has %d record and %d dictionary messages, want 2 and %d", records, dicts, 2*numStr)
	}
}

func TestParquetLayout(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Parquet, testMeta())
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, w, genRows(1000))
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	fields := f.Schema().Fields()
	if len(fields) != len(columns) {
		t.Fatalf("%d columns, want %d", len(fields), len(columns))
	}
	var names []string
	for _, fl := range fields {
		names = append(names, fl.Name())
	}
	if !reflect.DeepEqual(ColumnNames(), names) {
		t.Errorf("ColumnNames() = %v, the file has %v", ColumnNames(), names)
	}
	for i, c := range columns {
		fl := fields[i]
		if fl.Name() != c.name || !fl.Required() {
			t.Errorf("column %d = %s required=%v, want %s required", i, fl.Name(), fl.Required(), c.name)
		}
		if err := checkParquetColumn(fl, c); err != nil {
			t.Errorf("column %s: %v", c.name, err)
		}
		if c.kind == kindString {
			if _, ok := fl.Type().LogicalType().Value.(*format.StringType); !ok {
				t.Errorf("column %s logical type %v, want STRING", c.name, fl.Type().LogicalType())
			}
		}
	}
	for _, cc := range f.Metadata().RowGroups[0].Columns {
		md := cc.MetaData
		if md.Codec != format.Zstd {
			t.Errorf("column %v codec %v, want ZSTD", md.PathInSchema, md.Codec)
		}
		if strings.HasSuffix(strings.Join(md.PathInSchema, "."), "_type") || md.PathInSchema[0] == "op" || md.PathInSchema[0] == "algorithm" {
			if !hasEncoding(md.Encoding, format.RLEDictionary) {
				t.Errorf("column %v encodings %v, want RLE_DICTIONARY", md.PathInSchema, md.Encoding)
			}
		}
	}
	if v, _ := f.Lookup(KeySchema); v != SchemaName {
		t.Errorf("parquet key/value %s = %q", KeySchema, v)
	}
}

func hasEncoding(es []format.Encoding, e format.Encoding) bool {
	for _, x := range es {
		if x == e {
			return true
		}
	}
	return false
}

// TestParquetRowGroupsAndPlainStrings reads a trace of several row groups,
// and one written by another tool with plain (not dictionary) strings.
func TestParquetRowGroupsAndPlainStrings(t *testing.T) {
	defer func(v int64) { pqRowGroupRows = v }(pqRowGroupRows)
	pqRowGroupRows = 3_000
	rows := genRows(10_000)
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Parquet, testMeta())
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, w, rows)
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.RowGroups()); n != 4 {
		t.Errorf("%d row groups, want 4", n)
	}
	r, err := NewReader(&buf, "groups.parquet")
	_, got := readBack(t, r, err)
	compareRows(t, got, rows)

	r, err = NewReader(bytes.NewReader(parquetVariant(t, pqPlainReordered, rows, goodKV())), "plain.parquet")
	_, got = readBack(t, r, err)
	compareRows(t, got, rows)
}

func TestEmptyTrace(t *testing.T) {
	for _, c := range []Container{ArrowStream, ArrowFile, Parquet} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, c, testMeta())
		if err != nil {
			t.Fatal(err)
		}
		writeAll(t, w, nil)
		r, err := NewReader(&buf, "empty")
		m, rows := readBack(t, r, err)
		if len(rows) != 0 || m.Backend != "packet" {
			t.Errorf("%v: %d rows, meta %+v", c, len(rows), m)
		}
	}
}

func TestContainerForPath(t *testing.T) {
	for path, want := range map[string]Container{
		"run.arrow": ArrowFile, "x/y/run.ARROW": ArrowFile, "run.arrows": ArrowStream,
		"run.parquet": Parquet, "run.pq": Parquet, "a.b.parquet": Parquet, "/dev/null": ArrowStream,
	} {
		got, err := ContainerForPath(path)
		if err != nil || got != want {
			t.Errorf("ContainerForPath(%q) = %v, %v; want %v", path, got, err, want)
		}
	}
	// A pipe with no extension takes the stream; a regular file or a
	// directory with none stays an error.
	dir := t.TempDir()
	fifo, plain := filepath.Join(dir, "fifo"), filepath.Join(dir, "plain")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := ContainerForPath(fifo); err != nil || got != ArrowStream {
		t.Errorf("ContainerForPath(a FIFO) = %v, %v; want %v", got, err, ArrowStream)
	}
	for _, path := range []string{"run.csv", "run", "run.arrow.gz", "parquet", "", plain, dir} {
		if _, err := ContainerForPath(path); err == nil || !strings.HasPrefix(err.Error(), path+": ") {
			t.Errorf("ContainerForPath(%q) error = %v, want one naming the path", path, err)
		}
	}
}

func TestWriterRejectsBadMeta(t *testing.T) {
	m := testMeta()
	m.Backend = "ns3"
	if _, err := NewWriter(io.Discard, Parquet, m); err == nil {
		t.Error("unknown backend accepted")
	}
	path := filepath.Join(t.TempDir(), "x.parquet")
	if _, err := Create(path, m); err == nil {
		t.Error("Create accepted an unknown backend")
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("Create left a file behind after rejecting the metadata")
	}
}

// arrowStreamOf writes one record batch with the given schema, for tests
// that need traces our Writer refuses to produce.
func arrowStreamOf(t *testing.T, sc *arrow.Schema, n int) []byte {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i, f := range sc.Fields() {
		fb := b.Field(i)
		for j := 0; j < n; j++ {
			switch fb := fb.(type) {
			case *array.Int64Builder:
				fb.Append(int64(j))
			case *array.Int32Builder:
				fb.Append(int32(j))
			case *array.StringBuilder:
				fb.Append("s")
			case *array.BinaryDictionaryBuilder:
				if err := fb.AppendString("RING"); err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("field %s: builder %T", f.Name, fb)
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(sc))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// schemaVariant returns our Arrow schema with fields edited by fn and
// metadata edited by md.
func schemaVariant(fn func([]arrow.Field) []arrow.Field, md func(map[string]string)) *arrow.Schema {
	keys, values, _ := encodeMeta(testMeta())
	base := arrowSchema(keys, values)
	fields := fn(append([]arrow.Field(nil), base.Fields()...))
	kv := map[string]string{}
	for i := range keys {
		kv[keys[i]] = values[i]
	}
	if md != nil {
		md(kv)
	}
	meta := arrow.MetadataFrom(kv)
	return arrow.NewSchema(fields, &meta)
}

func dropField(name string) func([]arrow.Field) []arrow.Field {
	return func(fs []arrow.Field) []arrow.Field {
		out := fs[:0]
		for _, f := range fs {
			if f.Name != name {
				out = append(out, f)
			}
		}
		return out
	}
}

func retype(name string, t arrow.DataType) func([]arrow.Field) []arrow.Field {
	return func(fs []arrow.Field) []arrow.Field {
		for i := range fs {
			if fs[i].Name == name {
				fs[i].Type = t
			}
		}
		return fs
	}
}

func same(fs []arrow.Field) []arrow.Field { return fs }

// parquetVariant writes rows as Parquet with Row's Parquet fields edited
// by fn, as schemaVariant does for Arrow: each field of the file takes the
// value of the Row field of the same Go name, converted to its type.
func parquetVariant(t *testing.T, fn func([]reflect.StructField) []reflect.StructField, rows []Row, kv map[string]string) []byte {
	t.Helper()
	fields := fn(reflect.VisibleFields(reflect.TypeFor[Row]()))
	row := reflect.New(reflect.StructOf(fields)).Elem()
	var opts []parquet.WriterOption
	for k, v := range kv {
		opts = append(opts, parquet.KeyValueMetadata(k, v))
	}
	var buf bytes.Buffer
	w := parquet.NewWriter(&buf, append(opts, parquet.SchemaOf(row.Interface()))...)
	for _, r := range rows {
		rv := reflect.ValueOf(r)
		for i, f := range fields {
			row.Field(i).Set(rv.FieldByName(f.Name).Convert(f.Type))
		}
		if err := w.Write(row.Interface()); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pqField edits the Parquet field called name; edit returns whether the
// field stays.
func pqField(name string, edit func(*reflect.StructField) bool) func([]reflect.StructField) []reflect.StructField {
	return func(fs []reflect.StructField) []reflect.StructField {
		out := fs[:0]
		for _, f := range fs {
			if n, _, _ := strings.Cut(f.Tag.Get("parquet"), ","); n != name || edit(&f) {
				out = append(out, f)
			}
		}
		return out
	}
}

// pqPlainReordered is how another tool might write a trace: plain (not
// dictionary) strings, fct_ns last.
func pqPlainReordered(fs []reflect.StructField) []reflect.StructField {
	var fct reflect.StructField
	fs = pqField("fct_ns", func(f *reflect.StructField) bool { fct = *f; return false })(fs)
	for i := range fs {
		fs[i].Tag = reflect.StructTag(strings.Replace(string(fs[i].Tag), ",dict", "", 1))
	}
	return append(fs, fct)
}

func goodKV() map[string]string {
	keys, values, _ := encodeMeta(testMeta())
	kv := map[string]string{}
	for i := range keys {
		kv[keys[i]] = values[i]
	}
	return kv
}

func validBytes(t *testing.T, c Container, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, c, testMeta())
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, w, genRows(n))
	return buf.Bytes()
}

// readErr opens data as name via a file (Open) and via NewReader and reads
// it to the end; it returns the first error, checking both paths agree on
// failing and that the error is one line starting with name.
func readErr(t *testing.T, name string, data []byte) error {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var errs []error
	for _, open := range []func() (*Reader, error){
		func() (*Reader, error) { return Open(path) },
		func() (*Reader, error) { return NewReader(bytes.NewReader(data), path) },
	} {
		errs = append(errs, func() error {
			r, err := open()
			if err != nil {
				return err
			}
			defer r.Close()
			_, err = ReadAll(r)
			return err
		}())
	}
	for _, err := range errs {
		if err == nil {
			t.Errorf("%s: read without error", name)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, path+": ") || strings.ContainsAny(msg, "\r\n") {
			t.Errorf("%s: error %q is not one line starting with the file name", name, msg)
		}
	}
	return errs[0]
}

func TestBadInput(t *testing.T) {
	wantIn := func(err error, subs ...string) {
		t.Helper()
		if err == nil {
			return
		}
		for _, s := range subs {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not mention %q", err, s)
			}
		}
	}

	// Missing column, wrong type, wrong or missing metadata: Arrow stream.
	wantIn(readErr(t, "nofct.arrows", arrowStreamOf(t, schemaVariant(dropField("fct_ns"), nil), 3)), `missing column "fct_ns"`)
	wantIn(readErr(t, "src64.arrows", arrowStreamOf(t, schemaVariant(retype("src", arrow.PrimitiveTypes.Int64), nil), 3)), `"src"`, "int64", "want int32")
	wantIn(readErr(t, "op-int.arrows", arrowStreamOf(t, schemaVariant(retype("op", arrow.PrimitiveTypes.Int32), nil), 3)), `"op"`, "int32")
	wantIn(readErr(t, "schema.arrows", arrowStreamOf(t, schemaVariant(same, func(m map[string]string) { m[KeySchema] = "fabricsim.flows/v9" }), 3)), `"fabricsim.flows/v9"`, SchemaName)
	wantIn(readErr(t, "noschema.arrows", arrowStreamOf(t, schemaVariant(same, func(m map[string]string) { delete(m, KeySchema) }), 3)), KeySchema)
	wantIn(readErr(t, "params.arrows", arrowStreamOf(t, schemaVariant(same, func(m map[string]string) { m[KeyParams] = "[1,2]" }), 3)), KeyParams)

	// Parquet: missing column, wrong physical type, nullable column, metadata.
	three := genRows(3)
	drop := pqField("fct_ns", func(*reflect.StructField) bool { return false })
	src64 := pqField("src", func(f *reflect.StructField) bool { f.Type = reflect.TypeFor[int64](); return true })
	optional := pqField("fct_ns", func(f *reflect.StructField) bool { f.Tag = `parquet:"fct_ns,optional"`; return true })
	wantIn(readErr(t, "nofct.parquet", parquetVariant(t, drop, three, goodKV())), `missing column "fct_ns"`)
	wantIn(readErr(t, "src64.parquet", parquetVariant(t, src64, three, goodKV())), `"src"`, "INT64", "INT32")
	wantIn(readErr(t, "optional.parquet", parquetVariant(t, optional, three, goodKV())), `"fct_ns"`, "OPTIONAL")
	wantIn(readErr(t, "nometa.parquet", parquetVariant(t, pqPlainReordered, three, nil)), KeySchema)
	bad := goodKV()
	bad[KeySchema] = "something/else"
	wantIn(readErr(t, "schema.parquet", parquetVariant(t, pqPlainReordered, three, bad)), `"something/else"`)
	// Column order is free: a file with the right columns in another order reads.
	if _, err := NewReader(bytes.NewReader(parquetVariant(t, pqPlainReordered, three, goodKV())), "reordered"); err != nil {
		t.Errorf("reordered columns: %v", err)
	}

	// Garbage.
	wantIn(readErr(t, "empty.arrows", nil), "empty")
	readErr(t, "junk.arrows", []byte("this is not a trace at all\n"))
	readErr(t, "junk.parquet", append([]byte("PAR1"), bytes.Repeat([]byte{0xff}, 100)...))
	readErr(t, "junk.arrow", append([]byte("ARROW1\x00\x00"), bytes.Repeat([]byte{0x7f}, 100)...))
	readErr(t, "fct.txt", []byte("0 1 2 3 4096 1000 2000\n"))

	// Truncation at many points, including an Arrow stream cut exactly at a
	// message boundary (only the end-of-stream marker missing).
	for _, c := range []Container{ArrowStream, ArrowFile, Parquet} {
		data := validBytes(t, c, 70_000)
		for _, cut := range []int{len(data) - 1, len(data) - 8, len(data) / 2, len(data) / 3, 100, 9} {
			err := readErr(t, fmt.Sprintf("cut%d.%v", cut, c), data[:cut])
			if c == ArrowStream && cut == len(data)-8 {
				wantIn(err, "end-of-stream")
			}
		}
	}
	// Bytes after an Arrow stream's end marker (two traces concatenated,
	// or trailing garbage) are refused, not silently ignored.
	one := validBytes(t, ArrowStream, 100)
	wantIn(readErr(t, "twice.arrows", append(bytes.Clone(one), one...)), "after the end-of-stream marker")
	wantIn(readErr(t, "tail.arrows", append(bytes.Clone(one), 'x')), "after the end-of-stream marker")
	// A single flipped byte anywhere must not panic (errors are fine, and
	// some flips land in data and read "successfully").
	for _, c := range []Container{ArrowStream, ArrowFile, Parquet} {
		data := validBytes(t, c, 200)
		rng := rand.New(rand.NewPCG(3, uint64(c)))
		for range 300 {
			d := bytes.Clone(data)
			d[rng.IntN(len(d))] ^= byte(1 + rng.IntN(255))
			if r, err := NewReader(bytes.NewReader(d), "flip"); err == nil {
				ReadAll(r)
				r.Close()
			}
		}
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{filepath.Join(dir, "missing.parquet"), dir} {
		_, err := Open(path)
		if err == nil || !strings.HasPrefix(err.Error(), path+": ") {
			t.Errorf("Open(%q) = %v, want an error starting with the path", path, err)
		}
	}
	if _, err := Open(filepath.Join(dir, "missing.parquet")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v is not ErrNotExist", err)
	}
	bad := filepath.Join(dir, "no", "such", "dir", "run.parquet")
	if _, err := Create(bad, testMeta()); err == nil || !strings.HasPrefix(err.Error(), bad+": ") {
		t.Errorf("Create(%q) = %v", bad, err)
	}
}

// TestPlainStrings reads an Arrow trace whose string columns are plain
// utf8 and whose dictionary indices are int8, as other tools write them.
func TestPlainStrings(t *testing.T) {
	sc := schemaVariant(func(fs []arrow.Field) []arrow.Field {
		for i := range fs {
			switch fs[i].Name {
			case "conn_type", "op":
				fs[i].Type = arrow.BinaryTypes.String
			case "algorithm":
				fs[i].Type = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
			}
			fs[i].Nullable = true // nullable without nulls is fine
		}
		return fs
	}, nil)
	r, err := NewReader(bytes.NewReader(arrowStreamOf(t, sc, 5)), "plain")
	_, rows := readBack(t, r, err)
	if len(rows) != 5 || rows[4].ConnType != "s" || rows[4].Op != "s" || rows[4].Algorithm != "RING" || rows[4].FctNs != 4 {
		t.Errorf("rows = %+v", rows)
	}
}

// TestLargeBatchFromPipe reads a stream whose single batch is larger than
// the reader's up-front allocation from an input of unknown size.
func TestLargeBatchFromPipe(t *testing.T) {
	data := arrowStreamOf(t, schemaVariant(same, nil), 120_000)
	r, err := NewReader(struct{ io.Reader }{bytes.NewReader(data)}, "pipe")
	_, rows := readBack(t, r, err)
	if len(rows) != 120_000 || rows[119_999].FlowID != 119_999 || rows[5].ConnType != "RING" {
		t.Errorf("read %d rows, last %+v", len(rows), rows[len(rows)-1])
	}
	// Cut inside that body: an error, not a hang or a short read.
	r, err = NewReader(struct{ io.Reader }{bytes.NewReader(data[:len(data)-4096])}, "pipe")
	if err == nil {
		_, err = ReadAll(r)
	}
	if err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("cut stream: err = %v", err)
	}
}

func TestNullsRejected(t *testing.T) {
	sc := schemaVariant(func(fs []arrow.Field) []arrow.Field {
		for i := range fs {
			fs[i].Nullable = true
		}
		return fs
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := range sc.Fields() {
		switch fb := b.Field(i).(type) {
		case *array.Int64Builder:
			fb.AppendNull()
		case *array.Int32Builder:
			fb.Append(1)
		case *array.BinaryDictionaryBuilder:
			fb.AppendString("RING")
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(sc))
	w.Write(rec)
	w.Close()
	err := readErr(t, "nulls.arrows", buf.Bytes())
	if err == nil || !strings.Contains(err.Error(), "null") {
		t.Errorf("err = %v", err)
	}
}

func TestWriteAfterClose(t *testing.T) {
	for _, c := range []Container{ArrowStream, ArrowFile, Parquet} {
		w, err := NewWriter(io.Discard, c, testMeta())
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := w.Write(&Row{}); err == nil {
			t.Errorf("%v: write after Close succeeded", c)
		}
	}
}

func TestWriteAllocs(t *testing.T) {
	rows := genRows(1000)
	for _, c := range []Container{ArrowStream, Parquet} {
		w, err := NewWriter(io.Discard, c, testMeta())
		if err != nil {
			t.Fatal(err)
		}
		for i := range rows { // warm the dictionaries
			w.Write(&rows[i])
		}
		i := 0
		allocs := testing.AllocsPerRun(500, func() {
			w.Write(&rows[i%len(rows)])
			i++
		})
		if allocs > 0 {
			t.Errorf("%v: %.2f allocations per Write", c, allocs)
		}
		w.Close()
	}
}

var errSentinel = errors.New("sentinel")

type failWriter struct{ after int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errSentinel
	}
	f.after--
	return len(p), nil
}

func TestWriterPropagatesIOErrors(t *testing.T) {
	rows := genRows(batchRows + 10)
	for _, c := range []Container{ArrowStream, ArrowFile, Parquet} {
		w, err := NewWriter(&failWriter{after: 1}, c, testMeta())
		if err != nil {
			t.Fatal(err)
		}
		var werr error
		for i := range rows {
			if werr = w.Write(&rows[i]); werr != nil {
				break
			}
		}
		cerr := w.Close()
		if werr == nil && cerr == nil {
			t.Errorf("%v: write error not reported", c)
		}
	}
}

// TestStreamWriteFailsEarly: the stream's batches are written on a
// goroutine, but its first I/O error still stops Write, as it did when
// Write wrote them itself: a full disk must not cost the encoding of the
// whole trace before Close reports it. Batch 1 fails (the sink takes one
// write); the goroutine records that before it hands the batch's buffer
// back, which batch 2's send waits for, so Write fails at batch 2's last
// row at the latest.
func TestStreamWriteFailsEarly(t *testing.T) {
	rows := genRows(5*batchRows + 6)
	w, err := NewWriter(&failWriter{after: 1}, ArrowStream, testMeta())
	if err != nil {
		t.Fatal(err)
	}
	at := -1
	var werr error
	for i := range rows {
		if werr = w.Write(&rows[i]); werr != nil {
			at = i
			break
		}
	}
	if at < 0 || at > 2*batchRows-1 || !isSentinel(werr) {
		t.Errorf("first Write error at row %d (%v), want the sink's error by row %d", at, werr, 2*batchRows-1)
	}
	if at >= 0 && !isSentinel(w.Write(&rows[at+1])) {
		t.Error("the error does not stick: a Write after it succeeds")
	}
	if cerr := w.Close(); !isSentinel(cerr) {
		t.Errorf("Close = %v, want the sink's error", cerr)
	}
}

// isSentinel: the writer's errors carry the sink's text, not its chain.
func isSentinel(err error) bool {
	return err != nil && strings.Contains(err.Error(), errSentinel.Error())
}

// TestStreamDictGrowsAtBatchStart: each batch carries its dictionaries as
// of the batch, retained until the writing goroutine is done with them,
// while the filling side outgrows (and releases) them. A new string at the
// first row of every batch makes each batch's dictionary outgrown before
// it is written; without the retain the goroutine reads a freed array.
func TestStreamDictGrowsAtBatchStart(t *testing.T) {
	rows := genRows(6*batchRows + 10)
	for i := range rows {
		if i%batchRows == 0 {
			rows[i].LayerName = fmt.Sprintf("L%d", i)
		}
	}
	var out bytes.Buffer
	w, err := NewWriter(&out, ArrowStream, testMeta())
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, w, rows)
	r, err := NewReader(bytes.NewReader(out.Bytes()), "x.arrows")
	_, got := readBack(t, r, err)
	compareRows(t, got, rows)
}

// seedTrace is a two-row trace with meta m in container c, as far as
// the writer goes (a fuzz seed may be one it refuses on Close).
func seedTrace(c Container, m Meta) []byte {
	var buf bytes.Buffer
	if w, err := NewWriter(&buf, c, m); err == nil {
		rows := genRows(2)
		w.Write(&rows[0])
		w.Write(&rows[1])
		w.Close()
	}
	return buf.Bytes()
}

// FuzzReader feeds arbitrary bytes to NewReader and Next: any error is
// fine, a panic is not; errors must be one line naming the input.
func FuzzReader(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("PAR1"))
	f.Add([]byte("ARROW1\x00\x00"))
	// Inputs that once panicked or were accepted: a MAP column, and a
	// trace with fewer rows than it announces.
	f.Add(mapColumnParquet(f, "conn_type"))
	short := testMeta()
	short.Rows = 9
	// A partial trace that says what its stop cut (fabricsim.cut).
	cut := testMeta()
	cut.Unfinished = 3
	cut.Cut = &Cut{Collectives: []CutCollective{{ID: 0, Finished: 1, Flows: 3}}, NotStarted: 1,
		Jobs: []CutJob{{Job: "train-a", Finished: 1, Flows: 2}}}
	for _, c := range []Container{ArrowStream, Parquet} {
		f.Add(seedTrace(c, short)) // Close refuses the count, after writing the whole container
		data := seedTrace(c, cut)
		r, err := NewReader(bytes.NewReader(data), "cut")
		if got, _ := readBack(f, r, err); !reflect.DeepEqual(got.Cut, cut.Cut) {
			f.Fatalf("%v: the cut seed reads back %+v", c, got.Cut)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(err error) {
			if err == nil || err == io.EOF {
				return
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "fuzz: ") || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("bad error %q", msg)
			}
		}
		r, err := NewReader(bytes.NewReader(data), "fuzz")
		if err != nil {
			check(err)
			return
		}
		defer r.Close()
		var row Row
		for i := 0; i < 1<<20; i++ {
			if err := r.Next(&row); err != nil {
				check(err)
				return
			}
		}
	})
}

// TestWriteFuzzCorpus regenerates testdata/fuzz/FuzzReader when
// TRACE_WRITE_CORPUS=1.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("TRACE_WRITE_CORPUS") == "" {
		t.Skip("set TRACE_WRITE_CORPUS=1 to regenerate the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzReader")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	seeds := map[string][]byte{
		"valid-stream":  validBytes(t, ArrowStream, 3),
		"valid-file":    validBytes(t, ArrowFile, 3),
		"valid-parquet": validBytes(t, Parquet, 3),
		"plain-strings": arrowStreamOf(t, schemaVariant(retype("op", arrow.BinaryTypes.String), nil), 2),
		"missing-col":   arrowStreamOf(t, schemaVariant(dropField("fct_ns"), nil), 1),
		"v1-stream":     readFile(t, filepath.Join("testdata", "flows-v1.arrows")),
		"v1-parquet":    readFile(t, filepath.Join("testdata", "flows-v1.parquet")),
		"junk-text":     []byte("flow_id,src,dst\n1,2,3\n"),
		"junk-cont":     {0xff, 0xff, 0xff, 0xff, 0x10, 0, 0, 0, 1, 2, 3},
		"junk-par1":     []byte("PAR1\x00\x00\x00\x00PAR1"),
		"junk-arrow1":   []byte("ARROW1\x00\x00\x00\x00\x00\x00\x00\x00ARROW1"),
		// a corrupt LZ4 page with a valid checksum (the LZ4 decoder doubled
		// its buffer until memory ran out), a zstd page declaring 2^20 bytes
		"lz4-corrupt": corruptPage(t, parquetWith(t, 200, parquet.Compression(&parquet.Lz4Raw))),
		"zstd-declares-more": rewriteFirstPage(t, validBytes(t, Parquet, 200), func(h *format.PageHeader) {
			h.UncompressedPageSize = maxSameLength(h.UncompressedPageSize)
		}),
	}
	for name, data := range seeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestWriteInteropSamples writes the 100,000-row test trace in each
// container into $TRACE_INTEROP_DIR, for checks with other Arrow and
// Parquet implementations.
func TestWriteInteropSamples(t *testing.T) {
	dir := os.Getenv("TRACE_INTEROP_DIR")
	if dir == "" {
		t.Skip("set TRACE_INTEROP_DIR to write sample traces")
	}
	rows := genRows(100_000)
	for _, name := range []string{"run.arrows", "run.arrow", "run.parquet"} {
		w, err := Create(filepath.Join(dir, name), testMeta())
		if err != nil {
			t.Fatal(err)
		}
		writeAll(t, w, rows)
	}
}

// A Parquet file with a MAP column, extra or in a trace column's place, is
// read or refused with an error naming the file, never a panic:
// parquet-go panics walking such a schema ("cannot call Kind on parquet
// MAP type"), so the schema checks run under the reader's recover.
// mapColumnParquet is a two-row Parquet trace whose column col (or an
// extra column "extra") is a MAP.
func mapColumnParquet(t testing.TB, col string) []byte {
	fields := reflect.VisibleFields(reflect.TypeFor[Row]())
	mapType := reflect.TypeFor[map[string]string]()
	if col == "extra" {
		fields = append(fields, reflect.StructField{Name: "Extra", Type: mapType, Tag: `parquet:"extra"`})
	}
	for i := range fields {
		if strings.HasPrefix(string(fields[i].Tag), `parquet:"`+col) {
			fields[i].Type, fields[i].Tag = mapType, reflect.StructTag(`parquet:"`+col+`"`)
		}
	}
	var opts []parquet.WriterOption
	for k, v := range goodKV() {
		opts = append(opts, parquet.KeyValueMetadata(k, v))
	}
	row := reflect.New(reflect.StructOf(fields)).Elem()
	var buf bytes.Buffer
	w := parquet.NewWriter(&buf, append(opts, parquet.SchemaOf(row.Interface()))...)
	for _, r := range genRows(2) {
		rv := reflect.ValueOf(r)
		for i, f := range fields {
			if f.Type == mapType {
				row.Field(i).Set(reflect.ValueOf(map[string]string{"a": "b"}))
			} else if src := rv.FieldByName(f.Name); src.IsValid() {
				row.Field(i).Set(src)
			}
		}
		if err := w.Write(row.Interface()); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestParquetMapColumn(t *testing.T) {
	for _, col := range []string{"extra", "conn_type", "flow_id"} {
		buf := bytes.NewBuffer(mapColumnParquet(t, col))
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s: panic %v", col, p)
				}
			}()
			r, err := NewReader(bytes.NewReader(buf.Bytes()), "map.parquet")
			var row Row
			for err == nil {
				err = r.Next(&row)
			}
			if err != io.EOF && (!strings.HasPrefix(err.Error(), "map.parquet: ") || strings.Contains(err.Error(), "\n")) {
				t.Errorf("%s: error %q", col, err)
			}
			if col != "extra" && err == io.EOF {
				t.Errorf("%s as a MAP accepted", col)
			}
		}()
	}
}

// A trace file appears under its name only once complete: while rows are
// being written (or after a kill) the name holds the previous file or
// nothing, and no temporary file is left behind.
func TestCreateRenamesWhenComplete(t *testing.T) {
	for _, name := range []string{"run.arrows", "run.arrow", "run.parquet"} {
		dir := t.TempDir()
		path := filepath.Join(dir, name)
		w, err := Create(path, testMeta())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range genRows(10) {
			if err := w.Write(&r); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("%s exists before Close: %v", name, err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := ReadAll(r)
		r.Close()
		if err != nil || len(rows) != 10 {
			t.Fatalf("%s: %d rows, %v", name, len(rows), err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Fatalf("%s: %d files in the directory, want only the trace", name, len(ents))
		}
	}
}

// A trace announces its row count (fabricsim.rows): the writer refuses to
// complete one with other than that many rows, and the reader refuses a
// trace that ends early, as a stream cut at a batch boundary with its end
// marker does to a reader that ignores the marker.
func TestAnnouncedRows(t *testing.T) {
	rows := genRows(5)
	for _, c := range []Container{ArrowStream, ArrowFile, Parquet} {
		m := testMeta()
		m.Rows = 5
		var buf bytes.Buffer
		w, err := NewWriter(&buf, c, m)
		if err != nil {
			t.Fatal(err)
		}
		for i := range rows[:3] {
			if err := w.Write(&rows[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err == nil || !strings.Contains(err.Error(), "3 rows written, the metadata announces 5") {
			t.Errorf("%v: Close after 3 of 5 rows: %v", c, err)
		}
		r, err := NewReader(bytes.NewReader(buf.Bytes()), "short")
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		got, err := ReadAll(r)
		if len(got) != 3 || err == nil || !strings.Contains(err.Error(), "short: 3 rows, the metadata (fabricsim.rows) announces 5") {
			t.Errorf("%v: read %d rows, error %v", c, len(got), err)
		}

		// The full count reads back, with the count in Meta.
		buf.Reset()
		w, _ = NewWriter(&buf, c, m)
		for i := range rows {
			w.Write(&rows[i])
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r, _ = NewReader(bytes.NewReader(buf.Bytes()), "whole")
		if got, err := ReadAll(r); len(got) != 5 || err != nil || r.Meta().Rows != 5 {
			t.Errorf("%v: %d rows, %v, meta rows %d", c, len(got), err, r.Meta().Rows)
		}
	}
}

// metaRoundTrip writes five rows with m in container c and reads the
// metadata back.
func metaRoundTrip(t *testing.T, c Container, m Meta) Meta {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, c, m)
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, w, genRows(5))
	r, err := NewReader(bytes.NewReader(buf.Bytes()), "partial")
	got, _ := readBack(t, r, err)
	return got
}

// A partial run's count of unfinished flows round-trips in every
// container; contradictory or malformed completeness keys and an unknown
// backend are refused, naming the key.
func TestPartialMeta(t *testing.T) {
	for _, c := range []Container{ArrowStream, ArrowFile, Parquet} {
		m := testMeta()
		m.Unfinished = 122
		got := metaRoundTrip(t, c, m)
		if got.Unfinished != 122 || !got.Partial() {
			t.Errorf("%v: read back %d unfinished flows, want 122", c, got.Unfinished)
		}
		// Without the keys (a whole run, or an older file) the trace is whole.
		r, err := NewReader(bytes.NewReader(validBytes(t, c, 5)), "whole")
		if got, _ := readBack(t, r, err); got.Partial() {
			t.Errorf("%v: a trace without the keys reads as partial", c)
		}
	}
	three := genRows(3)
	for _, tc := range []struct {
		name string
		edit func(map[string]string)
		want string
	}{
		{"backend", func(m map[string]string) { m[KeyBackend] = "magic" }, `fabricsim.backend is "magic"`},
		{"complete", func(m map[string]string) { m[KeyComplete] = "maybe" }, `fabricsim.complete is "maybe"`},
		{"nocount", func(m map[string]string) { m[KeyComplete] = "false" }, "without fabricsim.unfinished_flows"},
		{"count0", func(m map[string]string) { m[KeyComplete], m[KeyUnfinished] = "false", "0" }, `fabricsim.unfinished_flows is "0"`},
		{"countx", func(m map[string]string) { m[KeyComplete], m[KeyUnfinished] = "false", "x" }, `fabricsim.unfinished_flows is "x"`},
		{"contradict", func(m map[string]string) { m[KeyComplete], m[KeyUnfinished] = "true", "3" }, "without fabricsim.complete=false"},
		{"alone", func(m map[string]string) { m[KeyUnfinished] = "3" }, "without fabricsim.complete=false"},
	} {
		kv := goodKV()
		tc.edit(kv)
		for _, data := range [][]byte{
			arrowStreamOf(t, schemaVariant(same, tc.edit), 3),
			parquetVariant(t, pqPlainReordered, three, kv),
		} {
			if err := readErr(t, tc.name, data); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: error %v, want it to say %q", tc.name, err, tc.want)
			}
		}
	}
	// complete=true alone is a whole run.
	kv := goodKV()
	kv[KeyComplete] = "true"
	if r, err := NewReader(bytes.NewReader(parquetVariant(t, pqPlainReordered, three, kv)), "t"); err != nil || r.Meta().Partial() {
		t.Errorf("complete=true: %v", err)
	}
}

// A partial run's cut collectives and jobs round-trip in every container
// as fabricsim.cut; a value that contradicts itself or the trace's count
// of unfinished flows, or sits in a whole trace, is refused naming the key.
func TestCutMeta(t *testing.T) {
	cut := &Cut{Collectives: []CutCollective{{ID: 0, Finished: 7936, Flows: 32776}, {ID: 3, Finished: 1, Flows: 2}},
		NotStarted: 4, Jobs: []CutJob{{Job: "a", Finished: 0, Flows: 9}}}
	for _, c := range []Container{ArrowStream, ArrowFile, Parquet} {
		m := testMeta()
		m.Unfinished, m.Cut = 24841, cut
		got := metaRoundTrip(t, c, m)
		if !reflect.DeepEqual(got.Cut, cut) {
			t.Errorf("%v: read back %+v, want %+v", c, got.Cut, cut)
		}
	}
	if _, err := NewWriter(io.Discard, Parquet, Meta{Backend: "packet", Cut: cut}); err == nil || !strings.Contains(err.Error(), "only a partial trace") {
		t.Errorf("a whole trace with a cut written: %v", err)
	}
	three := genRows(3)
	partialOf := func(unfinished, v string) func(map[string]string) {
		return func(m map[string]string) { m[KeyComplete], m[KeyUnfinished], m[KeyCut] = "false", unfinished, v }
	}
	partial := func(v string) func(map[string]string) { return partialOf("10", v) }
	// Two counts of MaxInt64-1 unfinished flows: their sum wraps negative
	// unless the check compares before it adds.
	const maxI, big = "9223372036854775807", `"finished":1,"flows":9223372036854775807`
	for _, tc := range []struct {
		name string
		edit func(map[string]string)
		want string
	}{
		{"whole", func(m map[string]string) { m[KeyCut] = `{"collectives":[]}` }, "only a partial trace"},
		{"array", partial(`[[0,1,2]]`), "not a JSON object"},
		{"unknown", partial(`{"colls":[]}`), "not a JSON object"},
		{"twice", partial(`{"collectives":[{"collective_id":1,"finished":1,"flows":2},{"collective_id":1,"finished":1,"flows":2}]}`), "listed twice"},
		{"none done", partial(`{"collectives":[{"collective_id":1,"finished":0,"flows":2}]}`), "0 of 2 flows finished"},
		{"all done", partial(`{"collectives":[{"collective_id":1,"finished":2,"flows":2}]}`), "2 of 2 flows finished"},
		{"too many", partial(`{"collectives":[{"collective_id":1,"finished":1,"flows":12}]}`), "more unfinished flows than fabricsim.unfinished_flows 10"},
		{"job", partial(`{"collectives":[],"jobs":[{"job":"","finished":0,"flows":2}]}`), `job "" is empty`},
		{"not started", partial(`{"collectives":[],"collectives_not_started":-1}`), "negative"},
		{"overflow", partialOf(maxI, `{"collectives":[{"collective_id":1,`+big+`},{"collective_id":2,`+big+`}]}`), "more unfinished flows than"},
		{"job overflow", partialOf(maxI, `{"collectives":[],"jobs":[{"job":"a",`+big+`},{"job":"b",`+big+`}]}`), "more unfinished flows than"},
	} {
		kv := goodKV()
		tc.edit(kv)
		for _, data := range [][]byte{
			arrowStreamOf(t, schemaVariant(same, tc.edit), 3),
			parquetVariant(t, pqPlainReordered, three, kv),
		} {
			if err := readErr(t, tc.name, data); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), KeyCut) {
				t.Errorf("%s: error %v, want it to name %s and say %q", tc.name, err, KeyCut, tc.want)
			}
		}
	}
}

// The stream's notes round-trip in every container as fabricsim.notes;
// a value that is not a non-empty JSON array of strings is refused,
// naming the key.
func TestNotesMeta(t *testing.T) {
	notes := []string{`simccl-decompose: 3 dependencies dropped`, "a \"quoted\" note"}
	for _, c := range []Container{ArrowStream, ArrowFile, Parquet} {
		m := testMeta()
		m.Notes = notes
		var buf bytes.Buffer
		w, err := NewWriter(&buf, c, m)
		if err != nil {
			t.Fatal(err)
		}
		writeAll(t, w, genRows(2))
		r, err := NewReader(bytes.NewReader(buf.Bytes()), "noted")
		if got, _ := readBack(t, r, err); !slices.Equal(got.Notes, notes) {
			t.Errorf("%v: notes %q, want %q", c, got.Notes, notes)
		}
	}
	for _, v := range []string{"[]", `"one"`, "[1]", "{"} {
		edit := func(m map[string]string) { m[KeyNotes] = v }
		if err := readErr(t, v, arrowStreamOf(t, schemaVariant(same, edit), 3)); err == nil || !strings.Contains(err.Error(), "fabricsim.notes is not a JSON array") {
			t.Errorf("notes %s: error %v", v, err)
		}
	}
}
