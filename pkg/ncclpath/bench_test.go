package ncclpath

import "testing"

// BenchmarkComputeDGXH100 measures one 8-GPU server, the unit of work per
// distinct server model.
func BenchmarkComputeDGXH100(b *testing.B) {
	s, err := Template("dgx-h100")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compute(s, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkComputeAndRecord is ncclpath's work per distinct server model:
// one Compute and the paths record, which every server of that model
// shares whatever the cluster size.
func BenchmarkComputeAndRecord(b *testing.B) {
	s, _ := Template("dgx-h100")
	b.ReportAllocs()
	for b.Loop() {
		r, err := Compute(s, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if sp := r.StreamPaths(nil); !sp.AllServers {
			b.Fatal("record does not cover all servers")
		}
	}
}
