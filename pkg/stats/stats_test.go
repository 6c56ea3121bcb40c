package stats

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/internal/handtraces"
)

func TestNearestRank(t *testing.T) {
	// Wikipedia's nearest-rank example: 15 20 35 40 50.
	v := []int64{15, 20, 35, 40, 50}
	for _, c := range []struct {
		p    int
		want int64
	}{{5, 15}, {20, 15}, {30, 20}, {40, 20}, {50, 35}, {95, 50}, {100, 50}} {
		if got := NearestRank(v, c.p); got != c.want {
			t.Errorf("p%d of %v = %d, want %d", c.p, v, got, c.want)
		}
	}
	// 1..20: p95 is the 19th value exactly (0.95*20 rounds up to 20 in
	// floating point), p99 the 20th, p50 the 10th.
	var w []float64
	for i := 1; i <= 20; i++ {
		w = append(w, float64(i))
	}
	for _, c := range []struct {
		p    int
		want float64
	}{{50, 10}, {95, 19}, {99, 20}, {100, 20}, {1, 1}} {
		if got := NearestRank(w, c.p); got != c.want {
			t.Errorf("p%d of 1..20 = %v, want %v", c.p, got, c.want)
		}
	}
	if got := NearestRank([]int64{7}, 99); got != 7 {
		t.Errorf("p99 of one value = %d", got)
	}
}

func TestBusBwFactor(t *testing.T) {
	for _, c := range []struct {
		op   string
		n    int
		want float64
	}{
		{"allreduce", 8, 1.75}, {"ALL_REDUCE", 2, 1}, {"allgather", 8, 0.875}, {"reducescatter", 4, 0.75},
		{"alltoall", 2, 0.5}, {"broadcast", 16, 1}, {"reduce", 3, 1}, {"sendrecv", 2, 1}, {"allreduce", 1, 0},
	} {
		if got := BusBwFactor(c.op, c.n); got != c.want {
			t.Errorf("BusBwFactor(%s, %d) = %v, want %v", c.op, c.n, got, c.want)
		}
	}
	if !math.IsNaN(BusBwFactor("frobnicate", 4)) || !math.IsNaN(BusBwFactor("allreduce", 0)) {
		t.Error("unknown op or no ranks should give NaN")
	}
}

var testMeta = handtraces.Meta

