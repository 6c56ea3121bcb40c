package links

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/fabricsim/fabricsim/formats/trace"
)

var update = flag.Bool("update", false, "rewrite testdata/loads.parquet and the fuzz seeds")

func testMeta() Meta {
	return Meta{Backend: "analytical-fluid", Routing: "ecmp", MakespanNs: 1_000_000, Granularity: "flow",
		Topology: trace.TopologyMeta{Family: "fat-tree", GPUs: 4, Hash: "0123abcd"}, Schema: SchemaName}
}

// fixtureRows is a small 2-tier fabric's loads: 4 GPUs under 2 edge
// switches joined by one agg switch, a DP AllReduce and an EP AllToAll,
// plus some traffic without a group. It is testdata/loads.parquet, which
// pipelines/interop.sh reads with DuckDB and through fctstats.
func fixtureRows() []Row {
	m := testMeta()
	row := func(link, src, dst int32, sr, dr, kind string, bw float64, gt, op string, b int64) Row {
		busy := BusyNs(b, bw)
		return Row{Link: link, Src: src, Dst: dst, SrcRole: sr, DstRole: dr, Tier: Tier(sr, dr), Kind: kind,
			BWbps: bw, GroupType: gt, Op: op, Bytes: b, BusyNs: busy, Utilization: float64(busy) / float64(m.MakespanNs)}
	}
	const nic, up = 400e9, 800e9
	var rows []Row
	// GPUs 0,1 on edge 4; GPUs 2,3 on edge 5; edges on agg 6.
	for g := int32(0); g < 4; g++ {
		edge := 4 + g/2
		rows = append(rows,
			row(g, g, edge, "gpu", "edge", "nic", nic, "DP", "allreduce", 8<<20+int64(g)<<20),
			row(g, edge, g, "edge", "gpu", "nic", nic, "DP", "allreduce", 8<<20),
			row(g, g, edge, "gpu", "edge", "nic", nic, "EP", "alltoall", 4<<20),
			row(g, edge, g, "edge", "gpu", "nic", nic, "EP", "alltoall", 4<<20))
	}
	for e := int32(4); e < 6; e++ {
		link := e
		rows = append(rows,
			row(link, e, 6, "edge", "agg", "fabric", up, "DP", "allreduce", 16<<20),
			row(link, 6, e, "agg", "edge", "fabric", up, "DP", "allreduce", 16<<20),
			row(link, e, 6, "edge", "agg", "fabric", up, "EP", "alltoall", 4<<20),
			row(link, 6, e, "agg", "edge", "fabric", up, "none", "none", 1<<20))
	}
	slices.SortFunc(rows, compareRows)
	return rows
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, rows := range [][]Row{fixtureRows(), nil} {
		for _, name := range []string{"loads.parquet", "loads.pq"} {
			path := filepath.Join(dir, name)
			if err := Write(path, testMeta(), rows); err != nil {
				t.Fatal(err)
			}
			m, got, err := Read(path)
			if err != nil {
				t.Fatal(err)
			}
			if m != testMeta() {
				t.Errorf("meta %+v, want %+v", m, testMeta())
			}
			if len(got) != len(rows) || (len(rows) > 0 && !reflect.DeepEqual(got, rows)) {
				t.Errorf("%s: %d rows read back, %d written, or they differ", name, len(got), len(rows))
			}
		}
	}
	// Rows go out sorted; the caller's slice is left alone.
	rev := slices.Clone(fixtureRows())
	slices.Reverse(rev)
	before := slices.Clone(rev)
	path := filepath.Join(dir, "loads.parquet")
	if err := Write(path, testMeta(), rev); err != nil {
		t.Fatal(err)
	}
	if _, got, err := Read(path); err != nil || !reflect.DeepEqual(got, fixtureRows()) || !reflect.DeepEqual(rev, before) {
		t.Errorf("reversed rows: not written sorted, or the caller's slice changed (%v)", err)
	}
	// No temporary file is left beside the output.
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("%d files in the directory, want 2", len(ents))
	}
}

