package stats

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/fabricsim/fabricsim/formats/simaie2e"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/internal/handtraces"
)

// handIterationRows: two ranks' iteration worked out by hand (internal/handtraces).
func handIterationRows() []trace.Row { return handtraces.Iteration() }

func handIteration(t *testing.T, opt IterationOptions) *Iteration {
	t.Helper()
	a := newIterAcc("hand", opt)
	for _, r := range handIterationRows() {
		a.add(&r)
	}
	it, err := a.finish()
	if err != nil {
		t.Fatal(err)
	}
	return it
}

func TestIterationBreakdown(t *testing.T) {
	it := handIteration(t, IterationOptions{KeepSegments: true})
	const us = 1000
	if it.IterationNs != 400*us || it.CriticalRank != 0 || len(it.Ranks) != 2 {
		t.Fatalf("iteration %d ns, critical rank %d, %d ranks", it.IterationNs, it.CriticalRank, len(it.Ranks))
	}
	want := []RankBreakdown{
		{Rank: 0, Stage: 0, ComputeNs: 240 * us, ExposedDPNs: 50 * us, ExposedTPNs: 60 * us, ExposedEPNs: 50 * us, ExposedNs: 160 * us, IterationNs: 400 * us},
		{Rank: 1, Stage: 0, ComputeNs: 120 * us, ExposedDPNs: 90 * us, ExposedTPNs: 60 * us, ExposedEPNs: 50 * us, ExposedNs: 200 * us, BubbleNs: 80 * us, IterationNs: 400 * us},
	}
	for i, w := range want {
		if it.Ranks[i] != w {
			t.Errorf("rank %d:\n got %+v\nwant %+v", i, it.Ranks[i], w)
		}
	}
	if m := it.Mean; m.ComputeNs != 180*us || m.ExposedDPNs != 70*us || m.BubbleNs != 40*us {
		t.Errorf("mean %+v", m)
	}
	if len(it.Layers) != 1 {
		t.Fatalf("%d layers, want 1", len(it.Layers))
	}
	l := it.Layers[0]
	if l.FwdComputeNs != 100*us || l.IgComputeNs != 100*us || l.WgComputeNs != 40*us ||
		l.FwdExposedNs != 60*us || l.IgExposedNs != 50*us || l.WgExposedNs != 50*us ||
		l.FwdCommNs != 60*us || l.IgCommNs != 50*us || l.WgCommNs != 140*us {
		t.Errorf("layer %+v", l)
	}
	// algbw = bytes / time; busbw × 2(n−1)/n = 1 for AllReduce on 2,
	// × (n−1)/n = 1/2 for AllToAll.
	for _, c := range []struct {
		name      string
		got, want Num
	}{{"fwd algbw", l.FwdAlgbw, 1000.0 / 60}, {"fwd busbw", l.FwdBusbw, 1000.0 / 60}, {"wg algbw", l.WgAlgbw, 2000.0 / 140},
		{"ig algbw", l.IgAlgbw, 10}, {"ig busbw", l.IgBusbw, 5}} {
		if !near(float64(c.got), float64(c.want)) {
			t.Errorf("%s = %v GB/s, want %v", c.name, c.got, c.want)
		}
	}
	// Segments partition the iteration on every rank.
	for _, r := range it.Ranks {
		segs := it.segments[r.Rank]
		var sum [NumSegmentKinds]int64
		at := it.StartNs
		for _, s := range segs {
			if s.StartNs != at || s.EndNs <= s.StartNs {
				t.Fatalf("rank %d: segment %+v after %d", r.Rank, s, at)
			}
			at = s.EndNs
			sum[s.Kind] += s.EndNs - s.StartNs
		}
		if at != it.EndNs || sum[SegBubble] != r.BubbleNs || sum[SegExposedEP] != r.ExposedEPNs || sum[SegFwd]+sum[SegIg]+sum[SegWg] != r.ComputeNs {
			t.Errorf("rank %d: segments %v against %+v", r.Rank, sum, r)
		}
	}
}

func TestIterationErrors(t *testing.T) {
	a := newIterAcc("x.parquet", IterationOptions{})
	r := handIterationRows()[2] // a flow, no compute
	a.add(&r)
	if _, err := a.finish(); err == nil || !strings.Contains(err.Error(), "x.parquet: no compute rows") {
		t.Errorf("no compute: %v", err)
	}
	a = newIterAcc("x.parquet", IterationOptions{})
	r = handIterationRows()[0]
	r.Phase = ""
	a.add(&r)
	if _, err := a.finish(); err == nil || !strings.Contains(err.Error(), "column phase") {
		t.Errorf("no phase: %v", err)
	}
}