// encode writes rows as a trace in container c.
func encode(t *testing.T, rows []trace.Row, c trace.Container) []byte {
	t.Helper()
	b, err := handtraces.Encode(rows, c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// encodeMeta writes rows as a Parquet trace with metadata m.
func encodeMeta(t *testing.T, rows []trace.Row, m trace.Meta) []byte {
	t.Helper()
	b, err := handtraces.EncodeMeta(rows, trace.Parquet, m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func analyzeBytes(t *testing.T, data []byte, name string, keep bool) *Run {
	t.Helper()
	in, err := NewInput(bytes.NewReader(data), name)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	run, err := Analyze(in, Options{KeepFlows: keep})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// handTrace: three collectives and a compute delay (internal/handtraces).
func handTrace() []trace.Row { return handtraces.Flows() }

func TestAnalyze(t *testing.T) {
	rows := handTrace()
	for _, c := range []trace.Container{trace.ArrowStream, trace.ArrowFile, trace.Parquet} {
		t.Run(c.String(), func(t *testing.T) {
			run := analyzeBytes(t, encode(t, rows, c), "hand", false)
			if run.Input != c.String() || run.Backend != "analytical-busbw" || run.Topology.Family != "test" {
				t.Errorf("input %q backend %q topology %+v", run.Input, run.Backend, run.Topology)
			}
			checkHandRun(t, run)
		})
	}
}

func checkHandRun(t *testing.T, run *Run) {
	t.Helper()
	tot := run.Totals
	wantSize := int64(20*1000 + 1<<20 + 100 + 100)
	wantFct := int64(1000 + 21000 + 4000 + 2000 + 6000 + 500 + 30000) // 100+...+2000 = 21000
	if tot.Rows != 26 || tot.Flows != 24 || tot.DelayRows != 2 || tot.Collectives != 3 ||
		tot.SumSizeBytes != wantSize || tot.SumFctNs != wantFct || tot.StartNs != 0 || tot.EndNs != 30000 || tot.MakespanNs != 30000 {
		t.Errorf("totals %+v, want rows 26 flows 24 delay 2 colls 3 size %d fct %d makespan 30000", tot, wantSize, wantFct)
	}
	want := []struct {
		id           int64
		time         int64
		algbw, busbw float64
		flows        int
	}{{0, 8000, 1000, 1500, 21}, {1, 2000, 2000, 1500, 1}, {2, 6000, 4e6 / 6000.0, 4e6 / 6000.0 * 0.75, 2}}
	if len(run.Collectives) != 3 {
		t.Fatalf("%d collectives, want 3", len(run.Collectives))
	}
	for i, w := range want {
		c := run.Collectives[i]
		if c.ID != w.id || c.TimeNs != w.time || !near(float64(c.AlgbwGBps), w.algbw) || !near(float64(c.BusbwGBps), w.busbw) || c.Flows != w.flows {
			t.Errorf("collective %d: %+v, want time %d algbw %v busbw %v flows %d", i, c, w.time, w.algbw, w.busbw, w.flows)
		}
	}
	if len(run.Summary) != 2 {
		t.Fatalf("summary %+v, want 2 groups", run.Summary)
	}
	s := run.Summary[1]
	if s.Op != "allgather" || s.Count != 2 || float64(s.TimeMeanNs) != 4000 || s.TimeMinNs != 2000 || s.TimeMaxNs != 6000 ||
		!near(float64(s.AlgbwGBps), 1000) || !near(float64(s.BusbwGBps), 750) {
		t.Errorf("allgather summary %+v, want count 2 mean 4000 algbw 1000 busbw 750", s)
	}
	// Buckets, ordered by size then conn_type: 0 B (P2P), [64,128) NET,
	// [512,1Ki) NET, [1Mi,2Mi) NET.
	buckets := map[string]FlowStats{}
	for _, f := range run.Flows {
		buckets[f.Bucket+" "+f.ConnType] = f
	}
	if len(run.Flows) != 4 || run.Flows[0].Bucket != "0B" || run.Flows[3].Bucket != "[1MiB,2MiB)" {
		t.Fatalf("flow buckets %+v", run.Flows)
	}
	b := buckets["[512B,1KiB) NET"]
	if b.Flows != 20 || b.FctP50Ns != 1000 || b.FctP95Ns != 1900 || b.FctP99Ns != 2000 || b.FctMaxNs != 2000 ||
		b.Slowdowns != 20 || b.SlowdownP50 != 10 || b.SlowdownP95 != 19 || b.SlowdownP99 != 20 || b.SlowdownMax != 20 ||
		b.BucketLoBytes != 512 || b.BucketHiBytes != 1024 {
		t.Errorf("[512B,1KiB) NET: %+v, want fct 1000/1900/2000/2000 slowdown 10/19/20/20", b)
	}
	b = buckets["[64B,128B) NET"]
	if b.Flows != 2 || b.Slowdowns != 1 || b.SlowdownMax != 2 || b.FctP50Ns != 2000 || b.FctMaxNs != 6000 {
		t.Errorf("[64B,128B) NET: %+v, want 2 flows, 1 slowdown of 2, fct p50 2000 max 6000", b)
	}
	// All 24 flows: FCTs 100..2000 (20), 2000, 4000, 6000, 500. Sorted:
	// 100 200 300 400 500 500 600 ... ; the 12th is 1100, the 23rd
	// (ceil(.95*24) = 23) is 4000.
	a := run.AllFlows
	if a.Flows != 24 || a.FctP50Ns != 1100 || a.FctP95Ns != 4000 || a.FctP99Ns != 6000 || a.FctMaxNs != 6000 || a.Slowdowns != 23 {
		t.Errorf("all flows: %+v, want 24 flows, fct p50 1100 p95 4000 p99 6000, 23 slowdowns", a)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestReadSimAIFCT(t *testing.T) {
	in := "0b001c01 0b000101 10000 100 1048576 2000 23061 21845\n" +
		"0b000101 0b001c01 10001 100 100 3000 50 0\n"
	// Lines come out as trace rows (see Input).
	rd, err := NewInput(strings.NewReader(in), "fct.txt")
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []trace.Row{
		{FlowID: 0, CollectiveID: -1, Src: 28, Dst: 1, SizeBytes: 1048576, StartNs: 2000, EndNs: 25061, FctNs: 23061, IdealFctNs: 21845, Channel: -1, Layer: -1, Microbatch: -1, Stage: -1, Status: "ok"},
		{FlowID: 1, CollectiveID: -1, Src: 1, Dst: 28, SizeBytes: 100, StartNs: 3000, EndNs: 3050, FctNs: 50, IdealFctNs: 0, Channel: -1, Layer: -1, Microbatch: -1, Stage: -1, Status: "ok"},
	} {
		var got trace.Row
		if err := rd.Next(&got); err != nil || got != want {
			t.Errorf("line %d: %+v, %v; want %+v", i+1, got, err, want)
		}
	}
	if err := rd.Next(&trace.Row{}); err != io.EOF {
		t.Errorf("after the last line: %v, want EOF", err)
	}
	run := analyzeBytes(t, []byte(in), "fct.txt", false)
	if run.Input != "simai-fct" || run.Totals.Rows != 2 || run.Totals.Collectives != 0 || run.Totals.SumSizeBytes != 1048676 {
		t.Fatalf("run %+v", run.Totals)
	}
	if run.AllFlows.Slowdowns != 1 || !near(float64(run.AllFlows.SlowdownMax), 23061.0/21845) {
		t.Errorf("slowdowns %+v: want one, 23061/21845", run.AllFlows)
	}
}

func TestCompareByFlowID(t *testing.T) {
	mk := func(id int64, coll int64, conn string, start, end int64) trace.Row {
		return trace.Row{FlowID: id, CollectiveID: coll, Op: "allreduce", NRanks: 2, CollSizeBytes: 1000, GroupType: "TP", Algorithm: "ring",
			ConnType: conn, Src: 0, Dst: 1, SizeBytes: 10, StartNs: start, EndNs: end, FctNs: end - start, IdealFctNs: 1}
	}
	a := []trace.Row{mk(1, 0, "RING", 0, 1000), mk(2, 0, "RING", 0, 5000), mk(3, 1, "RING", 0, 7000), mk(9, 1, stream.ConnDelay, 7000, 8000)}
	// B: flow 1 is 2 µs slower, flow 2 1 µs faster, flow 3 equal, the delay
	// node is 2 µs longer (not a flow, but part of collective 1), flow 4
	// exists only in B.
	b := []trace.Row{mk(3, 1, "RING", 0, 7000), mk(1, 0, "RING", 0, 3000), mk(2, 0, "RING", 0, 4000), mk(9, 1, stream.ConnDelay, 7000, 10000), mk(4, 1, "RING", 0, 10)}
	ra := analyzeBytes(t, encode(t, a, trace.ArrowStream), "a", true)
	rb := analyzeBytes(t, encode(t, b, trace.Parquet), "b", true)
	c, err := Compare(ra, rb)
	if err != nil {
		t.Fatal(err)
	}
	// Errors 2, -1, 0 µs: MSE (4+1+0)/3 µs², mean error 1/3 µs.
	if c.A != "a" || c.B != "b" || c.MatchedBy != MatchByID || c.Matched != 3 || c.OnlyA != 0 || c.OnlyB != 1 || c.FlowsA != 3 || c.FlowsB != 4 ||
		!near(float64(c.MSEus2), 5.0/3) || !near(float64(c.RMSEus), math.Sqrt(5.0/3)) || !near(float64(c.MeanErrUs), 1.0/3) || c.MaxAbsErrNs != 2000 {
		t.Errorf("comparison %+v, want 3 matched, MSE 5/3 us^2, mean error 1/3 us, max 2000 ns", c)
	}
	// Collective 0: 5000 -> 4000 ns; 1: 8000 -> 10000.
	if len(c.Collectives) != 2 || c.Collectives[0].TimeANs != 5000 || c.Collectives[0].TimeBNs != 4000 || !near(float64(c.Collectives[0].Ratio), 0.8) ||
		c.Collectives[1].TimeANs != 8000 || c.Collectives[1].TimeBNs != 10000 || !near(float64(c.Collectives[1].Ratio), 1.25) {
		t.Errorf("collective ratios %+v", c.Collectives)
	}
	// Both collectives together: means A (5000+8000)/2 = 6500, B
	// (4000+10000)/2 = 7000.
	if len(c.Summary) != 1 || c.Summary[0].Count != 2 || c.Summary[0].TimeMeanANs != 6500 || c.Summary[0].TimeMeanBNs != 7000 ||
		!near(float64(c.Summary[0].Ratio), 7000.0/6500) {
		t.Errorf("summary %+v, want both collectives together, means 6500 (A) and 7000 (B)", c.Summary)
	}
	if c.MakespanANs != 8000 || c.MakespanBNs != 10000 || !near(float64(c.MakespanRatio), 1.25) {
		t.Errorf("makespans %d, %d, ratio %v; want 8000, 10000, 1.25", c.MakespanANs, c.MakespanBNs, c.MakespanRatio)
	}
	// The other way round every difference changes sign and every ratio
	// inverts.
	r, err := Compare(rb, ra)
	if err != nil {
		t.Fatal(err)
	}
	if r.Matched != 3 || r.OnlyA != 1 || r.OnlyB != 0 || !near(float64(r.MSEus2), 5.0/3) || !near(float64(r.MeanErrUs), -1.0/3) ||
		r.Collectives[1].TimeANs != 10000 || !near(float64(r.Collectives[1].Ratio), 0.8) ||
		r.Summary[0].TimeMeanANs != 7000 || r.Summary[0].TimeMeanBNs != 6500 || !near(float64(r.MakespanRatio), 0.8) {
		t.Errorf("B vs A: %+v", r)
	}
	self, _ := Compare(ra, ra)
	if self.MSEus2 != 0 || self.Matched != 3 || self.Collectives[0].Ratio != 1 || self.Summary[0].TimeMeanANs != 6500 || self.Summary[0].TimeMeanBNs != 6500 {
		t.Errorf("run vs itself: %+v", self)
	}
}

func TestCompareByOrder(t *testing.T) {
	// A is SimAI's fct.txt: 0->1 100 B at 10 ns (fct 100) and at 20 ns
	// (fct 300), and 0->2. B is a trace: 0->1 100 B at 50 (fct 200) and at 15
	// (fct 100), and 1->0. In start order the pairs are (100, 100) and
	// (300, 200): errors 0 and -0.1 µs, MSE 0.01/2 = 0.005 µs².
	fct := "0b000001 0b000101 1 1 100 10 100 50\n" +
		"0b000001 0b000101 1 1 100 20 300 50\n" +
		"0b000001 0b000201 1 1 100 20 300 50\n"
	b := []trace.Row{
		{FlowID: 7, CollectiveID: 0, Src: 0, Dst: 1, SizeBytes: 100, StartNs: 50, EndNs: 250, FctNs: 200, ConnType: "NET"},
		{FlowID: 8, CollectiveID: 0, Src: 0, Dst: 1, SizeBytes: 100, StartNs: 15, EndNs: 115, FctNs: 100, ConnType: "NET"},
		{FlowID: 9, CollectiveID: 0, Src: 1, Dst: 0, SizeBytes: 100, StartNs: 15, EndNs: 115, FctNs: 100, ConnType: "NET"},
		{FlowID: 10, CollectiveID: 0, Src: 0, Dst: 0, StartNs: 0, EndNs: 5, FctNs: 5, ConnType: stream.ConnDelay},
	}
	ra := analyzeBytes(t, []byte(fct), "fct.txt", true)
	rb := analyzeBytes(t, encode(t, b, trace.ArrowFile), "b.arrow", true)
	c, err := Compare(ra, rb)
	if err != nil {
		t.Fatal(err)
	}
	if c.MatchedBy != MatchByOrder || c.Matched != 2 || c.OnlyA != 1 || c.OnlyB != 1 || !near(float64(c.MSEus2), 0.005) || c.MaxAbsErrNs != 100 {
		t.Errorf("comparison %+v, want 2 matched by order, MSE 0.005 us^2", c)
	}
	if len(c.Collectives) != 0 || c.CollectivesOnlyB != 1 {
		t.Errorf("collectives %+v only B %d: fct.txt has none", c.Collectives, c.CollectivesOnlyB)
	}
}

func TestInputErrors(t *testing.T) {
	bad := handTrace()
	bad[3].EndNs = bad[3].StartNs - 1
	for _, c := range []struct {
		name, data, want string
	}{
		{"empty", "", "empty: empty input"},
		{"text", "flow_id,src,dst\n1,2,3\n", `text: line 1, field dst_ip: missing: the line has 1 fields`},
		{"seven.txt", "0b000001 0b000101 1 2 3 4 5\n", "seven.txt: line 1, field standalone_fct_ns: missing"},
		{"junk", "\xff\xff\xff\xffjunk", "junk:"},
		{"backwards", string(encode(t, bad, trace.ArrowStream)), "backwards: row 3 (flow_id 3), field end_ns: 1999 is before start_ns 2000"},
	} {
		in, err := NewInput(strings.NewReader(c.data), c.name)
		if err == nil {
			_, err = Analyze(in, Options{})
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line containing %q", c.name, err, c.want)
		}
	}
	// Open names the file and tells a text file from a trace by content.
	dir := t.TempDir()
	p := filepath.Join(dir, "run.parquet")
	os.WriteFile(p, []byte("0b000001 0b000101 1 2 3 4 5 6 7\n"), 0o644)
	in, err := Open(p)
	if err == nil {
		_, err = Analyze(in, Options{})
	}
	if err == nil || !strings.Contains(err.Error(), "run.parquet: line 1, field 9") {
		t.Errorf("text named .parquet: %v", err)
	}
	if _, err := Open(filepath.Join(dir, "missing.parquet")); err == nil || !strings.HasPrefix(err.Error(), filepath.Join(dir, "missing.parquet")+": ") {
		t.Errorf("missing file: %v", err)
	}
}

func TestDataTables(t *testing.T) {
	run := analyzeBytes(t, encode(t, handTrace(), trace.Parquet), "hand.parquet", false)
	dt, err := run.DataTable(TableCollectives)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := dt.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || lines[0] != "source,collective_id,op,algorithm,group_type,coll_size_bytes,nranks,status,failed_flows,flows,flow_bytes,start_ns,end_ns,time_ns,algbw_gbps,busbw_gbps" ||
		lines[1] != "hand.parquet,0,allreduce,ring,DP,8000000,4,ok,0,21,1068576,1000,9000,8000,1000,1500" {
		t.Errorf("csv:\n%s", b.String())
	}
	// JSON and CSV name columns alike.
	j, _ := json.Marshal(run.Collectives[0])
	for _, name := range dt.Names[1:] {
		if !strings.Contains(string(j), `"`+name+`":`) {
			t.Errorf("csv column %s not in JSON %s", name, j)
		}
	}
	// NaN is an empty CSV field and JSON null.
	ft, _ := run.DataTable(TableBuckets)
	b.Reset()
	ft.WriteCSV(&b)
	if !strings.Contains(b.String(), "hand.parquet,0B,0,0,P2P,1,500,500,500,500,1,1,1,1,1\n") {
		t.Errorf("flows csv:\n%s", b.String())
	}
	if j, _ := json.Marshal(Num(math.NaN())); string(j) != "null" {
		t.Errorf("NaN as JSON: %s", j)
	}
	// Parquet: same columns, in order, and rows.
	b.Reset()
	if err := dt.WriteParquet(&b, nil); err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, fl := range f.Schema().Fields() {
		cols = append(cols, fl.Name())
	}
	if strings.Join(cols, ",") != strings.Join(dt.Names, ",") || f.NumRows() != 3 {
		t.Errorf("parquet columns %v rows %d, want %v and 3", cols, f.NumRows(), dt.Names)
	}
	if _, err := run.DataTable("nope"); err == nil {
		t.Error("unknown table accepted")
	}
}

func TestText(t *testing.T) {
	run := analyzeBytes(t, encode(t, handTrace(), trace.Parquet), "hand.parquet", false)
	var b bytes.Buffer
	run.WriteText(&b, 2)
	out := b.String()
	for _, want := range []string{
		"hand.parquet: analytical-busbw trace (parquet) of test, 4 GPUs: 26 rows = 24 flows + 2 delay nodes",
		"1.019MiB, 3 collectives, makespan 30us", // the unit from the value
		"allgather  4MB   DP     ring      4      2    4.000   2.000   6.000     1000.00      750.00",
		"... 1 more collectives",
		"[512B,1KiB)  NET      20",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// One collective is "1 collective".
	var one []trace.Row
	for _, r := range handTrace() {
		if r.CollectiveID == 0 {
			one = append(one, r)
		}
	}
	b.Reset()
	analyzeBytes(t, encode(t, one, trace.Parquet), "one.parquet", false).WriteText(&b, 2)
	if !strings.Contains(b.String(), ", 1 collective, makespan 8us") {
		t.Errorf("one collective's headline:\n%s", b.String())
	}
	b.Reset()
	run.WriteMarkdown(&b, 0)
	if !strings.Contains(b.String(), "| 2 | allgather | 4MB | DP | ring | 4 | 2 | 20.000 | 6.000 | 666.67 | 500.00 |") {
		t.Errorf("markdown:\n%s", b.String())
	}
}

// The run's slowdowns, per conn_type and together, as the CDF plot draws them.
func TestSlowdownSeries(t *testing.T) {
	run := analyzeBytes(t, encode(t, handTrace(), trace.ArrowStream), "hand", true)
	if s := run.SlowdownSeries(); len(s) != 3 || s[0].Name != "NET" || s[1].Name != "P2P" || s[2].Name != "all" || len(s[2].Values) != 23 {
		t.Errorf("series %+v", s)
	}
	if a := run.AllSlowdowns(); len(a) != 23 || !slices.IsSorted(a) || a[0] != 1 || a[22] != 20 {
		t.Errorf("all slowdowns %v, want 23 sorted from 1 to 20", a)
	}
	if f := run.KeptFlows(); len(f) != 26 {
		t.Errorf("%d kept flows, want the trace's 26", len(f))
	}
}

// A fabricsim.flows/v1 trace still reads; its columns are v1's 17.
func TestReadTraceV1(t *testing.T) {
	in, err := Open(filepath.Join("..", "..", "formats", "trace", "testdata", "flows-v1.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if cols := in.Columns(); len(cols) != 17 || cols[16] != "nranks" {
		t.Errorf("v1 columns %v", cols)
	}
	var r trace.Row
	if err := in.Next(&r); err != nil || r.Layer != -1 || r.Status != "ok" {
		t.Errorf("first row %+v, %v", r, err)
	}
}

// Latency curves bin flows by when they end and compare the bins' mean
// latencies: computed by hand for a whole run and for a window.
func TestCompareCurves(t *testing.T) {
	mk := func(id, start, end int64, conn string) trace.Row {
		return trace.Row{FlowID: id, CollectiveID: 0, Op: "allreduce", NRanks: 2, ConnType: conn, Src: 0, Dst: 1, SizeBytes: 10,
			StartNs: start, EndNs: end, FctNs: end - start, IdealFctNs: 1}
	}
	// A: bin [0, 1 µs) holds 500 and 900 ns (mean 700), [1, 2) 500, [2, 3)
	// 600 (A only). B: [0, 1) 990, [1, 2) 700 and 100 (mean 400), [3, 4) 100
	// (B only); its delay node ends in [0, 1) and does not count.
	a := []trace.Row{mk(1, 0, 500, "RING"), mk(2, 0, 900, "RING"), mk(3, 1000, 1500, "RING"), mk(4, 2000, 2600, "RING")}
	b := []trace.Row{mk(1, 0, 990, "RING"), mk(2, 500, 1200, "RING"), mk(3, 1000, 1100, "RING"), mk(5, 3000, 3100, "RING"), mk(9, 0, 999, stream.ConnDelay)}
	ra := analyzeBytes(t, encode(t, a, trace.ArrowStream), "a", true)
	rb := analyzeBytes(t, encode(t, b, trace.ArrowStream), "b", true)
	c, err := CompareWindow(ra, rb, 0, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// Errors +0.29 and -0.1 µs.
	if c.CurveBinNs != 1000 || c.CurveBins != 2 || c.CurveOnlyA != 1 || c.CurveOnlyB != 1 ||
		!near(float64(c.CurveMSEus2), (0.29*0.29+0.1*0.1)/2) || !near(float64(c.CurveMeanErrUs), (0.29-0.1)/2) {
		t.Errorf("curves %d bins (%d A only, %d B only), MSE %v, mean error %v; want 2 (1, 1), MSE %v, mean error %v",
			c.CurveBins, c.CurveOnlyA, c.CurveOnlyB, c.CurveMSEus2, c.CurveMeanErrUs, (0.29*0.29+0.1*0.1)/2, (0.29-0.1)/2)
	}
	// Window [1, 3) µs: bins from its start; [1, 2) in both (500 against
	// 400), [2, 3) in A only; B's flow ending at 3.1 µs is outside.
	c, err = CompareWindow(ra, rb, 1000, 3000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if c.CurveBins != 1 || c.CurveOnlyA != 1 || c.CurveOnlyB != 0 || !near(float64(c.CurveMSEus2), 0.01) || !near(float64(c.CurveMeanErrUs), -0.1) {
		t.Errorf("window [1, 3) us: %d bins (%d A only, %d B only), MSE %v, mean error %v; want 1 (1, 0), MSE 0.01, mean error -0.1",
			c.CurveBins, c.CurveOnlyA, c.CurveOnlyB, c.CurveMSEus2, c.CurveMeanErrUs)
	}
	if _, err := CompareWindow(ra, rb, 0, 0, 0); err == nil {
		t.Error("a bin of 0 ns was accepted")
	}
	// A's curve by itself: bins at 0.5, 1.5 and 2.5 us of means 700, 500
	// and 600 ns.
	cv := ra.LatencyCurve(1000)
	ms, us := cv.Ms, cv.Us
	if len(ms) != 3 || !near(ms[0], 0.0005) || !near(ms[2], 0.0025) || !near(us[0], 0.7) || !near(us[1], 0.5) || !near(us[2], 0.6) {
		t.Errorf("A's latency curve %v ms, %v us; want 0.0005, 0.0015, 0.0025 ms and 0.7, 0.5, 0.6 us", ms, us)
	}
}
