package stats

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/trace"
)

// analyzeErr analyzes data as a trace and returns the error.
func analyzeErr(data []byte, name string) error {
	in, err := NewInput(bytes.NewReader(data), name)
	if err != nil {
		return err
	}
	defer in.Close()
	_, err = Analyze(in, Options{KeepFlows: true})
	return err
}

// A trace that repeats a flow id (here every row written twice) is refused
// naming the file, the row and the id, not reported as twice the flows.
func TestDuplicateFlowID(t *testing.T) {
	rows := handTrace()
	twice := append(append([]trace.Row(nil), rows...), rows...)
	err := analyzeErr(encode(t, twice, trace.Parquet), "dup.parquet")
	want := "dup.parquet: row 26, field flow_id: 100 is a duplicate"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want %q", err, want)
	}
	// Ids far apart (outside the bitset) are told apart too.
	big := []trace.Row{rows[1], rows[1], rows[1]}
	big[0].FlowID, big[1].FlowID, big[2].FlowID = -5, 1<<40, -5
	if err := analyzeErr(encode(t, big, trace.ArrowStream), "big"); err == nil || !strings.Contains(err.Error(), "row 2, field flow_id: -5 is a duplicate") {
		t.Errorf("sparse ids: %v", err)
	}
	big[2].FlowID = 1<<40 + 1
	if err := analyzeErr(encode(t, big, trace.ArrowStream), "big"); err != nil {
		t.Errorf("distinct sparse ids refused: %v", err)
	}
}

