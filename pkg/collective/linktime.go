package collective

import "github.com/fabricsim/fabricsim/pkg/nccl"

// linkBwPs is the bandwidth term of collective c as flow granularity's
// transfers make it: the bytes the decomposition puts on each GPU's
// NVLink (to its peers and NVSwitch) and on its NIC links, each way, over
// that link's rate, the most loaded of them (Traffic: the flows' bytes
// summed over chunks and steps). Flow granularity's transfers move at
// link rates, so this, not NCCL's tuning-model bandwidth, is what their
// pipeline's steady state takes; ok is false where the server model
// lacks a rate (no NVLink, no NIC) or the traffic cannot be formed, and
// the caller keeps NCCL's model time.
func (d *Decomposer) linkBwPs(c *Coll) (ps int64, ok bool) {
	m := d.Planner.M
	f := d.Fabric
	if m.NVLinkGBps <= 0 || f.GPUsPerServer <= 0 || c.Rec.Size <= 0 {
		return 0, false
	}
	sp := TrafficSpec{Op: Op(c.Rec.Op), Algo: c.Plan.Algo, Proto: c.Plan.Proto, Channels: max(c.Plan.Channels, 1), PXN: c.Plan.PXN, NVLSEff: nccl.NVLSEfficiency(m.CC)}
	// bytes per ps of one GPU's NVLink and of its share of the NICs
	nv := m.NVLinkGBps * 1e-3
	nic := 0.0
	if m.NICs > 0 {
		nic = m.NICGBps * float64(m.NICs) / float64(f.GPUsPerServer) * 1e-3
	}
	type load struct{ nvOut, nvIn, nicOut, nicIn float64 }
	loads := map[int32]*load{}
	at := func(g int32) *load {
		l := loads[g]
		if l == nil {
			l = &load{}
			loads[g] = l
		}
		return l
	}
	gpu := func(n int32) bool { return int(n) < f.GPUs }
	inter := false
	err := Traffic(f, sp, float64(c.Rec.Size), c.Ranks, func(a, b int32, x float64) {
		switch {
		case gpu(a) && gpu(b) && f.server(a) != f.server(b):
			at(a).nicOut += x
			at(b).nicIn += x
			inter = true
		default: // inside a server: GPU to GPU, or to or from an NVSwitch
			if gpu(a) {
				at(a).nvOut += x
			}
			if gpu(b) {
				at(b).nvIn += x
			}
		}
	})
	if err != nil || inter && nic <= 0 {
		return 0, false
	}
	var t float64
	for _, l := range loads {
		t = max(t, l.nvOut/nv, l.nvIn/nv)
		if nic > 0 {
			t = max(t, l.nicOut/nic, l.nicIn/nic)
		}
	}
	return int64(t), true
}
