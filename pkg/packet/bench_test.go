package packet

import (
	"testing"
	"time"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/collective"
	"github.com/fabricsim/fabricsim/pkg/dag"
	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/route"
	"github.com/fabricsim/fabricsim/pkg/topo"
	"github.com/fabricsim/fabricsim/pkg/workload"
)

type flowCollect struct{ flows []stream.Flow }

func (c *flowCollect) Flow(f *stream.Flow) error {
	g := *f
	g.Deps = append([]int64(nil), f.Deps...)
	c.flows = append(c.flows, g)
	return nil
}

// microFlows decomposes SimAI's micro benchmark (TP AllReduce 1 MiB, DP
// AllReduce 64 MiB, EP AllToAll 16 MiB) on a cluster.
func microFlows(tb testing.TB, tp *topo.Topology, tpSize, ep int) *Flows {
	return decomposeFlows(tb, tp, tpSize, ep, collective.Options{LaunchLatency: true, MaxChunks: 16},
		collective.Step{Op: collective.AllReduce, Size: 1 << 20, Group: collective.TP},
		collective.Step{Op: collective.AllReduce, Size: 64 << 20, Group: collective.DP},
		collective.Step{Op: collective.AllToAll, Size: 16 << 20, Group: collective.EP})
}

// decomposeFlows decomposes steps on a cluster as simccl-decompose does
// with opt.
func decomposeFlows(tb testing.TB, tp *topo.Topology, tpSize, ep int, opt collective.Options, steps ...collective.Step) *Flows {
	m, _ := nccl.ModelFromTopology(tp)
	fab := collective.FabricOf(tp)
	pl, err := collective.NewPlanner(m, fab, opt)
	if err != nil {
		tb.Fatal(err)
	}
	l, err := workload.NewLayout(tp.GPUs, tpSize, 0, 1, ep)
	if err != nil {
		tb.Fatal(err)
	}
	d, _ := collective.NewDecomposer(fab, l, pl)
	w := &collective.Workload{Steps: steps}
	colls, err := d.Prepare(w)
	if err != nil {
		tb.Fatal(err)
	}
	c := &flowCollect{}
	if err := d.Emit(w, colls, collective.NewEmitter(c)); err != nil {
		tb.Fatal(err)
	}
	n := len(c.flows)
	b := dag.NewBuilder(n)
	src, dst, size, delay, lat := make([]int32, n), make([]int32, n), make([]int64, n), make([]int64, n), make([]int64, n)
	for i, f := range c.flows {
		b.Add(f.ID, f.Deps)
		src[i], dst[i], size[i] = f.Src, f.Dst, f.Size
		if f.ConnType == stream.ConnDelay {
			delay[i] = f.DelayPs
		} else {
			lat[i] = f.DelayPs
		}
	}
	dg, err := b.Build()
	if err != nil {
		tb.Fatal(err)
	}
	fl := NewFlows(dg, src, dst, size, delay)
	fl.Lat = lat
	return fl
}

// BenchmarkMicro128 runs the 128-GPU Spectrum-X A100/100 Gbps micro
// benchmark in process and reports events/s and data packets/s.
func BenchmarkMicro128(b *testing.B) {
	tp := gen(b, topo.Params{Family: topo.SpectrumX, GPUs: 128, GPUType: "A100", NICBW: 100e9})
	for i := 0; i < b.N; i++ {
		// Only Run is timed (and counted by -benchmem).
		b.StopTimer()
		fl := microFlows(b, tp, 8, 16)
		r, _ := route.New(tp)
		s, err := New(tp, r, DefaultConfig(), fl, 1)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		if err := s.Run(); err != nil {
			b.Fatal(err)
		}
		wall := time.Since(start).Seconds()
		b.ReportMetric(float64(s.Stats().Events)/wall, "events/s")
		b.ReportMetric(float64(s.Stats().DataPackets)/wall, "datapkts/s")
		b.ReportMetric(float64(s.Stats().DataPackets), "datapkts")
		b.ReportMetric(float64(s.Stats().SimPs)/1e9, "sim-ms")
		b.ReportMetric(wall, "run-s")
	}
}