// The Parquet file has the contract's columns, types, compression and
// metadata keys as other readers see them.
func TestParquetLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loads.parquet")
	if err := Write(path, testMeta(), fixtureRows()); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range f.Schema().Fields() {
		names = append(names, c.Name())
		if !c.Required() {
			t.Errorf("column %s is not REQUIRED", c.Name())
		}
	}
	if !reflect.DeepEqual(names, ColumnNames()) {
		t.Errorf("columns %v, want %v", names, ColumnNames())
	}
	if f.Schema().Name() != "schema" {
		t.Errorf("root %q, want schema", f.Schema().Name())
	}
	for _, cc := range f.Metadata().RowGroups[0].Columns {
		md := cc.MetaData
		if md.Codec.String() != "ZSTD" {
			t.Errorf("column %v: codec %s", md.PathInSchema, md.Codec)
		}
		if md.Type.String() == "BYTE_ARRAY" && md.DictionaryPageOffset == 0 {
			t.Errorf("string column %v is not dictionary-encoded", md.PathInSchema)
		}
	}
	for k, want := range map[string]string{KeySchema: SchemaName, KeyBackend: "analytical-fluid", KeyRouting: "ecmp",
		KeyMakespanNs: "1000000", KeyGranularity: "flow", KeyTopology: `{"family":"fat-tree","gpus":4,"hash":"0123abcd"}`} {
		if v, _ := f.Lookup(k); v != want {
			t.Errorf("metadata %s = %q, want %q", k, v, want)
		}
	}
}

func TestCSV(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loads.csv")
	rows := fixtureRows()
	if err := Write(path, testMeta(), rows); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if lines[0] != strings.Join(ColumnNames(), ",") {
		t.Errorf("header %q", lines[0])
	}
	if len(lines) != len(rows)+1 {
		t.Errorf("%d lines, want %d", len(lines), len(rows)+1)
	}
	if want := "0,0,4,gpu,edge,gpu-edge,nic,4e+11,DP,allreduce,,8388608,167772,0.167772"; lines[1] != want {
		t.Errorf("first row %q, want %q", lines[1], want)
	}
	if _, _, err := Read(path); err == nil || !strings.Contains(err.Error(), "not a Parquet file") {
		t.Errorf("reading the CSV: %v", err)
	}
}

