package stats

import (
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
)

func csvFiles(files map[string]string) func(string) (io.ReadCloser, error) {
	return func(name string) (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(files[name])), nil }
}

// Points' tables join in file order; a column is typed by all its values.
func TestConcatCSV(t *testing.T) {
	files := map[string]string{
		"a.csv": "source,time_ns,busbw_gbps,chunk_bytes,label\nx.parquet,100,1.5,8192,ring\n",
		"b.csv": "source,time_ns,busbw_gbps,chunk_bytes,label\ny.parquet,50,,16384,3\n",
	}
	dt, err := ConcatCSV([]string{"a.csv", "b.csv"}, csvFiles(files))
	if err != nil {
		t.Fatal(err)
	}
	want := []reflect.Kind{reflect.String, reflect.Int64, reflect.Float64, reflect.Int64, reflect.String}
	if !reflect.DeepEqual(dt.kinds, want) || dt.Len() != 2 {
		t.Fatalf("kinds %v, %d rows", dt.kinds, dt.Len())
	}
	if b, _ := dt.column("busbw_gbps"); b[0] != 1.5 || !math.IsNaN(b[1]) {
		t.Fatalf("busbw %v: an empty field is NaN", b)
	}
	if c, _ := dt.column("chunk_bytes"); c[1] != 16384 {
		t.Fatalf("chunk_bytes %v", c)
	}
	files["c.csv"] = "source,time_ns\nz,1\n"
	if _, err := ConcatCSV([]string{"a.csv", "c.csv"}, csvFiles(files)); err == nil || !strings.Contains(err.Error(), "c.csv: line 1: columns") {
		t.Fatalf("mismatched columns: %v", err)
	}
	if _, err := dt.column("label"); err == nil {
		t.Fatal("a text column plotted")
	}
	if err := dt.AddParam("chunk_bytes", "1"); err == nil {
		t.Fatal("a second chunk_bytes column")
	}
	if err := dt.AddParam("rate", "0.5"); err != nil || dt.kinds[len(dt.kinds)-1] != reflect.Float64 {
		t.Fatalf("rate: %v %v", err, dt.kinds)
	}
	if plots, err := dt.SweepPlots("chunk_bytes", []string{"time_ns", "rate"}); err != nil || len(plots) != 2 {
		t.Fatalf("plots: %v", err)
	}
	// A text x gives dots, one per row, labelled with the row's value.
	plots, err := dt.SweepPlots("label", []string{"time_ns"})
	if err != nil || len(plots) != 1 {
		t.Fatalf("bars: %v", err)
	}
	var labels []string
	for _, tk := range plots[0].X.Tick.Marker.Ticks(0, 1) {
		labels = append(labels, tk.Label)
	}
	if !reflect.DeepEqual(labels, []string{"ring", "3"}) {
		t.Fatalf("bar labels %q, want the rows' labels in order", labels)
	}
	if _, err := dt.SweepPlots("label", []string{"source"}); err == nil {
		t.Fatal("bars of a text column")
	}
}
