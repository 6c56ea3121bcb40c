package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/formats/trace"
)

// A run stopped early (here at SIMULATOR_STOP_TIME) leaves a trace that
// says it is partial, with the count of flows that never finished; every
// fctstats mode refuses it by default in one line, and --allow-partial
// marks every output PARTIAL.
func TestPartialTraceNotWhole(t *testing.T) {
	st := mustRun(t, mustRun(t, nil, "topogen", "--gpus", "16"), "simccl-decompose", "--op", "allreduce", "--size", "64MiB", "--group", "dp", "--tp", "8")
	dir := t.TempDir()
	path := filepath.Join(dir, "stopped.parquet")
	mustRun(t, st, "flowsim-packet", "--set", "SIMULATOR_STOP_TIME=300000", "-o", path)
	whole := filepath.Join(dir, "whole.parquet")
	mustRun(t, st, "flowsim-packet", "-o", whole)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rows, meta := readTrace(t, data)
	wdata, _ := os.ReadFile(whole)
	wrows, wmeta := readTrace(t, wdata)
	if wmeta.Partial() {
		t.Fatalf("the whole run's trace says partial")
	}
	unfinished := int64(len(wrows) - len(rows))
	if len(rows) == 0 || unfinished <= 0 || meta.Unfinished != unfinished {
		t.Fatalf("stopped run: %d rows of %d, metadata says %d unfinished", len(rows), len(wrows), meta.Unfinished)
	}
	n := strconv.FormatInt(unfinished, 10)
	for _, args := range [][]string{
		{path}, {"--format", "json", path}, {"--format", "csv", path}, {"--format", "markdown", path},
		{"--format", "nccl-tests", path}, {"--table", "flows", "--format", "csv", path},
		{"--compare", whole, path}, {"--compare", path, whole}, {"--iteration", path},
	} {
		r := run(t, nil, "fctstats", args...)
		oneLineError(t, r, 1, "fctstats: "+path+": partial trace", n+" flows never finished", "--allow-partial")
	}
	// From a pipe too.
	oneLineError(t, run(t, data, "fctstats"), 1, "partial trace", n+" flows never finished")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{path}, "PARTIAL (the run stopped early; " + n + " flows never finished"},
		{[]string{"--format", "markdown", path}, "## PARTIAL (the run stopped early; " + n},
		{[]string{"--format", "nccl-tests", path}, "# PARTIAL: the run stopped early; " + n},
		{[]string{"--format", "json", path}, `"partial":true,"unfinished_flows":` + n},
		{[]string{"--format", "csv", path}, ",partial,unfinished_flows\n"},
		{[]string{"--format", "csv", "--table", "summary", path}, ",true," + n + "\n"},
		{[]string{"--table", "flows", "--format", "csv", path}, path + " [PARTIAL: " + n + " flows never finished]"},
		{[]string{"--compare", whole, path}, "PARTIAL: a run stopped early; flows that never finished: 0 in A, " + n + " in B"},
		{[]string{"--compare", "--format", "json", whole, path}, `"unfinished_flows_b":` + n},
	} {
		out := mustRun(t, nil, "fctstats", append([]string{"--allow-partial"}, c.args...)...)
		if !strings.Contains(string(out), c.want) {
			t.Errorf("--allow-partial %v: output lacks %q:\n%.600s", c.args, c.want, out)
		}
	}
	svg := filepath.Join(dir, "cdf.svg")
	mustRun(t, nil, "fctstats", "--allow-partial", path, "--plot", svg)
	if b, err := os.ReadFile(svg); err != nil || !bytes.Contains(b, []byte("PARTIAL (a run stopped early)")) {
		t.Errorf("plot title does not say PARTIAL: %v", err)
	}
	// A whole trace reads as before, and is not marked.
	if out := mustRun(t, nil, "fctstats", "--allow-partial", "--format", "json", whole); bytes.Contains(out, []byte(`"partial"`)) {
		t.Errorf("a whole trace is marked partial")
	}
}

