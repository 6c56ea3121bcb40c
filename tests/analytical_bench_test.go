package tests

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// benchStreamFile writes a topogen fabric plus generated flows to a file, so the
// benchmark times flowsim-analytical alone. It streams to the file: the
// child's peak RSS on Linux starts from this process's RSS at fork time.
func benchStreamFile(b *testing.B, name string, gpus string, flows func(emit func(*stream.Flow))) string {
	b.Helper()
	topoStream := mustRun(b, nil, "topogen", "--family", "spectrum-x", "--gpus", gpus)
	path := filepath.Join(b.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	writeStreamWithFlows(b, f, topoStream, nil, nil, flows)
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

// Issue 5: the fluid model simulates a ring AllReduce of 1 GiB over the
// 1024 GPUs of a Spectrum-X fabric (2*1023 steps x 1024 flows = 2.1 M flows,
// one channel) in under 2 s. The Arrow trace goes to stdout (discarded).
func BenchmarkAnalyticalRingAllReduce1024(b *testing.B) {
	ranks := make([]int32, 1024)
	for k := range ranks {
		ranks[k] = int32(k)
	}
	path := benchStreamFile(b, "ring1024.stream", "1024", ringAllReduceFlows(ranks, 1<<30, 0))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		measure(b, []string{"flowsim-analytical", "--model", "fluid", path})
	}
}

// Issue 5: 100k concurrent flows (random pairs of distinct GPUs of a 1024-GPU Spectrum-X,
// 1 MiB each as in an AllToAll, all released at time 0) in under 10 s. The
// fluid solver stays exact: flows of equal size finish fastest-first, so
// each finish re-solves only the few flows at or above its rate. (Sizes
// spread over a wide range make most finishes perturb a large share of the
// flows; see pkg/analytical.)
func BenchmarkAnalytical100kFlows(b *testing.B) {
	path := benchStreamFile(b, "random100k.stream", "1024", func(emit func(*stream.Flow)) {
		rng := rand.New(rand.NewPCG(100, 1))
		f := stream.Flow{Collective: -1, ConnType: stream.ConnP2P}
		for id := int64(0); id < 100_000; id++ {
			f.ID, f.Src = id, rng.Int32N(1024)
			f.Dst = (f.Src + 1 + rng.Int32N(1023)) % 1024 // another GPU: the reader refuses a transfer to itself
			f.Size = 1 << 20
			emit(&f)
		}
	})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		measure(b, []string{"flowsim-analytical", "--model", "fluid", path})
	}
}