func TestWriteRefuses(t *testing.T) {
	dir := t.TempDir()
	bad := fixtureRows()
	bad[3].Bytes = -1
	if err := Write(filepath.Join(dir, "a.parquet"), testMeta(), bad); err == nil || !strings.Contains(err.Error(), `row 3: column "bytes" is -1`) {
		t.Errorf("negative bytes: %v", err)
	}
	bad = fixtureRows()
	bad[7].Bytes = 0
	if err := Write(filepath.Join(dir, "a.parquet"), testMeta(), bad); err == nil || !strings.Contains(err.Error(), `row 7: column "bytes" is 0`) {
		t.Errorf("zero bytes: %v", err)
	}
	for _, edit := range []func(*Meta){
		func(m *Meta) { m.Backend = "ns3" }, func(m *Meta) { m.Routing = "random" },
		func(m *Meta) { m.Granularity = "" }, func(m *Meta) { m.MakespanNs = -1 },
	} {
		m := testMeta()
		edit(&m)
		if err := Write(filepath.Join(dir, "b.parquet"), m, fixtureRows()); err == nil || !strings.HasPrefix(err.Error(), filepath.Join(dir, "b.parquet")+": links: ") {
			t.Errorf("meta %+v: %v", m, err)
		}
	}
	if err := Write(filepath.Join(dir, "c.txt"), testMeta(), nil); err == nil || !strings.Contains(err.Error(), "unknown links file extension") {
		t.Errorf(".txt: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("refused writes left %d files", len(ents))
	}
}

// rawParquet writes rows of any type with the given metadata, bypassing
// Write's checks.
func rawParquet[T any](t testing.TB, kv map[string]string, rows []T, opts ...parquet.WriterOption) []byte {
	t.Helper()
	var buf bytes.Buffer
	opts = append([]parquet.WriterOption{parquet.NewSchema("schema", parquet.SchemaOf(*new(T)))}, opts...)
	for k, v := range kv {
		opts = append(opts, parquet.KeyValueMetadata(k, v))
	}
	w := parquet.NewGenericWriter[T](&buf, opts...)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func goodKV() map[string]string {
	keys, values, _ := encodeMeta(testMeta())
	kv := map[string]string{}
	for i := range keys {
		kv[keys[i]] = values[i]
	}
	return kv
}

func kvWith(k, v string) map[string]string {
	kv := goodKV()
	if v == "" {
		delete(kv, k)
	} else {
		kv[k] = v
	}
	return kv
}

// Rows lacking a column, or with one of another type.
type noBytes struct {
	Link        int32   `parquet:"link"`
	Src         int32   `parquet:"src"`
	Dst         int32   `parquet:"dst"`
	SrcRole     string  `parquet:"src_role,dict"`
	DstRole     string  `parquet:"dst_role,dict"`
	Tier        string  `parquet:"tier,dict"`
	Kind        string  `parquet:"kind,dict"`
	BWbps       float64 `parquet:"bw_bps"`
	GroupType   string  `parquet:"group_type,dict"`
	Op          string  `parquet:"op,dict"`
	Job         string  `parquet:"job,dict"`
	BusyNs      int64   `parquet:"busy_ns"`
	Utilization float64 `parquet:"utilization"`
}

type floatBytes struct {
	noBytes
	Bytes float64 `parquet:"bytes"`
}

type optionalBytes struct {
	noBytes
	Bytes *int64 `parquet:"bytes,optional"`
}

func withRow(edit func(*Row)) []Row {
	rows := fixtureRows()
	edit(&rows[5])
	return rows
}

// badFiles are the files Read must refuse, each with what its error must
// say after the file name.
func badFiles(t testing.TB) []struct {
	name string
	data []byte
	want string
} {
	rows := fixtureRows()
	var nb []noBytes
	var fb []floatBytes
	var ob []optionalBytes
	for _, r := range rows {
		n := noBytes{r.Link, r.Src, r.Dst, r.SrcRole, r.DstRole, r.Tier, r.Kind, r.BWbps, r.GroupType, r.Op, r.Job, r.BusyNs, r.Utilization}
		nb = append(nb, n)
		fb = append(fb, floatBytes{n, float64(r.Bytes)})
		b := r.Bytes
		ob = append(ob, optionalBytes{n, &b})
	}
	good := rawParquet(t, goodKV(), rows)
	return []struct {
		name string
		data []byte
		want string
	}{
		{"flow trace schema", rawParquet(t, kvWith(KeySchema, "fabricsim.flows/v2"), rows), `metadata fabricsim.schema is "fabricsim.flows/v2", want "fabricsim.links/v2"`},
		{"no schema", rawParquet(t, kvWith(KeySchema, ""), rows), `not a fabricsim.links/v2 file: the Parquet metadata has no "fabricsim.schema" key`},
		{"no routing", rawParquet(t, kvWith(KeyRouting, ""), rows), `the metadata has no "fabricsim.routing" key`},
		{"bad makespan", rawParquet(t, kvWith(KeyMakespanNs, "1.5ms"), rows), `metadata fabricsim.makespan_ns is "1.5ms", want a non-negative integer (ns)`},
		{"bad topology", rawParquet(t, kvWith(KeyTopology, "[]"), rows), `metadata fabricsim.topology is not a JSON object`},
		{"missing column", rawParquet(t, goodKV(), nb), `missing column "bytes"`},
		{"float bytes", rawParquet(t, goodKV(), fb), `column "bytes" has type DOUBLE, want INT64`},
		{"optional bytes", rawParquet(t, goodKV(), ob), `column "bytes" is OPTIONAL or REPEATED`},
		{"negative bytes", rawParquet(t, goodKV(), withRow(func(r *Row) { r.Bytes = -5 })), `row 5: column "bytes" is -5; bytes carried cannot be negative`},
		{"NaN utilization", rawParquet(t, goodKV(), withRow(func(r *Row) { r.Utilization = math.NaN() })), `row 5: column "utilization" is NaN`},
		{"Inf utilization", rawParquet(t, goodKV(), withRow(func(r *Row) { r.Utilization = math.Inf(1) })), `row 5: column "utilization" is +Inf`},
		{"Inf bandwidth", rawParquet(t, goodKV(), withRow(func(r *Row) { r.BWbps = math.Inf(1) })), `row 5: column "bw_bps" is +Inf`},
		{"NaN bandwidth", rawParquet(t, goodKV(), withRow(func(r *Row) { r.BWbps = math.NaN() })), `row 5: column "bw_bps" is NaN`},
		{"zero bandwidth", rawParquet(t, goodKV(), withRow(func(r *Row) { r.BWbps = 0 })), `row 5: column "bw_bps" is 0`},
		{"negative link", rawParquet(t, goodKV(), withRow(func(r *Row) { r.Link = -1 })), `row 5: column "link" is -1`},
		{"lz4", rawParquet(t, goodKV(), rows, parquet.Compression(&parquet.Lz4Raw)), `row group 0: compression LZ4_RAW; a links file is ZSTD or UNCOMPRESSED`},
		{"truncated", good[:len(good)/2], `not a readable Parquet file`},
		{"csv", []byte("link,src\n0,1\n"), `not a Parquet file`},
		{"empty", nil, `not a Parquet file`},
	}
}

func TestReadRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, c := range badFiles(t) {
		path := filepath.Join(dir, "bad.parquet")
		if err := os.WriteFile(path, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := Read(path)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, path+": ") || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
			t.Errorf("%s: error %q, want %q after the path, on one line", c.name, msg, c.want)
		}
	}
	if _, _, err := Read(filepath.Join(dir, "none.parquet")); err == nil || !strings.Contains(err.Error(), "none.parquet: no such file") {
		t.Errorf("missing file: %v", err)
	}
}

