package collective

import (
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

type discard struct{}

func (discard) Flow(*stream.Flow) error { return nil }

// benchEmit plans one collective on the whole cluster and times its
// decomposition into flows (planning is outside the loop).
func benchEmit(b *testing.B, gpus int, opt Options, st Step) {
	tp, _, err := topo.Generate(topo.Params{Family: topo.SpectrumX, GPUs: gpus, GPUType: "H100"})
	if err != nil {
		b.Fatal(err)
	}
	m, err := nccl.ModelFromTopology(tp)
	if err != nil {
		b.Fatal(err)
	}
	f := FabricOf(tp)
	pl, err := NewPlanner(m, f, opt)
	if err != nil {
		b.Fatal(err)
	}
	d, err := NewDecomposer(f, Layout{TP: 1, DP: gpus, PP: 1, EP: gpus}, pl)
	if err != nil {
		b.Fatal(err)
	}
	w := &Workload{Steps: []Step{st}}
	colls, err := d.Prepare(w)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var flows int64
	for i := 0; i < b.N; i++ {
		e := NewEmitter(discard{})
		if err := d.Emit(w, colls, e); err != nil {
			b.Fatal(err)
		}
		flows = e.Flows
	}
	b.ReportMetric(float64(flows), "flows")
}

// NVLS-Tree AllReduce over 32 servers of 8 H100s, 16 chunks per channel.
func BenchmarkNVLSTree256(b *testing.B) {
	benchEmit(b, 256, Options{Algo: "nvls-tree", MaxChunks: 16}, Step{Op: AllReduce, Size: 64 << 20, Group: DP})
}

// AllToAll through the PXN rail proxies on 1024 H100s.
func BenchmarkAllToAllPXN1024(b *testing.B) {
	benchEmit(b, 1024, Options{Algo: "pxn"}, Step{Op: AllToAll, Size: 1 << 30, Group: EP})
}

// AllToAll as n(n-1) direct transfers on 1024 H100s.
func BenchmarkAllToAllDirect1024(b *testing.B) {
	benchEmit(b, 1024, Options{Algo: "direct"}, Step{Op: AllToAll, Size: 1 << 30, Group: EP})
}
