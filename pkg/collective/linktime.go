package collective

import "github.com/fabricsim/fabricsim/pkg/nccl"

// gpuLoad is the bytes a decomposition puts on one GPU's links, each way:
// its NVLink (to its peers and NVSwitch) and its share of its server's NICs.
type gpuLoad struct{ nvOut, nvIn, nicOut, nicIn float64 }

// time is the load's most loaded link's time (ps) at rates nv and nic
// (bytes per ps; nic 0: no NIC).
func (l *gpuLoad) time(nv, nic float64) float64 {
	t := max(l.nvOut/nv, l.nvIn/nv)
	if nic > 0 {
		t = max(t, l.nicOut/nic, l.nicIn/nic)
	}
	return t
}

// gpuTraffic adds collective c's traffic (Traffic: the flows' bytes summed
// over chunks and steps) onto the loads at returns, by GPU and by ring
// (trafficGroups' group: channels whose rings coincide, which run in
// phase), and returns the rates (bytes per ps) of a GPU's NVLink and of
// its share of the NICs; ok is false where the server model lacks a rate
// (no NVLink, no NIC) or the traffic cannot be formed.
func (d *Decomposer) gpuTraffic(c *Coll, at func(g int32, group int) *gpuLoad) (nv, nic float64, ok bool) {
	m := d.Planner.M
	f := d.Fabric
	if m.NVLinkGBps <= 0 || f.GPUsPerServer <= 0 || c.Rec.Size <= 0 {
		return 0, 0, false
	}
	sp := TrafficSpec{Op: Op(c.Rec.Op), Algo: c.Plan.Algo, Proto: c.Plan.Proto, Channels: max(c.Plan.Channels, 1), PXN: c.Plan.PXN, NVLSEff: nccl.NVLSEfficiency(m.CC)}
	nv = m.NVLinkGBps * 1e-3
	if m.NICs > 0 {
		nic = m.NICGBps * float64(m.NICs) / float64(f.GPUsPerServer) * 1e-3
	}
	gpu := func(n int32) bool { return int(n) < f.GPUs }
	inter := false
	err := trafficGroups(f, sp, float64(c.Rec.Size), c.Ranks, func(a, b int32, x float64, _, group int) {
		switch {
		case gpu(a) && gpu(b) && f.server(a) != f.server(b):
			at(a, group).nicOut += x
			at(b, group).nicIn += x
			inter = true
		default: // inside a server: GPU to GPU, or to or from an NVSwitch
			if gpu(a) {
				at(a, group).nvOut += x
			}
			if gpu(b) {
				at(b, group).nvIn += x
			}
		}
	})
	if err != nil || inter && nic <= 0 {
		return 0, 0, false
	}
	return nv, nic, true
}

// linkBwPs is the bandwidth term of collective c as flow granularity's
// transfers make it: the bytes the decomposition puts on each GPU's
// NVLink (to its peers and NVSwitch) and on its NIC links, each way, over
// that link's rate, the most loaded of them. Flow granularity's transfers
// move at link rates, so this, not NCCL's tuning-model bandwidth, is what
// their pipeline's steady state takes; ok is false where the server model
// lacks a rate or the traffic cannot be formed, and the caller keeps
// NCCL's model time.
func (d *Decomposer) linkBwPs(c *Coll) (ps int64, ok bool) {
	loads := map[int32]*gpuLoad{}
	nv, nic, ok := d.gpuTraffic(c, func(g int32, _ int) *gpuLoad {
		l := loads[g]
		if l == nil {
			l = &gpuLoad{}
			loads[g] = l
		}
		return l
	})
	if !ok {
		return 0, false
	}
	var t float64
	for _, l := range loads {
		t = max(t, l.time(nv, nic))
	}
	return int64(t), true
}

// ringPhasePs is, for a ring collective, how long (ps per wire byte of one
// connection) the bytes of one ring's channels take on the GPU link they
// load most. Channels whose rings coincide (ringPeriod) start together and
// stay in phase, so on a link they share they pay their fixed work at the
// same time and then share the link among themselves: a connection's
// step of b bytes takes at least its fixed work plus b x this. Rings
// that differ are out of phase and hide one another's fixed work behind
// their bytes; those only add to the link's total (linkBwPs).
func (d *Decomposer) ringPhasePs(c *Coll) (float64, bool) {
	n := len(c.Ranks)
	if !ringRows(c.Plan.Algo, Op(c.Rec.Op)) || n < 2 {
		return 0, false
	}
	type key struct {
		g     int32
		group int
	}
	loads := map[key]*gpuLoad{}
	nv, nic, ok := d.gpuTraffic(c, func(g int32, group int) *gpuLoad {
		l := loads[key{g, group}]
		if l == nil {
			l = &gpuLoad{}
			loads[key{g, group}] = l
		}
		return l
	})
	if !ok {
		return 0, false
	}
	var t float64
	for _, l := range loads {
		t = max(t, l.time(nv, nic))
	}
	// A connection's wire bytes over the collective (Traffic's ring term).
	steps := float64(n - 1)
	if Op(c.Rec.Op) == AllReduce {
		steps *= 2
	}
	conn := wireShare(c.Plan.Proto) * float64(c.Rec.Size) / float64(max(c.Plan.Channels, 1)) * steps / float64(n)
	if conn <= 0 {
		return 0, false
	}
	return t / conn, true
}
