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
	if b, _ := dt.Column("busbw_gbps"); b[0] != 1.5 || !math.IsNaN(b[1]) {
		t.Fatalf("busbw %v: an empty field is NaN", b)
	}
	if c, _ := dt.Column("chunk_bytes"); c[1] != 16384 {
		t.Fatalf("chunk_bytes %v", c)
	}
	files["c.csv"] = "source,time_ns\nz,1\n"
	if _, err := ConcatCSV([]string{"a.csv", "c.csv"}, csvFiles(files)); err == nil || !strings.Contains(err.Error(), "c.csv: line 1: columns") {
		t.Fatalf("mismatched columns: %v", err)
	}
	if _, err := dt.Column("label"); err == nil {
		t.Fatal("a text column plotted")
	}
	if !dt.IsText("label") || !reflect.DeepEqual(dt.Strings("label"), []string{"ring", "3"}) || dt.IsText("time_ns") || dt.Strings("time_ns") != nil {
		t.Fatalf("text column: %v %q, time_ns %v", dt.IsText("label"), dt.Strings("label"), dt.IsText("time_ns"))
	}
	if err := dt.AddParam("chunk_bytes", "1"); err == nil {
		t.Fatal("a second chunk_bytes column")
	}
	if err := dt.AddParam("rate", "0.5"); err != nil || dt.kinds[len(dt.kinds)-1] != reflect.Float64 {
		t.Fatalf("rate: %v %v", err, dt.kinds)
	}
}