// A failed NIC link (LINK_DOWN) cuts off some AllToAll flows: the
// collective is reported failed, without a time and bandwidth as if it
// completed, in every format.
func TestFailedCollectiveReported(t *testing.T) {
	topoOut := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16", "--gpu-type", "A100", "--nic-bw", "100Gbps")
	leaf := int32(-1)
	for _, l := range readTopology(t, topoOut).Links {
		if l.Kind == stream.LinkNIC && (l.A == 0 || l.B == 0) {
			leaf = l.A + l.B // the end that is not GPU 0
		}
	}
	st := mustRun(t, topoOut, "simccl-decompose", "--op", "alltoall", "--size", "64MiB", "--group", "dp", "--tp", "1")
	path := filepath.Join(t.TempDir(), "down.parquet")
	oneLineError(t, run(t, st, "flowsim-packet", "--set", "LINK_DOWN=20000 0 "+strconv.Itoa(int(leaf)), "-o", path), 1, "status failed")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := readTrace(t, data)
	failedIn := map[int64]int{}
	for _, r := range rows {
		if r.Status == trace.StatusFailed {
			failedIn[r.CollectiveID]++
		}
	}
	if len(failedIn) == 0 {
		t.Fatal("no failed flow in the trace")
	}
	var rep struct {
		Totals struct {
			FailedFlows int64 `json:"failed_flows"`
		} `json:"totals"`
		Collectives []struct {
			ID          int64    `json:"collective_id"`
			Status      string   `json:"status"`
			FailedFlows int      `json:"failed_flows"`
			Busbw       *float64 `json:"busbw_gbps"`
		} `json:"collectives"`
	}
	if err := json.Unmarshal(mustRun(t, nil, "fctstats", "--format", "json", path), &rep); err != nil {
		t.Fatal(err)
	}
	failedColls := 0
	for _, c := range rep.Collectives {
		want := failedIn[c.ID]
		if c.FailedFlows != want || (want > 0) != (c.Status == "failed") || (want > 0) != (c.Busbw == nil) {
			t.Errorf("collective %d: %+v, %d failed flows in the trace", c.ID, c, want)
		}
		if want > 0 {
			failedColls++
		}
	}
	if failedColls != len(failedIn) {
		t.Errorf("%d collectives reported failed, %d in the trace", failedColls, len(failedIn))
	}
	text := string(mustRun(t, nil, "fctstats", path))
	if !strings.Contains(text, "FAILED (") || !strings.Contains(text, "collectives did not complete") {
		t.Errorf("table:\n%s", text)
	}
	nt := string(mustRun(t, nil, "fctstats", "--format", "nccl-tests", path))
	if !strings.Contains(nt, "FAILED     N/A     N/A") || !strings.Contains(nt, "# FAILED: ") {
		t.Errorf("nccl-tests:\n%s", nt)
	}
	csv := string(mustRun(t, nil, "fctstats", "--format", "csv", path))
	if !strings.Contains(csv, ",failed,") {
		t.Errorf("csv:\n%s", csv)
	}
}

