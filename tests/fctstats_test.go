package tests

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/fabricsim/fabricsim/formats/simaifct"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/internal/handtraces"
)

var (
	fctstatsOnce  sync.Once
	fctstatsTrace []byte // the demo run as an Arrow IPC stream
)

// fctstatsDemo runs the demo pipeline (16-GPU Spectrum-X, micro AllReduce
// workload, fluid model) once and returns its Arrow stream.
func fctstatsDemo(t *testing.T) []byte {
	t.Helper()
	fctstatsOnce.Do(func() {
		s := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16")
		s = mustRun(t, s, "ncclpath")
		s = mustRun(t, s, "simccl-decompose", "--workload", "examples/workloads/micro_allreduce.txt", "--tp", "8", "--ep", "2")
		fctstatsTrace = mustRun(t, s, "flowsim-analytical")
	})
	if fctstatsTrace == nil {
		t.Fatal("the demo pipeline failed in an earlier test")
	}
	return fctstatsTrace
}

// fctstatsJSON is the part of fctstats --format json the tests read.
type fctstatsJSON struct {
	Input   string   `json:"input"`
	Columns []string `json:"columns"`
	Totals  struct {
		Rows         int64 `json:"rows"`
		Flows        int64 `json:"flows"`
		Collectives  int   `json:"collectives"`
		SumSizeBytes int64 `json:"sum_size_bytes"`
		SumFctNs     int64 `json:"sum_fct_ns"`
	} `json:"totals"`
	Collectives []struct {
		ID        int64    `json:"collective_id"`
		Op        string   `json:"op"`
		SizeBytes int64    `json:"coll_size_bytes"`
		NRanks    int32    `json:"nranks"`
		TimeNs    int64    `json:"time_ns"`
		AlgbwGBps *float64 `json:"algbw_gbps"`
		BusbwGBps *float64 `json:"busbw_gbps"`
	} `json:"collectives"`
}

func TestFctstatsPipeline(t *testing.T) {
	data := fctstatsDemo(t)
	rows, _ := readTrace(t, data)
	out := string(mustRun(t, data, "fctstats"))
	// One row per collective: 2 TP AllReduces of 1 MiB over 8 ranks, 8 DP
	// AllReduces of 64 MiB over 2, 8 EP AllToAlls of 16 MiB over 2.
	rowRE := regexp.MustCompile(`(?m)^\s+(\d+)\s+(allreduce|alltoall)\s+(1MiB|64MiB|16MiB)\s+(TP|DP|EP)\s+\S+\s+(\d+)\s+\d+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+$`)
	got := rowRE.FindAllStringSubmatch(out, -1)
	if len(got) != 18 {
		t.Fatalf("%d collective rows, want 18:\n%s", len(got), out)
	}
	for _, want := range []string{"<stdin>: analytical-fluid trace (arrow-stream) of spectrum-x, 16 GPUs",
		"Collectives, identical ones together", "Flows by size and connection type", "RING", "all    "} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}

	// JSON totals equal what the trace holds, and busbw follows nccl-tests.
	var j fctstatsJSON
	if err := json.Unmarshal(mustRun(t, data, "fctstats", "--format", "json"), &j); err != nil {
		t.Fatal(err)
	}
	var size, fct int64
	start, end := map[int64]int64{}, map[int64]int64{}
	for _, r := range rows {
		size += r.SizeBytes
		fct += r.FctNs
		if r.CollectiveID < 0 {
			continue
		}
		if s, ok := start[r.CollectiveID]; !ok || r.StartNs < s {
			start[r.CollectiveID] = r.StartNs
		}
		end[r.CollectiveID] = max(end[r.CollectiveID], r.EndNs)
	}
	if j.Totals.Rows != int64(len(rows)) || j.Totals.SumSizeBytes != size || j.Totals.SumFctNs != fct || j.Totals.Collectives != 18 || len(j.Columns) != 26 {
		t.Errorf("totals %+v, columns %d; want rows %d size %d fct %d, 18 collectives, 26 columns", j.Totals, len(j.Columns), len(rows), size, fct)
	}
	for _, c := range j.Collectives {
		if c.TimeNs != end[c.ID]-start[c.ID] || c.AlgbwGBps == nil || c.BusbwGBps == nil {
			t.Errorf("collective %+v: time want %d", c, end[c.ID]-start[c.ID])
			continue
		}
		algbw := float64(c.SizeBytes) / float64(c.TimeNs)
		n := float64(c.NRanks)
		f := map[string]float64{"allreduce": 2 * (n - 1) / n, "alltoall": (n - 1) / n}[c.Op]
		if !fctstatsNear(*c.AlgbwGBps, algbw) || !fctstatsNear(*c.BusbwGBps, algbw*f) {
			t.Errorf("collective %d %s: algbw %v busbw %v, want %v %v", c.ID, c.Op, *c.AlgbwGBps, *c.BusbwGBps, algbw, algbw*f)
		}
	}
}

