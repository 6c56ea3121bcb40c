package packet

import (
	"testing"

	"github.com/fabricsim/fabricsim/pkg/collective"
	"github.com/fabricsim/fabricsim/pkg/route"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// a2a512 is the 2048-GPU AllToAll's shape at a quarter of the GPUs: a
// direct AllToAll of 8 KiB a pair on a 512-GPU Spectrum-X (262 k flows,
// twice the flows the load model spreads).
func a2a512(tb testing.TB) *Sim { return a2aSim(tb, 512, 4<<20) }

// a2aSim is a direct AllToAll of size bytes a GPU on a Spectrum-X of gpus
// GPUs, as topogen and simccl-decompose make it.
func a2aSim(tb testing.TB, gpus int, size int64) *Sim {
	tp := gen(tb, topo.Params{Family: topo.SpectrumX, GPUs: gpus, GPUType: "H100", NICBW: 400e9})
	fl := decomposeFlows(tb, tp, 1, 1, collective.Options{Algo: "direct", LaunchLatency: true, MaxChunks: 16},
		collective.Step{Op: collective.AllToAll, Size: size, Group: collective.DP})
	r, err := route.New(tp)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := New(tp, r, DefaultConfig(), fl, 1)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// BenchmarkPlanParts512 times planning two parts of a2a512, serial work
// before the first window.
func BenchmarkPlanParts512(b *testing.B) {
	s := a2a512(b)
	b.ResetTimer()
	for range b.N {
		s.pv.ends, s.pv.moves = nil, nil // a run makes them once: each plan pays for it
		if _, err := s.planParts(2); err != nil {
			b.Fatal(err)
		}
	}
}