// fctstats refuses nonsense: a trace with its rows written twice, a
// --compare of two different workloads, an EndToEnd.csv total of 1e308.
func TestFctstatsRefusesNonsense(t *testing.T) {
	topoOut := mustRun(t, nil, "topogen", "--gpus", "16")
	dir := t.TempDir()
	ar := filepath.Join(dir, "allreduce.parquet")
	mustRun(t, mustRun(t, topoOut, "simccl-decompose", "--op", "allreduce", "--size", "1MiB", "--group", "dp", "--tp", "8"), "flowsim-analytical", "-o", ar)
	sr := filepath.Join(dir, "other.parquet")
	mustRun(t, mustRun(t, topoOut, "simccl-decompose", "--op", "allgather", "--size", "1MiB", "--group", "dp", "--tp", "8"), "flowsim-analytical", "-o", sr)

	data, _ := os.ReadFile(ar)
	rows, meta := readTrace(t, data)
	dup := filepath.Join(dir, "dup.parquet")
	w, err := trace.Create(dup, trace.Meta{Backend: meta.Backend, Params: meta.Params, Topology: meta.Topology})
	if err != nil {
		t.Fatal(err)
	}
	for _, rs := range [][]trace.Row{rows, rows} {
		for i := range rs {
			w.Write(&rs[i])
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{dup}, {"--format", "csv", "--table", "flows", dup}, {"--compare", ar, dup}} {
		oneLineError(t, run(t, nil, "fctstats", args...), 1, dup+": row "+strconv.Itoa(len(rows))+", field flow_id: "+strconv.FormatInt(rows[0].FlowID, 10)+" is a duplicate")
	}
	oneLineError(t, run(t, nil, "fctstats", "--compare", ar, sr), 1, "are not runs of the same workload: collective 0 is allreduce 1MiB", "in A, allgather")
	mustRun(t, nil, "fctstats", "--compare", ar, ar)

	wl := filepath.Join(dir, "w.txt")
	line := "attention_layer\t-1\t2000000\tALLREDUCE\t1048576\t2000000\tALLREDUCE\t1048576\t2000000\tALLREDUCE\t16777216\t100\n"
	os.WriteFile(wl, []byte("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 pp: 2 ga: 4 vpp: 1 pp_comm: 1048576\n2\n"+strings.Repeat(line, 2)), 0o644)
	it := filepath.Join(dir, "it.parquet")
	mustRun(t, mustRun(t, topoOut, "simccl-decompose", "--workload", wl), "flowsim-analytical", "-o", it)
	e2e := string(mustRun(t, nil, "fctstats", "--iteration", it, "--format", "simai-e2e"))
	lines := strings.SplitN(e2e, "\n", 3)
	f := strings.Split(lines[1], ",")
	f[len(f)-1] = "1e308"
	bad := filepath.Join(dir, "EndToEnd.csv")
	os.WriteFile(bad, []byte(lines[0]+"\n"+strings.Join(f, ",")+"\n"+lines[2]), 0o644)
	oneLineError(t, run(t, nil, "fctstats", "--iteration", "--compare", it, bad), 1, bad+": line 2, field Total time", "1e308")
}

// A run stopped mid-workload (flowsim-packet at SIMULATOR_STOP_TIME) says
// in its trace which collectives the stop cut, counted against the
// stream's own flows; fctstats --allow-partial marks each of them, and
// only them, in every format: no cut collective reads as complete.
func TestPartialTraceMarksCutCollectives(t *testing.T) {
	st := mustPipe(t, nil, []string{"topogen", "--family", "spectrum-x", "--gpus", "16"},
		[]string{"simccl-decompose", "--workload", "examples/workloads/micro_allreduce.txt", "--tp", "8", "--ep", "2"})
	path := filepath.Join(t.TempDir(), "stop.parquet")
	mustRun(t, st, "flowsim-packet", "--set", "SIMULATOR_STOP_TIME=100us", "-o", path)
	rows, meta := readTraceFile(t, path)
	inStream, inTrace := map[int64]int64{}, map[int64]int64{}
	for _, f := range readDAG(t, st).flows {
		if f.Collective >= 0 {
			inStream[f.Collective]++
		}
	}
	for _, r := range rows {
		if r.CollectiveID >= 0 {
			inTrace[r.CollectiveID]++
		}
	}
	want := &trace.Cut{Collectives: []trace.CutCollective{}}
	for id := range int64(len(inStream)) {
		switch n := inTrace[id]; {
		case n == 0:
			want.NotStarted++
		case n < inStream[id]:
			want.Collectives = append(want.Collectives, trace.CutCollective{ID: id, Finished: n, Flows: inStream[id]})
		}
	}
	if len(want.Collectives) == 0 || want.NotStarted == 0 || len(inTrace) == len(want.Collectives) {
		t.Fatalf("the stop at 100 us should cut some collectives, leave some whole and some not started: %+v", want)
	}
	if !reflect.DeepEqual(meta.Cut, want) {
		t.Fatalf("fabricsim.cut %+v, the stream and the rows say %+v", meta.Cut, want)
	}
	cut := map[int64]int64{}
	for _, c := range want.Collectives {
		cut[c.ID] = c.Flows - c.Finished
	}
	var rep struct {
		Collectives []struct {
			ID       int64    `json:"collective_id"`
			Status   string   `json:"status"`
			CutFlows int64    `json:"cut_flows"`
			Busbw    *float64 `json:"busbw_gbps"`
		} `json:"collectives"`
	}
	if err := json.Unmarshal(mustRun(t, nil, "fctstats", "--allow-partial", "--format", "json", path), &rep); err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Collectives {
		n, isCut := cut[c.ID]
		if isCut != (c.Status == "cut") || c.CutFlows != n || isCut != (c.Busbw == nil) {
			t.Errorf("collective %d: %+v, %d flows cut", c.ID, c, n)
		}
	}
	text := string(mustRun(t, nil, "fctstats", "--allow-partial", path))
	csv := string(mustRun(t, nil, "fctstats", "--allow-partial", "--format", "csv", path))
	for id, n := range cut {
		if !regexp.MustCompile(`(?m)^ +` + strconv.FormatInt(id, 10) + ` .* >=[0-9.]+ CUT \(` + strconv.FormatInt(n, 10) + ` flows unfinished\)`).MatchString(text) {
			t.Errorf("table: collective %d not marked CUT:\n%s", id, text)
		}
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(path) + `,` + strconv.FormatInt(id, 10) + `,[^\n]*,cut,0,` + strconv.FormatInt(n, 10) + `,[^\n]*,,,true,`).MatchString(csv) {
			t.Errorf("csv: collective %d not cut without bandwidths:\n%s", id, csv)
		}
	}
	if strings.Count(csv, ",cut,") != len(cut) || strings.Count(text, " CUT (") != len(cut) {
		t.Errorf("other collectives marked cut:\n%s\n%s", text, csv)
	}
	nt := string(mustRun(t, nil, "fctstats", "--allow-partial", "--format", "nccl-tests", path))
	if strings.Count(nt, "     CUT     N/A     N/A") != len(cut) {
		t.Errorf("nccl-tests:\n%s", nt)
	}
}