func fctstatsNear(a, b float64) bool { return a-b <= 1e-9*b && b-a <= 1e-9*b }

func TestFctstatsCompareSelf(t *testing.T) {
	data := fctstatsDemo(t)
	dir := t.TempDir()
	arrows := filepath.Join(dir, "run.arrows")
	os.WriteFile(arrows, data, 0o644)
	// The same run as Parquet: another container, the same flows.
	pq := filepath.Join(dir, "run.parquet")
	rows, _ := readTrace(t, data)
	writeTraceFile(t, pq, rows)
	var c struct {
		MatchedBy   string   `json:"flows_matched_by"`
		Matched     int      `json:"flows_matched"`
		OnlyA       int      `json:"flows_only_a"`
		OnlyB       int      `json:"flows_only_b"`
		MSE         *float64 `json:"mse_us2"`
		Makespan    *float64 `json:"makespan_ratio"`
		Collectives []struct {
			Ratio *float64 `json:"ratio"`
		} `json:"collectives"`
		TotalsA struct {
			Flows int `json:"flows"`
		} `json:"totals_a"`
	}
	if err := json.Unmarshal(mustRun(t, nil, "fctstats", "--compare", arrows, pq, "--format", "json"), &c); err != nil {
		t.Fatal(err)
	}
	if c.MatchedBy != "flow_id" || c.Matched != c.TotalsA.Flows || c.Matched == 0 || c.OnlyA != 0 || c.OnlyB != 0 ||
		c.MSE == nil || *c.MSE != 0 || c.Makespan == nil || *c.Makespan != 1 || len(c.Collectives) != 18 {
		t.Fatalf("self comparison: %+v", c)
	}
	for i, r := range c.Collectives {
		if r.Ratio == nil || *r.Ratio != 1 {
			t.Errorf("collective %d: ratio %v, want 1", i, r.Ratio)
		}
	}
	out := string(mustRun(t, nil, "fctstats", "--compare", arrows, pq))
	for _, want := range []string{"B / A 1.000", "MSE 0.000 us^2", "matched by flow_id"} {
		if !strings.Contains(out, want) {
			t.Errorf("comparison table lacks %q:\n%s", want, out)
		}
	}

	// The run as SimAI's fct.txt (as flowsim-packet --simai-fct writes it)
	// matches the trace flow for flow by (src, dst, size, start order).
	txt := filepath.Join(dir, "fct.txt")
	f, _ := os.Create(txt)
	w := simaifct.NewWriter(f)
	n := 0
	for _, r := range rows {
		if r.ConnType == "DELAY" {
			continue
		}
		n++
		if err := w.Write(&simaifct.Line{SrcNode: r.Src, DstNode: r.Dst, Sport: 10000, Dport: 100, SizeBytes: r.SizeBytes,
			StartNs: r.StartNs, FctNs: r.FctNs, StandaloneFctNs: r.IdealFctNs}); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	f.Close()
	if err := json.Unmarshal(mustRun(t, nil, "fctstats", "--compare", pq, txt, "--format", "json"), &c); err != nil {
		t.Fatal(err)
	}
	if c.MatchedBy != "src,dst,size,start order" || c.Matched != n || c.OnlyA != 0 || c.OnlyB != 0 || *c.MSE != 0 {
		t.Errorf("trace vs its fct.txt: %+v, want all %d flows matched, MSE 0", c, n)
	}
}

// writeTraceFile writes rows to path in the container its extension names.
func writeTraceFile(t *testing.T, path string, rows []trace.Row) {
	t.Helper()
	c, err := trace.ContainerForPath(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := handtraces.EncodeMeta(rows, c, trace.Meta{Backend: "analytical-fluid", Params: map[string]any{},
		Topology: trace.TopologyMeta{Family: "spectrum-x", GPUs: 16, Hash: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFctstatsOutputs(t *testing.T) {
	data := fctstatsDemo(t)
	dir := t.TempDir()
	// csv: the per-collective table, one header and 18 rows.
	recs, err := csv.NewReader(bytes.NewReader(mustRun(t, data, "fctstats", "--format", "csv"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 19 || recs[0][0] != "source" || recs[0][1] != "collective_id" || recs[1][0] != "<stdin>" {
		t.Errorf("csv: %d records, header %v", len(recs), recs[0])
	}
	recs, _ = csv.NewReader(bytes.NewReader(mustRun(t, data, "fctstats", "--format", "csv", "--table", "summary"))).ReadAll()
	if len(recs) != 4 {
		t.Errorf("summary csv: %d records, want header + 3", len(recs))
	}
	md := string(mustRun(t, data, "fctstats", "--format", "markdown", "--max-rows", "0"))
	if !strings.Contains(md, "| id | op | size |") || strings.Count(md, "| allreduce |") != 2+10 {
		t.Errorf("markdown:\n%s", md)
	}
	// parquet to --out, and a PNG plot with timelines.
	pq, png := filepath.Join(dir, "coll.parquet"), filepath.Join(dir, "run.png")
	mustRun(t, data, "fctstats", "--format", "parquet", "--out", pq, "--plot", png, "--timeline")
	for _, c := range []struct{ path, magic string }{{pq, "PAR1"}, {png, "\x89PNG"}} {
		b, err := os.ReadFile(c.path)
		if err != nil || !bytes.HasPrefix(b, []byte(c.magic)) || len(b) < 500 {
			t.Errorf("%s: %d bytes, err %v", c.path, len(b), err)
		}
	}
	// That Parquet table is not a flow trace: fctstats says so, naming
	// what the table's own metadata says it is.
	oneLineError(t, run(t, nil, "fctstats", pq), 1, `coll.parquet: schema metadata fabricsim.schema is "fabricsim.fctstats-table/v1", want "fabricsim.flows/v3"`)
	// --label names the input in the plot; the timeline's axes carry units.
	svg := filepath.Join(dir, "run.svg")
	mustRun(t, data, "fctstats", "--plot", svg, "--timeline", "--label", "micro on 16 GPUs")
	if b, err := os.ReadFile(svg); err != nil || !bytes.Contains(b, []byte("Flows in flight per source node: micro on 16 GPUs")) ||
		!bytes.Contains(b, []byte("time (ms)")) {
		t.Errorf("SVG with --label: %v\n%.2000s", err, b)
	}
	oneLineError(t, run(t, data, "fctstats", "--label", "a"), 2, "--label names the inputs in --plot's legend")
}

func TestFctstatsErrors(t *testing.T) {
	data := fctstatsDemo(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "fct.txt")
	os.WriteFile(bad, []byte("0b000001 0b000101 10000 100 1048576 0 23061 21845\n0b000001 0b000101 10000 100 1048576 0 23061\n"), 0o644)
	oneLineError(t, run(t, nil, "fctstats", bad), 1, "fct.txt: line 2, field standalone_fct_ns: missing: the line has 7 fields")
	os.WriteFile(bad, []byte("0b000001 0b000101 10000 100 1MiB 0 23061 21845\n"), 0o644)
	oneLineError(t, run(t, nil, "fctstats", bad), 1, `fct.txt: line 1, field size_bytes: "1MiB"`)
	oneLineError(t, run(t, data[:len(data)/2], "fctstats"), 1, "<stdin>: truncated Arrow stream")
	oneLineError(t, run(t, []byte{}, "fctstats"), 1, "<stdin>: empty input")
	oneLineError(t, run(t, nil, "fctstats", filepath.Join(dir, "none.parquet")), 1, "none.parquet: no such file")
	// A missing --reference file is named as any input is ("none.csv: no
	// such file"), not as the system call ("open none.csv").
	r := run(t, data, "fctstats", "--format", "nccl-tests", "--plot", filepath.Join(dir, "p.png"), "--reference", filepath.Join(dir, "none.csv"))
	if oneLineError(t, r, 1, "none.csv: no such file"); bytes.Contains(r.stderr, []byte("open ")) {
		t.Errorf("stderr names the system call: %s", r.stderr)
	}
	oneLineError(t, run(t, nil, "fctstats", "--compare", bad), 2, "--compare takes exactly two files")
	oneLineError(t, run(t, data, "fctstats", "--timeline"), 2, "--timeline")
	oneLineError(t, run(t, data, "fctstats", "--plot", filepath.Join(dir, "x.pdf")), 2, ".png or .svg")
	oneLineError(t, run(t, nil, "fctstats", "--compare", bad, bad, "--format", "csv", "--table", "flows"), 2, "--table flows")
}

// fctstats --links reads a per-link load file (formats/links.md): the
// checked-in fixture of formats/links, a 2-tier fabric's DP and EP loads.
func TestFctstatsLinks(t *testing.T) {
	const loads = "formats/links/testdata/loads.parquet"
	dir := t.TempDir()
	text := string(mustRun(t, nil, "fctstats", "--links", loads, "--top", "3"))
	for _, s := range []string{"link loads of analytical-fluid, ecmp routing, flow granularity, fat-tree 4 GPUs: makespan 1.00 ms, 12 directed links carried 176 MiB (24 rows)",
		"  gpu-edge  nic     all         4  54.0 MiB               28.31       31.46\n",
		"Hottest directed links (3 of 12)", "gpu 3 -> edge 5   400 Gbps  15.0 MiB   31.46  DP allreduce 73%, EP alltoall 27%"} {
		if !strings.Contains(text, s) {
			t.Errorf("table lacks %q:\n%s", s, text)
		}
	}
	// csv: the tiers table (4 tiers, each with its total and group types);
	// the same from stdin.
	out := mustRun(t, nil, "fctstats", "--links", loads, "--format", "csv")
	recs, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil || len(recs) != 1+12 || recs[0][1] != "tier" || recs[1][1] != "gpu-edge" || recs[1][5] != "all" {
		t.Errorf("tiers csv (%v):\n%s", err, out)
	}
	data, _ := os.ReadFile(filepath.Join("..", loads))
	if in := mustRun(t, data, "fctstats", "--links", "-", "--format", "csv"); !bytes.Equal(bytes.ReplaceAll(out, []byte(loads), []byte("<stdin>")), in) {
		t.Errorf("from stdin:\n%s", in)
	}
	var js struct {
		Links int   `json:"links"`
		Bytes int64 `json:"bytes"`
		Top   []struct {
			Src, Dst int32
		} `json:"top"`
	}
	if err := json.Unmarshal(mustRun(t, nil, "fctstats", "--links", loads, "--format", "json", "--top", "0"), &js); err != nil ||
		js.Links != 12 || js.Bytes != 176<<20 || len(js.Top) != 12 || js.Top[0].Src != 3 || js.Top[0].Dst != 5 {
		t.Errorf("json: %+v %v", js, err)
	}
	png := filepath.Join(dir, "loads.png")
	mustRun(t, nil, "fctstats", "--links", loads, "--plot", png)
	if b, err := os.ReadFile(png); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("plot: %v", err)
	}
	oneLineError(t, run(t, nil, "fctstats", "--links", "formats/trace/testdata/flows-v1.parquet"), 1,
		`flows-v1.parquet: metadata fabricsim.schema is "fabricsim.flows/v1", want "fabricsim.links/v2" (or "fabricsim.links/v1")`)
	oneLineError(t, run(t, nil, "fctstats", "--links", loads, "x.parquet"), 2, "--links FILE reads one links file")
	oneLineError(t, run(t, nil, "fctstats", "--table", "top", "x.parquet"), 2, "--table top is a table of the link-load report")
}