// A collective with a failed flow did not complete: status failed, no
// bandwidth, left out of its summary line and the nccl-tests average.
func TestFailedCollective(t *testing.T) {
	rows := handTrace()
	for i := range rows {
		if rows[i].CollectiveID == 2 && rows[i].FlowID == 40 {
			rows[i].Status = trace.StatusFailed
		}
	}
	run := analyzeBytes(t, encode(t, rows, trace.Parquet), "failed.parquet", false)
	c := run.Collectives[2]
	if c.Status != trace.StatusFailed || c.FailedFlows != 1 || c.AlgbwGBps.Valid() || c.BusbwGBps.Valid() {
		t.Errorf("collective 2: %+v, want failed with no bandwidth", c)
	}
	if ok := run.Collectives[1]; ok.Status != trace.StatusOK || !ok.BusbwGBps.Valid() {
		t.Errorf("collective 1: %+v, want ok", ok)
	}
	if run.Totals.FailedFlows != 1 || run.Totals.FailedCollectives != 1 {
		t.Errorf("totals %+v", run.Totals)
	}
	// The two AllGathers share a summary line: only collective 1 (2000 ns,
	// 4e6 B: algbw 2000 GB/s) is timed.
	var s Summary
	for _, x := range run.Summary {
		if x.Op == "allgather" {
			s = x
		}
	}
	if s.Count != 1 || s.Failed != 1 || float64(s.TimeMeanNs) != 2000 || float64(s.AlgbwGBps) != 2000 {
		t.Errorf("summary %+v, want 1 timed at 2000 ns and 1 failed", s)
	}
	var text bytes.Buffer
	run.WriteText(&text, 0)
	if !strings.Contains(text.String(), "FAILED (1 flows)") || !strings.Contains(text.String(), "FAILED: 1 flows were not delivered") {
		t.Errorf("text report does not say FAILED:\n%s", text.String())
	}
	nr, err := run.NCCLTests("float", 4)
	if err != nil {
		t.Fatal(err)
	}
	var nt bytes.Buffer
	if err := run.WriteNCCLTests(&nt, nr); err != nil {
		t.Fatal(err)
	}
	// Average over the two completed rows: busbw 1500 (allreduce) and
	// 1500 (allgather 1): 1500, not pulled down or up by the failed one.
	out := nt.String()
	if !strings.Contains(out, "FAILED") || !strings.Contains(out, "# Avg bus bandwidth    : 1500 ") {
		t.Errorf("nccl-tests output:\n%s", out)
	}
	if !math.IsNaN(nr[2].BusbwGBps) || nr[2].FailedFlows != 1 {
		t.Errorf("nccl-tests row %+v", nr[2])
	}
	// In a comparison it has no ratio.
	a := analyzeBytes(t, encode(t, handTrace(), trace.Parquet), "a", true)
	b := analyzeBytes(t, encode(t, rows, trace.Parquet), "b", true)
	cmp, err := Compare(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if r := cmp.Collectives[2]; r.Status != "failed in B" || r.Ratio.Valid() {
		t.Errorf("comparison of the failed collective: %+v", r)
	}
}

// --compare refuses runs of different workloads, saying where they first
// differ; a partial run may miss collectives.
func TestCompareWorkloads(t *testing.T) {
	a := analyzeBytes(t, encode(t, handTrace(), trace.Parquet), "a.parquet", true)
	edit := func(fn func(r *trace.Row)) *Run {
		rows := handTrace()
		for i := range rows {
			fn(&rows[i])
		}
		return analyzeBytes(t, encode(t, rows, trace.Parquet), "b.parquet", true)
	}
	for _, tc := range []struct {
		name string
		b    *Run
		want string
	}{
		{"op", edit(func(r *trace.Row) {
			if r.CollectiveID == 1 {
				r.Op, r.CollSizeBytes = "sendrecv", 1024
			}
		}), "collective 1 is allgather 4MB on 4 ranks in A, sendrecv 1KiB on 4 ranks in B"},
		{"size", edit(func(r *trace.Row) {
			if r.CollectiveID == 2 {
				r.CollSizeBytes++
			}
		}), "collective 2 is allgather"},
		{"onlyA", edit(func(r *trace.Row) {
			if r.CollectiveID == 2 {
				r.CollectiveID = -1
			}
		}), "collective 2 (allgather 4MB on 4 ranks) is in A only"},
		{"onlyB", edit(func(r *trace.Row) {
			if r.FlowID == 50 { // the compute phase becomes a collective
				r.CollectiveID, r.Op, r.CollSizeBytes, r.NRanks = 9, "broadcast", 8, 4
			}
		}), "collective 9 (broadcast 8B on 4 ranks) is in B only"},
	} {
		_, err := Compare(a, tc.b)
		if err == nil || !strings.Contains(err.Error(), "a.parquet and b.parquet are not runs of the same workload: "+tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
		if _, err := Compare(tc.b, a); err == nil {
			t.Errorf("%s: B against A compared", tc.name)
		}
	}
	// A partial B missing collective 2 compares (with --allow-partial).
	rows := handTrace()
	var kept []trace.Row
	for _, r := range rows {
		if r.CollectiveID != 2 {
			kept = append(kept, r)
		}
	}
	m := testMeta
	m.Unfinished = 2
	var buf bytes.Buffer
	w, _ := trace.NewWriter(&buf, trace.Parquet, m)
	for i := range kept {
		w.Write(&kept[i])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b := analyzeBytes(t, buf.Bytes(), "partial.parquet", true)
	if !b.Partial || b.UnfinishedFlows != 2 {
		t.Fatalf("partial run read as %v, %d", b.Partial, b.UnfinishedFlows)
	}
	cmp, err := Compare(a, b)
	if err != nil || cmp.CollectivesOnlyA != 1 || cmp.UnfinishedFlowsB != 2 {
		t.Fatalf("partial comparison: %v %+v", err, cmp)
	}
	var text bytes.Buffer
	cmp.WriteText(&text, 0)
	if !strings.HasPrefix(text.String(), "PARTIAL") {
		t.Errorf("comparison text does not start with PARTIAL:\n%s", text.String())
	}
	text.Reset()
	b.WriteText(&text, 0)
	if !strings.HasPrefix(text.String(), "PARTIAL") {
		t.Errorf("run text does not start with PARTIAL:\n%s", text.String())
	}
	in, _ := NewInput(bytes.NewReader(buf.Bytes()), "partial.parquet")
	if err := in.CheckWhole(); err == nil || err.Error() != "partial.parquet: partial trace: the run stopped early and 2 flows never finished (fabricsim.complete=false); --allow-partial reports what finished, marked PARTIAL" {
		t.Errorf("CheckWhole: %v", err)
	}
}

// fuzzRows turns bytes into trace rows, 5 bytes a row: flow id, collective
// id, op and size, start and duration, status. Small ranges make
// duplicates and shared collectives common.
func fuzzRows(data []byte) []trace.Row {
	ops := []string{"allreduce", "allgather", "alltoall", "sendrecv"}
	var rows []trace.Row
	for ; len(data) >= 5; data = data[5:] {
		c := int64(data[1]%6) - 1 // -1: no collective
		// A collective's record repeats on its rows: op and size follow its id.
		r := trace.Row{FlowID: int64(data[0] % 32), CollectiveID: c, Src: int32(data[2] % 4), Dst: int32(data[2] / 4 % 4),
			SizeBytes: int64(data[2]) * 100, StartNs: int64(data[3]), ConnType: "NET", Op: ops[(c+1)%4],
			CollSizeBytes: (c + 2) * 1000, NRanks: 4, Status: trace.StatusOK, Layer: -1, Microbatch: -1, Stage: -1}
		r.EndNs = r.StartNs + int64(data[4]%64)
		r.FctNs, r.IdealFctNs = r.EndNs-r.StartNs, int64(data[4]%8)
		if data[4] >= 250 {
			r.Status = trace.StatusFailed
		}
		rows = append(rows, r)
	}
	return rows
}

// FuzzTraceInputs: fctstats never panics on trace rows; it refuses a
// trace that repeats a flow id, and only then; a run compares with itself,
// and --compare refuses a run whose collective differs in op or size.
func FuzzTraceInputs(f *testing.F) {
	f.Add([]byte("\x01\x01\x10\x00\x20\x02\x01\x11\x05\x30\x03\x02\x12\x09\x10"), uint8(0), false)
	f.Add([]byte("\x01\x01\x10\x00\x20\x01\x01\x11\x05\x30"), uint8(1), true)
	f.Add([]byte("\x00\x00\x00\x00\xff\x05\x04\x40\x10\x00"), uint8(2), true)
	f.Fuzz(func(t *testing.T, data []byte, pick uint8, changeOp bool) {
		rows := fuzzRows(data)
		if len(rows) == 0 || len(rows) > 200 {
			return
		}
		dup := false
		seen := map[int64]bool{}
		for _, r := range rows {
			dup = dup || seen[r.FlowID]
			seen[r.FlowID] = true
		}
		enc := func(rows []trace.Row) []byte { return encode(t, rows, trace.ArrowStream) }
		analyze := func(rows []trace.Row, name string) (*Run, error) {
			in, err := NewInput(bytes.NewReader(enc(rows)), name)
			if err != nil {
				return nil, err
			}
			defer in.Close()
			return Analyze(in, Options{KeepFlows: true})
		}
		a, err := analyze(rows, "a")
		if dup {
			if err == nil || !strings.Contains(err.Error(), "field flow_id") || !strings.Contains(err.Error(), "is a duplicate") {
				t.Fatalf("duplicate flow id not refused: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("valid rows refused: %v", err)
		}
		if _, err := Compare(a, a); err != nil {
			t.Fatalf("a run against itself: %v", err)
		}
		var text bytes.Buffer
		a.WriteText(&text, 0)
		// Change one collective of B (the pick-th one) in op or size.
		if len(a.Collectives) == 0 {
			return
		}
		id := a.Collectives[int(pick)%len(a.Collectives)].ID
		other := append([]trace.Row(nil), rows...)
		for i := range other {
			if other[i].CollectiveID == id {
				if changeOp {
					other[i].Op = "broadcast"
				} else {
					other[i].CollSizeBytes++
				}
			}
		}
		b, err := analyze(other, "b")
		if err != nil {
			t.Fatalf("B: %v", err)
		}
		if _, err := Compare(a, b); err == nil || !strings.Contains(err.Error(), "not runs of the same workload") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("collective %d changed, compare error %v", id, err)
		}
	})
}

// An iteration with a failed flow did not complete: --iteration refuses
// to give it an iteration time.
func TestIterationRefusesFailedFlows(t *testing.T) {
	rows := handIterationRows()
	in, err := NewInput(bytes.NewReader(encode(t, rows, trace.Parquet)), "it.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AnalyzeIteration(in, IterationOptions{}); err != nil {
		t.Fatalf("whole iteration: %v", err)
	}
	for i := range rows {
		if rows[i].ConnType != "DELAY" && rows[i].SizeBytes > 0 {
			rows[i].Status = trace.StatusFailed
			in, _ = NewInput(bytes.NewReader(encode(t, rows, trace.Parquet)), "it.parquet")
			_, err = AnalyzeIteration(in, IterationOptions{})
			want := "it.parquet: 1 flows failed (status failed, first flow_id " + strconv.FormatInt(rows[i].FlowID, 10) + "): the iteration did not complete"
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %v, want %q", err, want)
			}
			return
		}
	}
	t.Fatal("no flow in the hand iteration")
}

// A partial trace's fabricsim.cut marks the collectives the stop cut in
// every report: hand trace collective 2 (two rows) had 3 more flows that
// never finished. Its time is a lower bound, it has no bandwidth, and it
// is left out of the summary's times; a cut that disagrees with the rows
// is refused, naming the key.
func TestCutCollectivesMarked(t *testing.T) {
	partial := func(cut *trace.Cut) []byte {
		m := testMeta
		m.Unfinished, m.Cut = 3, cut
		return encodeMeta(t, handTrace(), m)
	}
	run := analyzeBytes(t, partial(&trace.Cut{Collectives: []trace.CutCollective{{ID: 2, Finished: 2, Flows: 5}}, NotStarted: 1}), "p.parquet", false)
	c := run.Collectives[2]
	if c.Status != StatusCut || c.CutFlows != 3 || c.TimeNs != 6000 || c.BusbwGBps.Valid() || run.Collectives[1].Status != trace.StatusOK {
		t.Fatalf("collectives %+v", run.Collectives)
	}
	// Collectives 1 and 2 share a key: the summary times 1 alone.
	if s := run.Summary[1]; s.Count != 1 || s.Cut != 1 || float64(s.TimeMeanNs) != 2000 || run.Totals.CutCollectives != 1 || run.Totals.NotStartedCollectives != 1 {
		t.Errorf("summary %+v, totals %+v", s, run.Totals)
	}
	var text bytes.Buffer
	run.WriteText(&text, 0)
	for _, want := range []string{"1 collective cut, marked CUT, their times lower bounds; 1 collective never started", ">=6.000 CUT (3 flows unfinished)", "CUT: 1 collective cut by the run's stop (status cut) not counted"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	text.Reset()
	rows, _ := run.NCCLTests("float", 4)
	run.WriteNCCLTests(&text, rows)
	if !strings.Contains(text.String(), "CUT     N/A     N/A      3\n") || !strings.Contains(text.String(), "# CUT: 1 of the collectives") {
		t.Errorf("nccl-tests:\n%s", text.String())
	}
	// Tables: cut_flows and cut only in PartialDataTable.
	for name, want := range map[string]string{TableCollectives: "p.parquet,2,allgather,ring,DP,4000000,4,cut,0,3,2,100,20000,26000,6000,,\n",
		TableSummary: "p.parquet,allgather,ring,DP,4000000,4,1,0,1,2000,2000,2000,2000,1500\n"} {
		dt, _ := run.PartialDataTable(name)
		text.Reset()
		dt.WriteCSV(&text)
		if !strings.Contains(text.String(), want) {
			t.Errorf("%s csv lacks %q:\n%s", name, want, text.String())
		}
		whole, _ := run.DataTable(name)
		if len(whole.Names) != len(dt.Names)-1 || slices.Contains(whole.Names, "cut_flows") || slices.Contains(whole.Names, "cut") {
			t.Errorf("%s: DataTable has %v", name, whole.Names)
		}
	}
	// Compared with the whole run, collective 2 has no ratio.
	a := analyzeBytes(t, encode(t, handTrace(), trace.Parquet), "a.parquet", true)
	b := analyzeBytes(t, partial(&trace.Cut{Collectives: []trace.CutCollective{{ID: 2, Finished: 2, Flows: 5}}}), "b.parquet", true)
	if cmp, err := Compare(a, b); err != nil || cmp.Collectives[2].Status != "cut in B" || cmp.Collectives[2].Ratio.Valid() || cmp.Summary[1].Count != 1 {
		t.Errorf("comparison: %v %+v", err, cmp)
	}
	// Without the key (written before it), the headline says what it
	// cannot tell.
	old := analyzeBytes(t, partial(nil), "old.parquet", false)
	text.Reset()
	old.WriteText(&text, 0)
	if !old.CutUnknown || !strings.Contains(text.String(), "the trace does not say which collectives the stop cut") || old.Collectives[2].Status != trace.StatusOK {
		t.Errorf("partial trace without fabricsim.cut:\n%s", text.String())
	}
	for _, bad := range []*trace.Cut{
		{Collectives: []trace.CutCollective{{ID: 2, Finished: 1, Flows: 3}}}, // it has 2 rows
		{Collectives: []trace.CutCollective{{ID: 7, Finished: 1, Flows: 3}}}, // no rows
	} {
		in, _ := NewInput(bytes.NewReader(partial(bad)), "bad.parquet")
		if _, err := Analyze(in, Options{}); err == nil || !strings.Contains(err.Error(), "bad.parquet: fabricsim.cut says collective") {
			t.Errorf("cut %+v: %v", bad.Collectives, err)
		}
	}
}

// The headline agrees with fabricsim.cut (review r7b): a collective both
// failed and cut is said cut, reported FAILED; a job it lists with no row
// (the stop came first) is in the report; and an input without
// collectives (a partial fct.txt) makes no claim about them.
func TestCutHeadline(t *testing.T) {
	rows := handTrace()
	for i := range rows {
		if rows[i].CollectiveID == 2 {
			rows[i].Status = trace.StatusFailed
			break
		}
	}
	m := testMeta
	m.Unfinished, m.Cut = 4, &trace.Cut{Collectives: []trace.CutCollective{{ID: 2, Finished: 2, Flows: 5}}, Jobs: []trace.CutJob{{Job: "b", Flows: 4}}}
	run := analyzeBytes(t, encodeMeta(t, rows, m), "p.parquet", false)
	if c := run.Collectives[2]; c.Status != trace.StatusFailed || c.CutFlows != 3 || len(run.Jobs) != 1 || run.Jobs[0] != (JobSpan{Job: "b", CutFlows: 4}) {
		t.Errorf("collective %+v, jobs %+v", c, run.Jobs)
	}
	head := run.headline()
	for _, want := range []string{"; 0 collectives cut, marked CUT, their times lower bounds (and 1 collective cut that a failed link had cut off too, reported FAILED); 0 collectives never started)",
		"; per job (makespan from its start): b: never started (CUT: its 4 flows never finished); FAILED: 1 flows", "1 collectives did not complete"} {
		if !strings.Contains(head, want) {
			t.Errorf("headline lacks %q:\n%s", want, head)
		}
	}
	fct := "# fabricsim: PARTIAL: the run stopped early; 37 transfers never finished and have no line\n0b000101 0b000201 10000 100 8 1 2 1\n"
	in, err := NewInput(bytes.NewReader([]byte(fct)), "fct.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	run, err = Analyze(in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if head := run.headline(); !strings.HasPrefix(head, "PARTIAL (the run stopped early; 37 flows never finished and are not in these figures) fct.txt: SimAI fct.txt") {
		t.Errorf("partial fct.txt: %s", head)
	}
}
