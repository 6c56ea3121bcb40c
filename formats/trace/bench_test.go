package trace

import (
	"bytes"
	"io"
	"testing"
)

func benchWrite(b *testing.B, c Container) {
	rows := genRows(100_000)
	w, err := NewWriter(io.Discard, c, testMeta())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := w.Write(&rows[i%len(rows)]); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil { // the file containers do their work here
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkWriteParquet(b *testing.B)     { benchWrite(b, Parquet) }
func BenchmarkWriteArrowStream(b *testing.B) { benchWrite(b, ArrowStream) }
func BenchmarkWriteArrowFile(b *testing.B)   { benchWrite(b, ArrowFile) }

func benchRead(b *testing.B, c Container) {
	const n = 1 << 20
	rows := genRows(n)
	var buf bytes.Buffer
	w, err := NewWriter(&buf, c, testMeta())
	if err != nil {
		b.Fatal(err)
	}
	writeAll(b, w, rows)
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	var row Row
	for i := 0; i < b.N; i++ {
		r, err := NewReader(bytes.NewReader(data), "bench")
		if err != nil {
			b.Fatal(err)
		}
		got := 0
		for {
			err := r.Next(&row)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			got++
		}
		r.Close()
		if got != n {
			b.Fatalf("read %d rows, want %d", got, n)
		}
	}
	b.ReportMetric(float64(b.N)*n/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkReadParquet(b *testing.B)     { benchRead(b, Parquet) }
func BenchmarkReadArrowStream(b *testing.B) { benchRead(b, ArrowStream) }
func BenchmarkReadArrowFile(b *testing.B)   { benchRead(b, ArrowFile) }
