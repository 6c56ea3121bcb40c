package stream

import (
	"bytes"
	"io"
	"testing"
	"time"
)

func benchFlow(i int) Flow {
	return Flow{ID: int64(i), Collective: int64(i / 1000), Src: int32(i % 1024), Dst: int32((i + 1) % 1024),
		Size: 65536, Deps: []int64{int64(i - 1), int64(i - 8)}, Channel: int32(i % 8), Chunk: int32(i % 14), ChunkCount: 14, ConnType: ConnRing}
}

// BenchmarkWriteFlows reports flow records encoded per second (the design
// asks for at least 1 M/s each way).
func BenchmarkWriteFlows(b *testing.B) {
	w, _ := NewWriter(io.Discard, "bench")
	f := benchFlow(1)
	b.ReportAllocs()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		f.ID = int64(i)
		if err := w.Flow(&f); err != nil {
			b.Fatal(err)
		}
	}
	w.Close()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
}

func BenchmarkReadFlows(b *testing.B) {
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, "bench")
	for i := 0; i < b.N; i++ {
		f := benchFlow(i)
		w.Flow(&f)
	}
	w.Close()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	r, err := NewReader(bytes.NewReader(buf.Bytes()), "bench")
	if err != nil {
		b.Fatal(err)
	}
	var f Flow
	n := 0
	for {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Flow(&f); err != nil {
			b.Fatal(err)
		}
		n++
	}
	if n != b.N {
		b.Fatalf("read %d of %d", n, b.N)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
}
