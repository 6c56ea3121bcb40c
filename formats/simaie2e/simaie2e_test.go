package simaie2e

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// SimAI's packet-level layout: layer rows with "workload finished at",
// a SUM row and the totals line.
func TestReadPacketLayout(t *testing.T) {
	in := "layer_name,run,fwd compute,wg compute,ig compute,fwd exposed comm,wg exposed comm,ig exposed comm,fwd total comm,algbw,busbw,wg total comm,algbw,busbw,ig total comm,algbw,busbw,workload finished at\n" +
		"embedding_layer,run,10.000000,0.000000,0.000000,0.000000,5.500000,0.000000,0.000000,0.000000,0.000000,5.500000,1.0,1.0,0.000000,0.000000,0.000000,100.0\n" +
		"attention_layer,run,20.000000,10.000000,20.000000,3.000000,0.000000,4.000000,3.000000,2.0,2.0,0.000000,0.0,0.0,4.000000,2.0,2.0,200.0\n" +
		"SUM,run,30.000000,10.000000,20.000000,3.000000,5.500000,4.000000,3.000000,NONE,NONE,5.500000,NONE,NONE,4.000000,NONE,NONE\n" +
		"total exposed comm,12.500000,total comp,60.000000,total time,72.500000\n"
	e, err := Read(strings.NewReader(in), "e2e.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Layers) != 2 || e.Summary[6] != 60 || e.Summary[7] != 12.5 || e.Summary[8] != 72.5 || !math.IsNaN(e.Summary[0]) {
		t.Errorf("%+v", e)
	}
	for _, bad := range []struct{ in, want string }{
		{"hello\n", "line 1: not a line of SimAI's EndToEnd.csv"},
		{SummaryHeader() + "\n", "line 1: the summary header has no values line"},
		{SummaryHeader() + "\nrun, 1, 2, x, 4, 5, 6, 7, 8, 9\n", "line 2, field Expose TP comm"},
		{strings.SplitAfter(in, "\n")[0] + "a,run,1\n", "line 2: layer row has 3 fields"},
		{strings.SplitAfter(in, "\n")[0] + "a,run,-1,0,0,0,0,0,0,0,0,0,0,0,0,0,0\n", "line 2, field fwd compute"},
		{"", "no EndToEnd.csv header"},
	} {
		if _, err := Read(strings.NewReader(bad.in), "e2e.csv"); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.in, err, bad.want)
		}
	}
}

// EndToEnd.csv values that no SimAI run prints are refused with the line
// and field: an absurd magnitude, a zero total time, a share that is no
// percentage.
func TestReadNonsense(t *testing.T) {
	row := func(total, tp string) string {
		return SummaryHeader() + "\nrun, 1 (1.00%), 2, " + tp + ", 4, 5, 6, 7, 8, " + total + "\n"
	}
	packet := func(total string) string {
		return "layer_name,run,fwd compute,wg compute,ig compute,fwd exposed comm,wg exposed comm,ig exposed comm,fwd total comm,algbw,busbw,wg total comm,algbw,busbw,ig total comm,algbw,busbw\n" +
			"total exposed comm,1,total comp,2,total time," + total + "\n"
	}
	for _, bad := range []struct{ in, want string }{
		{row("1e308", "3"), `line 2, field Total time: "1e308" is beyond`},
		{row("0", "3"), "line 2, field Total time: 0: an iteration takes time"},
		{row("10", "3 (abc%)"), `line 2, field Expose TP comm: "3 (abc%)": the share in parentheses is not a percentage`},
		{row("10", "(abc%)"), `line 2, field Expose TP comm: "(abc%)" is not a non-negative number`},
		{packet("0"), "line 2, field total time: 0: an iteration takes time"},
		{packet("1e308"), `line 2, field total time: "1e308" is beyond`},
	} {
		if _, err := Read(strings.NewReader(bad.in), "e2e.csv"); err == nil || !strings.Contains(err.Error(), "e2e.csv: "+bad.want) {
			t.Errorf("%q: %v, want %q", bad.in, err, bad.want)
		}
	}
	if e, err := Read(strings.NewReader(row("10 (100.00%)", "3 (30.00%)")), "e2e.csv"); err != nil || e.Summary[8] != 10 {
		t.Errorf("a good file: %v", err)
	}
}

// hand is a written report: its numbers by hand (µs), two layers.
func hand() *File {
	nan := math.NaN()
	return &File{Source: "hand", Summary: [9]float64{50, 0, 60, 50, 0, 0, 240, 160, 400},
		Layers: []Layer{
			{Name: "attention_layer", Values: [15]float64{100, 40, 100, 60, 50, 50, 60, 15.52, 15.52, 140, 13.3, 13.3, 50, 9.31, 4.66}},
			{Name: "mlp, fused", Values: [15]float64{10, 4, 10, 0, 0, 0, 0, nan, nan, 0, nan, nan, 0, nan, nan}},
		}}
}

// Written and read back, a report keeps its numbers; names lose the
// commas a CSV field cannot hold, and absent bandwidths read as 0.00.
func TestWriteReadsBack(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, "run,1", hand()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if lines[1] != "run_1, 50 (12.50%), 0 (0.00%), 60 (15.00%), 50 (12.50%), 0 (0.00%), 0 (0.00%), 240 (60.00%), 160 (40.00%), 400" {
		t.Errorf("summary line %q", lines[1])
	}
	if want := "mlp_ fused,run_1,10,4,10,0,0,0,0,0.00,0.00,0,0.00,0.00,0,0.00,0.00"; lines[4] != want {
		t.Errorf("layer row\n got %s\nwant %s", lines[4], want)
	}
	e, err := Read(&b, "EndToEnd.csv")
	if err != nil {
		t.Fatal(err)
	}
	if e.Summary != hand().Summary || len(e.Layers) != 2 || e.Layers[0].Values != hand().Layers[0].Values {
		t.Errorf("read back %+v", e)
	}
}

func FuzzRead(f *testing.F) {
	var b bytes.Buffer
	_ = Write(&b, "seed", hand())
	f.Add(b.String())
	f.Add("layer_name,r,fwd compute,wg compute,ig compute,fwd exposed comm,wg exposed comm,ig exposed comm,fwd total comm,algbw,busbw,wg total comm,algbw,busbw,ig total comm,algbw,busbw\nSUM,r,1,1,1,1,1,1,1,NONE,NONE,1,NONE,NONE,1,NONE,NONE\ntotal exposed comm,1,total comp,2,total time,3\n")
	f.Fuzz(func(t *testing.T, s string) {
		e, err := Read(strings.NewReader(s), "f.csv")
		if err != nil {
			if strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "f.csv: ") {
				t.Fatalf("error not one line naming the file: %q", err)
			}
			return
		}
		for _, l := range e.Layers {
			for _, v := range l.Values {
				if v < 0 || math.IsInf(v, 0) {
					t.Fatalf("value %v accepted", v)
				}
			}
		}
	})
}