// fctstats' Parquet tables say what they are in their key/value metadata
// (schema, producer, table, sources, partial), and --allow-partial's
// partial column is BOOLEAN, also after a sweep's CSVs are gathered.
func TestFctstatsParquetTableMeta(t *testing.T) {
	st := mustRun(t, mustRun(t, nil, "topogen", "--gpus", "16"), "simccl-decompose", "--op", "allreduce", "--size", "1MiB", "--group", "dp", "--tp", "8")
	dir := t.TempDir()
	stop, whole := filepath.Join(dir, "stop.parquet"), filepath.Join(dir, "whole.parquet")
	mustRun(t, st, "flowsim-packet", "--set", "SIMULATOR_STOP_TIME=20us", "-o", stop)
	mustRun(t, st, "flowsim-analytical", "-o", whole)
	read := func(args ...string) (*parquet.File, map[string]string) {
		t.Helper()
		out := filepath.Join(dir, "t.parquet")
		mustRun(t, nil, "fctstats", append(args, "--format", "parquet", "-o", out)...)
		f := openParquet(t, out)
		kv := map[string]string{}
		for _, k := range []string{"fabricsim.schema", "fabricsim.producer", "fabricsim.table", "fabricsim.sources", "fabricsim.partial"} {
			kv[k], _ = f.Lookup(k)
		}
		return f, kv
	}
	f, kv := read("--allow-partial", "--table", "summary", whole, stop)
	want := map[string]string{"fabricsim.schema": "fabricsim.fctstats-table/v1", "fabricsim.producer": "fctstats 0.1.0", "fabricsim.table": "summary",
		"fabricsim.sources": `["` + whole + `","` + stop + `"]`, "fabricsim.partial": "true"}
	if !reflect.DeepEqual(kv, want) {
		t.Errorf("metadata %v, want %v", kv, want)
	}
	if c, ok := f.Schema().Lookup("partial"); !ok || c.Node.Type().Kind() != parquet.Boolean {
		t.Errorf("partial column: %v", c.Node)
	}
	if _, kv = read(whole); kv["fabricsim.partial"] != "false" || kv["fabricsim.table"] != "collectives" {
		t.Errorf("a whole run's table: %v", kv)
	}
	// The per-flow table, written as it reads, says so too (review r7b).
	want["fabricsim.table"], want["fabricsim.sources"] = "flows", `["`+stop+`"]`
	if _, kv = read("--allow-partial", "--table", "flows", stop); !reflect.DeepEqual(kv, want) {
		t.Errorf("flows table: metadata %v, want %v", kv, want)
	}
	// A sweep's points as CSV, gathered: partial stays a boolean.
	var csvs []string
	for i, in := range []string{whole, stop} {
		p := filepath.Join(dir, strconv.Itoa(i)+".csv")
		if err := os.WriteFile(p, mustRun(t, nil, "fctstats", "--allow-partial", "--format", "csv", "--table", "summary", in), 0o644); err != nil {
			t.Fatal(err)
		}
		csvs = append(csvs, p)
	}
	svg := filepath.Join(dir, "sweep.svg")
	f, kv = read(append([]string{"--concat", "--x", "unfinished_flows", "--y", "count", "--plot", svg}, csvs...)...)
	if c, ok := f.Schema().Lookup("partial"); !ok || c.Node.Type().Kind() != parquet.Boolean || kv["fabricsim.partial"] != "true" || kv["fabricsim.table"] != "concat" {
		t.Errorf("concat: partial %v, metadata %v", c.Node, kv)
	}
	if b, err := os.ReadFile(svg); err != nil || !bytes.Contains(b, []byte("PARTIAL (a run stopped early)")) {
		t.Errorf("the sweep's plot of a partial point does not say PARTIAL: %v", err)
	}
}

