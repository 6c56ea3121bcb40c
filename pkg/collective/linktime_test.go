package collective

import (
	"math"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// linkBwPs is the flows' bytes on the most loaded link over its rate:
// a ring AllReduce inside one server sends 2(n-1)/n of the size out of
// every GPU's NVLink, an AllGather (n-1)/n; a ring across two servers
// with one channel crosses each way once, so the GPU at a crossing sends
// (n-1)/n of an AllGather over its NIC, the binding link when the NIC is
// slow enough.
func TestLinkBwPs(t *testing.T) {
	const size = 64 << 20
	for _, c := range []struct {
		op       Op
		gpus, ch int
		nicGBps  float64
		want     float64 // ps
	}{
		{AllReduce, 8, 8, 50, 2 * 7.0 / 8 * size / (400 * 1e-3)},
		{AllGather, 8, 8, 50, 7.0 / 8 * size / (400 * 1e-3)},
		{AllGather, 16, 1, 10, 15.0 / 16 * size / (10 * 1e-3)},
	} {
		f := Fabric{GPUs: c.gpus, GPUsPerServer: 8, NVSwitches: make([][]int32, c.gpus/8)}
		d := &Decomposer{Fabric: f, Planner: &Planner{M: ServerModel{CC: 90, NVLinkGBps: 400, NICs: 8, NICGBps: c.nicGBps}, F: f}}
		ranks := make([]int32, c.gpus)
		for i := range ranks {
			ranks[i] = int32(i)
		}
		co := &Coll{Rec: stream.Collective{Op: string(c.op), Size: size}, Ranks: ranks, Plan: Plan{Algo: AlgoRing, Proto: Simple, Channels: c.ch}}
		got, ok := d.linkBwPs(co)
		if !ok || math.Abs(float64(got)-c.want) > 1e-6*c.want {
			t.Errorf("%s on %d GPUs, %d channels: %d ps (ok %v), want %.0f", c.op, c.gpus, c.ch, got, ok, c.want)
		}
	}
	// No NVLink rate: NCCL's model time stays.
	d := &Decomposer{Fabric: Fabric{GPUs: 8, GPUsPerServer: 8}, Planner: &Planner{}}
	if _, ok := d.linkBwPs(&Coll{Rec: stream.Collective{Op: string(AllReduce), Size: size}, Ranks: []int32{0, 1}, Plan: Plan{Algo: AlgoRing}}); ok {
		t.Errorf("priced without an NVLink rate")
	}
}
