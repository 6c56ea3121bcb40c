package tests

import (
	"html"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fctstats --concat --plot titles each panel with the collective the
// sweep's points share: the chunk-sweep pipeline's sweep.png said only
// "AllReduce time against chunk size", not of which collective.
func TestConcatPlotNamesRun(t *testing.T) {
	dir := t.TempDir()
	const head = "source,op,algorithm,group_type,coll_size_bytes,nranks,time_ns,chunk_bytes\n"
	var files []string
	for i, row := range []string{"a.parquet,allreduce,msccl,TP,33554432,8,24871848,8192\n", "b.parquet,allreduce,msccl,TP,33554432,8,1026020,262144\n"} {
		f := filepath.Join(dir, string(rune('a'+i))+".csv")
		if err := os.WriteFile(f, []byte(head+row), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	svg := filepath.Join(dir, "sweep.svg")
	args := append([]string{"--concat"}, files...)
	mustRun(t, nil, "fctstats", append(args, "--plot", svg, "--x", "chunk_bytes", "--y", "time_ns=AllReduce time", "--out", filepath.Join(dir, "sweep.csv"), "--format", "csv")...)
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if want := "AllReduce time against chunk size (allreduce msccl TP 32MiB, 8 ranks)"; !strings.Contains(html.UnescapeString(string(b)), want) {
		t.Errorf("sweep.svg has no title %q", want)
	}
}

// fctstats --compare --plot names each curve's backend beside its file
// (the legend said "A = a.parquet (624)": which model was which?); a
// --label is kept as the user wrote it.
func TestComparePlotNamesBackends(t *testing.T) {
	dir := t.TempDir()
	st := mustPipe(t, nil, []string{"topogen", "--family", "spectrum-x", "--gpus", "16"}, []string{"simccl-decompose", "--op", "alltoall", "--size", "1MiB", "--group", "dp", "--tp", "1"})
	a, b := filepath.Join(dir, "a.parquet"), filepath.Join(dir, "b.parquet")
	mustRun(t, st, "flowsim-analytical", "-o", a)
	mustRun(t, st, "flowsim-analytical", "--model", "busbw", "-o", b)
	svg := filepath.Join(dir, "cmp.svg")
	legend := func(args ...string) string {
		mustRun(t, nil, "fctstats", append([]string{"--compare", a, b, "--plot", svg}, args...)...)
		data, err := os.ReadFile(svg)
		if err != nil {
			t.Fatal(err)
		}
		return html.UnescapeString(string(data))
	}
	text := legend()
	for _, want := range []string{"A = " + a + ", analytical-fluid (", "B = " + b + ", analytical-busbw ("} {
		if !strings.Contains(text, want) {
			t.Errorf("legend has no %q", want)
		}
	}
	if text := legend("--label", "fluid,busbw"); !strings.Contains(text, "A = fluid (") {
		t.Errorf("--label fluid: legend has no %q", "A = fluid (")
	}
}