// The EndToEnd.csv written reads back to the same numbers, and compares
// to itself as 1.
func TestSimAIE2ERoundTrip(t *testing.T) {
	it := handIteration(t, IterationOptions{})
	var b bytes.Buffer
	if err := it.WriteSimAIE2E(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if lines[0] != simaie2e.SummaryHeader() || lines[1] != "hand, 50 (12.50%), 0 (0.00%), 60 (15.00%), 50 (12.50%), 0 (0.00%), 0 (0.00%), 240 (60.00%), 160 (40.00%), 400" ||
		lines[2] != simaie2e.LayerHeader("hand") {
		t.Fatalf("EndToEnd.csv:\n%s", b.String())
	}
	// fwd algbw 1000 B / 60 µs = 16.67 GB/s = 15.52 in SimAI's 2^30 unit.
	if want := "attention_layer,hand,100,40,100,60,50,50,60,15.52,15.52,140,13.30,13.30,50,9.31,4.66"; lines[3] != want {
		t.Errorf("layer row\n got %s\nwant %s", lines[3], want)
	}
	e, err := simaie2e.Read(&b, "EndToEnd.csv")
	if err != nil {
		t.Fatal(err)
	}
	c := CompareE2E(it.E2E(), e)
	for _, r := range c.Summary {
		if r.TheirsUs != 0 && !near(float64(r.Ratio), 1) {
			t.Errorf("%s: ratio %v", r.Column, r.Ratio)
		}
	}
	if len(c.Layers) != 1 || !near(float64(c.Layers[0].ComputeRatio), 1) || !near(float64(c.Layers[0].CommRatio), 1) {
		t.Errorf("layers %+v", c.Layers)
	}
}

// The Chrome trace is JSON whose slices never overlap on a track.
func TestChromeTrace(t *testing.T) {
	it := handIteration(t, IterationOptions{KeepSegments: true, KeepSpans: true})
	var b bytes.Buffer
	if err := it.WriteChromeTrace(&b); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Ph   string  `json:"ph"`
			Pid  int     `json:"pid"`
			Tid  int     `json:"tid"`
			Ts   float64 `json:"ts"`
			Dur  float64 `json:"dur"`
			Name string  `json:"name"`
			Cat  string  `json:"cat"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	type key struct{ pid, tid int }
	tracks := map[key][][2]float64{}
	cats := map[string]int{}
	for _, e := range doc.TraceEvents {
		if e.Ph != "X" {
			continue
		}
		k := key{e.Pid, e.Tid}
		tracks[k] = append(tracks[k], [2]float64{e.Ts, e.Ts + e.Dur})
		cats[e.Cat]++
	}
	// 5 compute slices, 4 rank spans of collectives on rank 0 and 3 on
	// rank 1, 3 flows (on their source rank).
	if cats["compute"] != 5 || cats["TP"]+cats["DP"]+cats["EP"] != 6 || cats["TP flow"]+cats["DP flow"]+cats["EP flow"] != 4 || cats["waiting"] == 0 {
		t.Errorf("slices per category %v", cats)
	}
	for k, s := range tracks {
		slices.SortFunc(s, func(a, b [2]float64) int { return cmp.Compare(a[0], b[0]) })
		for i := 1; i < len(s); i++ {
			if s[i][0] < s[i-1][1] {
				t.Errorf("track %v: slices %v and %v overlap", k, s[i-1], s[i])
			}
		}
	}
}

// The report reads the v2 columns back from every container.
func TestIterationFromTrace(t *testing.T) {
	for _, c := range []trace.Container{trace.ArrowStream, trace.ArrowFile, trace.Parquet} {
		in, err := NewInput(bytes.NewReader(encode(t, handIterationRows(), c)), "hand")
		if err != nil {
			t.Fatal(err)
		}
		it, err := AnalyzeIteration(in, IterationOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := handIteration(t, IterationOptions{}); it.Critical != want.Critical || it.Ranks[1] != want.Ranks[1] || it.Layers[0].Name != "attention_layer" {
			t.Errorf("container %d: %+v", c, it.Critical)
		}
	}
}

// One row per flow, every trace column, slowdown = fct / ideal fct.
func TestFlowTable(t *testing.T) {
	rows := handIterationRows()
	rows[2].IdealFctNs = rows[2].FctNs / 2 // slowdown 2
	rows[3].LayerName = `a,"b"`            // quoted in CSV
	data := encode(t, rows, trace.Parquet)
	for _, format := range []string{"csv", "parquet"} {
		var b bytes.Buffer
		w := NewFlowTableWriter(&b, format)
		in, err := NewInput(bytes.NewReader(data), "t.parquet")
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Add(in); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(nil); err != nil {
			t.Fatal(err)
		}
		var got []FlowRow
		if format == "csv" {
			recs, err := csv.NewReader(&b).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != len(rows)+1 || len(recs[0]) != 28 || recs[0][0] != "source" || recs[0][27] != "slowdown" || recs[0][26] != "job" ||
				recs[4][19] != `a,"b"` || recs[3][27] != "2" || recs[1][27] != "" {
				t.Fatalf("csv header %v, %d records, row 3 %v", recs[0], len(recs), recs[3])
			}
			continue
		}
		f, err := parquet.OpenFile(bytes.NewReader(b.Bytes()), int64(b.Len()))
		if err != nil {
			t.Fatal(err)
		}
		r := parquet.NewGenericReader[FlowRow](f)
		got = make([]FlowRow, len(rows)+1)
		n, _ := r.Read(got)
		if n != len(rows) || got[2].Slowdown != 2 || got[2].Row != rows[2] || !math.IsNaN(got[0].Slowdown) || got[0].Source != "t.parquet" {
			t.Fatalf("parquet: %d rows, %+v", n, got[2])
		}
	}
}

// One rank is "over 1 rank", not "over 1 ranks"; the time in its unit.
func TestIterationOneRank(t *testing.T) {
	a := newIterAcc("one", IterationOptions{})
	for _, r := range handIterationRows() {
		if r.Src == 0 && r.Dst == 0 {
			a.add(&r)
		}
	}
	it, err := a.finish()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	it.WriteText(&b)
	if !strings.Contains(b.String(), "Iteration: 300us over 1 rank; ") {
		t.Errorf("one rank's report:\n%s", b.String())
	}
}

// In a partial trace, a layer phase with a collective the stop cut has no
// bandwidth (its span is no completion time), the others keep theirs, and
// the iteration time reads as a lower bound; without fabricsim.cut every
// collective may have been cut.
func TestPartialIterationCut(t *testing.T) {
	iter := func(cut *trace.Cut) *Iteration {
		m := testMeta
		m.Unfinished, m.Cut = 1, cut
		in, _ := NewInput(bytes.NewReader(encodeMeta(t, handIterationRows(), m)), "p.parquet")
		it, err := AnalyzeIteration(in, IterationOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return it
	}
	// The DP AllReduce (wg, collective 11, one row) had a second flow.
	it := iter(&trace.Cut{Collectives: []trace.CutCollective{{ID: 11, Finished: 1, Flows: 2}}})
	l := it.Layers[0]
	if l.WgBusbw.Valid() || !l.FwdBusbw.Valid() || !l.IgBusbw.Valid() || l.WgCommNs != 140_000 {
		t.Errorf("layer %+v", l)
	}
	var b bytes.Buffer
	it.WriteText(&b)
	if !strings.Contains(b.String(), "Iteration: >=400us over 2 ranks") || !strings.Contains(b.String(), "- where a collective of the phase was cut by the stop") {
		t.Errorf("text:\n%s", b.String())
	}
	if l := iter(nil).Layers[0]; l.FwdBusbw.Valid() || l.IgBusbw.Valid() || l.WgBusbw.Valid() {
		t.Errorf("without fabricsim.cut: %+v", l)
	}
}

// A slowdown against a solo run is a bound when a run was cut: at least
// with the mix cut, at most with the solo run cut, nothing with both; the
// table says which with --allow-partial's solo_partial column.
func TestSlowdownOfPartialRuns(t *testing.T) {
	for _, c := range []struct {
		mix, solo bool
		want      string
	}{{false, false, " 2.0000x "}, {true, false, " >=2.0000x "}, {false, true, " <=2.0000x "}, {true, true, " ? "}} {
		it := &Iteration{Job: "a", IterationNs: 2e6, Partial: c.mix}
		if err := it.SetSolo(&Iteration{Source: "solo.parquet", IterationNs: 1e6, Partial: c.solo}); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		WriteSlowdowns(&b, []*Iteration{it}, false)
		if !strings.Contains(b.String(), c.want) || strings.Contains(b.String(), "PARTIAL:") != (c.mix || c.solo) {
			t.Errorf("mix cut %v, solo cut %v:\n%s", c.mix, c.solo, b.String())
		}
		// The iteration report's title says the same bound, and which time is one.
		mix, solo := map[bool]string{true: ">="}[c.mix], map[bool]string{true: ">="}[c.solo]
		title := it.tables()[0].title
		if !strings.HasPrefix(title, "Iteration: "+mix+"2ms over ") || !strings.HasSuffix(title, ";"+c.want+"its solo iteration ("+solo+"1ms in solo.parquet)") {
			t.Errorf("mix cut %v, solo cut %v: title %q", c.mix, c.solo, title)
		}
		b.Reset()
		SlowdownTable("mix.parquet", []*Iteration{it}, true).WriteCSV(&b)
		if want := "source,job,iteration_ns,solo_iteration_ns,slowdown,solo_source,solo_partial\nmix.parquet,a,2000000,1000000,2,solo.parquet," + strconv.FormatBool(c.solo) + "\n"; b.String() != want {
			t.Errorf("table:\n%s\nwant\n%s", b.String(), want)
		}
	}
	b := bytes.Buffer{}
	SlowdownTable("mix.parquet", nil, false).WriteCSV(&b)
	if b.String() != "source,job,iteration_ns,solo_iteration_ns,slowdown,solo_source\n" {
		t.Errorf("without --allow-partial: %s", b.String())
	}
}