// openParquet opens a Parquet file the test wrote, to read its
// schema and key/value metadata.
func openParquet(t *testing.T, path string) *parquet.File {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Two jobs merged, stopped while job b's AllReduce runs: the trace says
// job b has unfinished flows (as many as its stream has flows without a
// row) and a does not, and fctstats' headline gives b's span as a lower
// bound marked CUT.
func TestPartialMergedJobsCut(t *testing.T) {
	topoOut := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16")
	dir := t.TempDir()
	var streams []string
	flows := map[string]int64{}
	for _, j := range []struct{ name, place, size string }{{"a", "0-7", "1MiB"}, {"b", "8-15", "64MiB"}} {
		st := mustRun(t, topoOut, "simccl-decompose", "--job", j.name, "--place", j.place, "--op", "allreduce", "--size", j.size, "--group", "tp", "--tp", "8")
		flows[j.name] = int64(len(readDAG(t, st).flows))
		p := filepath.Join(dir, j.name+".stream")
		if err := os.WriteFile(p, st, 0o644); err != nil {
			t.Fatal(err)
		}
		streams = append(streams, p)
	}
	path := filepath.Join(dir, "mix.parquet")
	mustRun(t, mustRun(t, nil, "simccl-decompose", "--merge", strings.Join(streams, ",")), "flowsim-packet", "--set", "SIMULATOR_STOP_TIME=60us", "-o", path)
	rows, meta := readTraceFile(t, path)
	done := map[string]int64{}
	for _, r := range rows {
		done[r.Job]++
	}
	if done["a"] != flows["a"] || done["b"] == 0 || done["b"] >= flows["b"] {
		t.Fatalf("the stop should end job a and cut job b: rows %v of flows %v", done, flows)
	}
	want := []trace.CutJob{{Job: "b", Finished: done["b"], Flows: flows["b"]}}
	if meta.Cut == nil || !reflect.DeepEqual(meta.Cut.Jobs, want) {
		t.Fatalf("fabricsim.cut %+v, want jobs %+v", meta.Cut, want)
	}
	head, _, _ := strings.Cut(string(mustRun(t, nil, "fctstats", "--allow-partial", path)), "\n")
	if !regexp.MustCompile(` b >=[0-9.]+us from 0ns \(CUT: `+strconv.FormatInt(flows["b"]-done["b"], 10)+` of its flows never finished\)$`).MatchString(head) || strings.Count(head, "CUT: ") != 1 {
		t.Errorf("headline: %s", head)
	}
}

// flowsim-packet's fct.txt of a stopped run says PARTIAL on its first line
// (SimAI's format has no metadata), with the transfers that have no line;
// fctstats refuses it by default and marks every report of it.
func TestPartialSimAIFCT(t *testing.T) {
	st := mustRun(t, mustRun(t, nil, "topogen", "--gpus", "16"), "simccl-decompose", "--op", "allreduce", "--size", "1MiB", "--group", "dp", "--tp", "8")
	dir := t.TempDir()
	fct, whole := filepath.Join(dir, "fct.txt"), filepath.Join(dir, "whole.txt")
	mustRun(t, st, "flowsim-packet", "--set", "SIMULATOR_STOP_TIME=60us", "--simai-fct", fct, "-o", filepath.Join(dir, "t.parquet"))
	mustRun(t, st, "flowsim-packet", "--simai-fct", whole, "-o", filepath.Join(dir, "w.parquet"))
	data, err := os.ReadFile(fct)
	if err != nil {
		t.Fatal(err)
	}
	wdata, _ := os.ReadFile(whole)
	lines, all := strings.Count(string(data), "\n")-1, strings.Count(string(wdata), "\n")
	n := strconv.Itoa(all - lines)
	if lines <= 0 || lines >= all || !strings.HasPrefix(string(data), "# fabricsim: PARTIAL: the run stopped early; "+n+" transfers never finished and have no line\n") || strings.HasPrefix(string(wdata), "#") {
		t.Fatalf("%d of %d lines; the file begins %.120q", lines, all, data)
	}
	oneLineError(t, run(t, nil, "fctstats", fct), 1, "partial trace", n+" flows never finished", "its first line says PARTIAL")
	if out := string(mustRun(t, nil, "fctstats", "--allow-partial", fct)); !strings.HasPrefix(out, "PARTIAL (the run stopped early; "+n+" flows never finished") {
		t.Errorf("report:\n%.300s", out)
	}
}

// readTraceFile reads the trace file at path.
func readTraceFile(t *testing.T, path string) ([]trace.Row, trace.Meta) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return readTrace(t, data)
}
