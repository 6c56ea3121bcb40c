package trace

import (
	"bytes"
	"io"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

func benchWrite(b *testing.B, c Container) {
	rows := genRows(100_000)
	var out countWriter
	w, err := NewWriter(&out, c, testMeta())
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
	b.ReportMetric(float64(out)/float64(b.N), "B/row")
}

// countWriter counts the bytes written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

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

// BenchmarkWriteParquetZstd compares zstd levels: write speed and file
// size per row.
func BenchmarkWriteParquetZstd(b *testing.B) {
	defer func(l zstd.Level) { pqZstdLevel = l }(pqZstdLevel)
	for _, l := range []struct {
		name  string
		level zstd.Level
	}{{"fastest", zstd.SpeedFastest}, {"default", zstd.SpeedDefault}} {
		b.Run(l.name, func(b *testing.B) {
			pqZstdLevel = l.level
			benchWrite(b, Parquet)
		})
	}
}

// BenchmarkReadParquetGeneric reads what BenchmarkReadParquet reads with
// parquet-go's GenericReader, which parquetSource does not use.
func BenchmarkReadParquetGeneric(b *testing.B) {
	const n = 1 << 20
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Parquet, testMeta())
	if err != nil {
		b.Fatal(err)
	}
	writeAll(b, w, genRows(n))
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	rows := make([]Row, 1024)
	for i := 0; i < b.N; i++ {
		r := parquet.NewGenericReader[Row](bytes.NewReader(data))
		got := 0
		for {
			k, err := r.Read(rows)
			got += k
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		r.Close()
		if got != n {
			b.Fatalf("read %d rows, want %d", got, n)
		}
	}
	b.ReportMetric(float64(b.N)*n/b.Elapsed().Seconds(), "rows/s")
}