// Other writers' choices are read: plain (not dictionary) strings, no
// compression, another column order and extra columns.
func TestReadOthers(t *testing.T) {
	type reordered struct {
		Extra string `parquet:"extra"`
		Row
	}
	rows := fixtureRows()
	var re []reordered
	for _, r := range rows {
		re = append(re, reordered{"x", r})
	}
	type plain struct {
		Link        int32   `parquet:"link"`
		Src         int32   `parquet:"src"`
		Dst         int32   `parquet:"dst"`
		SrcRole     string  `parquet:"src_role"`
		DstRole     string  `parquet:"dst_role"`
		Tier        string  `parquet:"tier"`
		Kind        string  `parquet:"kind"`
		BWbps       float64 `parquet:"bw_bps"`
		GroupType   string  `parquet:"group_type"`
		Op          string  `parquet:"op"`
		Job         string  `parquet:"job"`
		Bytes       int64   `parquet:"bytes"`
		BusyNs      int64   `parquet:"busy_ns"`
		Utilization float64 `parquet:"utilization"`
	}
	var pl []plain
	for _, r := range rows {
		pl = append(pl, plain(r))
	}
	for name, data := range map[string][]byte{
		"reordered":       rawParquet(t, goodKV(), re),
		"plain":           rawParquet(t, goodKV(), pl, parquet.Compression(&parquet.Uncompressed)),
		"small pages":     rawParquet(t, goodKV(), rows, parquet.PageBufferSize(64), parquet.DataPageVersion(1)),
		"row groups of 5": rawParquet(t, goodKV(), rows, parquet.MaxRowsPerRowGroup(5)),
	} {
		m, got, err := Decode(name, bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if m != testMeta() || !reflect.DeepEqual(got, rows) {
			t.Errorf("%s: read back other rows or meta", name)
		}
	}
}

// testdata/loads.parquet is fixtureRows with testMeta (pipelines/interop.sh
// reads it); go test -run Fixture -update rewrites it and the fuzz seeds.
func TestFixture(t *testing.T) {
	path := filepath.Join("testdata", "loads.parquet")
	if *update {
		if err := Write(path, testMeta(), fixtureRows()); err != nil {
			t.Fatal(err)
		}
		writeSeeds(t)
	}
	m, rows, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if m != testMeta() || !reflect.DeepEqual(rows, fixtureRows()) {
		t.Errorf("%s is not fixtureRows with testMeta: go test -run Fixture -update ./formats/links/", path)
	}
}

// testdata/loads-v1.parquet is fixtureRows written as fabricsim.links/v1,
// before the job column: it reads with Job empty.
func TestReadV1(t *testing.T) {
	m, rows, err := Read(filepath.Join("testdata", "loads-v1.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	want := testMeta()
	want.Schema = SchemaV1
	if m != want || !reflect.DeepEqual(rows, fixtureRows()) {
		t.Errorf("v1 file: got %+v and other rows", m)
	}
}

// Jobs round-trip, and sort after group type and op.
func TestJobColumn(t *testing.T) {
	rows := fixtureRows()[:2]
	a, b := rows[0], rows[0]
	a.Job, b.Job = "b", "a"
	in := []Row{a, b, rows[1]}
	for _, name := range []string{"j.parquet", "j.csv"} {
		path := filepath.Join(t.TempDir(), name)
		if err := Write(path, testMeta(), in); err != nil {
			t.Fatal(err)
		}
		if name == "j.csv" {
			data, _ := os.ReadFile(path)
			if !strings.Contains(string(data), ",op,job,bytes,") || !strings.Contains(string(data), ",allreduce,a,") {
				t.Errorf("CSV: %s", data)
			}
			continue
		}
		_, got, err := Read(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[0].Job != "a" || got[1].Job != "b" {
			t.Errorf("read back %+v", got)
		}
	}
}

// writeSeeds writes the fuzz seed corpus: the fixture and the refused files.
func writeSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzRead")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(filepath.Join("testdata", "loads.parquet"))
	seeds := map[string][]byte{"fixture": good}
	for _, c := range badFiles(t) {
		seeds[strings.ReplaceAll(c.name, " ", "-")] = c.data
	}
	for name, data := range seeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzRead: any input gives rows that pass the checks or a one-line error
// naming the input, never a panic.
func FuzzRead(f *testing.F) {
	f.Add([]byte("PAR1"))
	maxRows = 1 << 16 // a few KB of zstd can hold millions of valid rows
	f.Cleanup(func() { maxRows = 0 })
	f.Fuzz(func(t *testing.T, data []byte) {
		_, rows, err := Decode("fuzz", bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "fuzz: ") || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("bad error %q", msg)
			}
			return
		}
		for i := range rows {
			if err := check(&rows[i]); err != nil {
				t.Fatalf("row %d accepted: %v", i, err)
			}
		}
	})
}

// A run whose failed links left flows no path says so in its links file
// (the loads are of what moved); the pair is read back, refused when
// half there or not a count, and absent from a run that delivered all.
func TestFailedRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loads.parquet")
	want := testMeta()
	want.FailedFlows, want.UndeliveredBytes = 78, 44950788
	if err := Write(path, want, fixtureRows()); err != nil {
		t.Fatal(err)
	}
	if m, _, err := Read(path); err != nil || m != want {
		t.Fatalf("read back %+v, %v; want %+v", m, err, want)
	}
	keys, _, err := encodeMeta(testMeta())
	if err != nil || slices.Contains(keys, KeyFailedFlows) || slices.Contains(keys, KeyUndeliveredBytes) {
		t.Errorf("a whole run's keys %v (%v)", keys, err)
	}
	for _, bad := range []Meta{{FailedFlows: -1}, {UndeliveredBytes: 5}} {
		m := testMeta()
		m.FailedFlows, m.UndeliveredBytes = bad.FailedFlows, bad.UndeliveredBytes
		if _, _, err := encodeMeta(m); err == nil {
			t.Errorf("%d failed flows, %d bytes: written", m.FailedFlows, m.UndeliveredBytes)
		}
	}
	vals := encodeMetaMap(t, want)
	for _, c := range []struct {
		key, value, msg string
	}{
		{KeyFailedFlows, "0", `fabricsim.failed_flows is "0", want a positive integer`},
		{KeyFailedFlows, "x", `fabricsim.failed_flows is "x"`},
		{KeyUndeliveredBytes, "-1", `fabricsim.undelivered_bytes is "-1"`},
		{KeyUndeliveredBytes, "", "go together"},
	} {
		kv := maps.Clone(vals)
		if kv[c.key] = c.value; c.value == "" {
			delete(kv, c.key)
		}
		lookup := func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
		if _, err := decodeMeta("f.parquet", lookup); err == nil || !strings.Contains(err.Error(), c.msg) || !strings.HasPrefix(err.Error(), "f.parquet: ") {
			t.Errorf("%s=%q: %v, want %q", c.key, c.value, err, c.msg)
		}
	}
}

// encodeMetaMap is encodeMeta's pairs as a map.
func encodeMetaMap(t *testing.T, m Meta) map[string]string {
	t.Helper()
	keys, values, err := encodeMeta(m)
	if err != nil {
		t.Fatal(err)
	}
	kv := map[string]string{}
	for i, k := range keys {
		kv[k] = values[i]
	}
	return kv
}
