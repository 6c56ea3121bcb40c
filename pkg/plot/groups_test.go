package plot

import (
	"testing"

	"github.com/fabricsim/fabricsim/pkg/stats"
)

// Jobs' slowdowns per placement: a dot per job in each case, each job's
// dots offset the same way within its slot, a legend naming every job and
// the line at 1, an axis fitted to 1-1.35 that still shows 1.
func TestGroupedDotsRender(t *testing.T) {
	files := map[string]string{
		"p.csv": "job,slowdown,case\na,1,4:1 packed\nb,1,4:1 packed\n",
		"s.csv": "job,slowdown,case\na,1.35,4:1 spread\nb,1.04,4:1 spread\n",
	}
	dt, err := stats.ConcatCSV([]string{"p.csv", "s.csv"}, csvFiles(files))
	if err != nil {
		t.Fatal(err)
	}
	plots, err := GroupedDots(dt, "case=placement", []string{"slowdown=slowdown against solo"}, "job")
	if err != nil {
		t.Fatal(err)
	}
	if len(plots) != 1 {
		t.Fatalf("%d panels, want 1", len(plots))
	}
	checkTexts(t, "slowdowns", renderSVG(t, plots), "placement", "slowdown against solo", "4:1 packed", "4:1 spread", "job a", "job b", "alone (1)")
	if p := plots[0]; p.Y.Min > 1 || p.Y.Max < 1.35 || p.Y.Min < 0.5 || p.X.Min != -0.5 || p.X.Max != 1.5 {
		t.Errorf("y %v-%v x %v-%v: want y fitted around 1-1.35 and x -0.5-1.5", p.Y.Min, p.Y.Max, p.X.Min, p.X.Max)
	}
	if _, err := GroupedDots(dt, "slowdown", []string{"slowdown"}, "job"); err == nil {
		t.Error("a numeric --x: no error")
	}
	if _, err := GroupedDots(dt, "case", []string{"slowdown"}, "slowdown"); err == nil {
		t.Error("a numeric --group: no error")
	}
}
