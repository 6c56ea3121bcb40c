package nccl

import "github.com/fabricsim/fabricsim/pkg/ncclpath"

// AllToAllTime is the planner's AllToAll estimate in microseconds for
// size bytes (the whole buffer of one rank) on t's communicator of a
// cluster of m servers: the slower of the NVLink share and the NIC share
// of one rank's traffic plus the point-to-point latency, as the
// collective-granularity stream predicts it. Serving prices its
// expert-parallel AllToAlls with it.
func AllToAllTime(m ServerModel, t *Tuner, size int64) float64 {
	n, nNodes := t.NRanks, t.NNodes
	ppn := n / nNodes
	per := float64(size) / float64(n)
	intra := per * float64(ppn-1) / (1000 * max(m.GPUGPUGBps, 1e-9))
	inter := 0.0
	if nNodes > 1 {
		nicPerGPU := m.NICGBps * float64(max(m.NICs, 1)) / float64(max(m.GPUs, 1))
		inter = per * float64(n-ppn) / (1000 * max(nicPerGPU, 1e-9))
	}
	return t.P2PLatency().Total + max(intra, inter)
}

// P2PLatency are the latency terms of point-to-point operations (AllToAll,
// SendRecv), which NCCL's tuning model leaves out: a Simple ring kernel's
// launch and one Simple ring step over NVLink (or PCIe) or the network.
// All transfers of an AllToAll run at once, so its latency is the launch
// plus the slowest hop.
func (t *Tuner) P2PLatency() LatTerms {
	intraHw := 0
	if t.Ring.TypeIntra != ncclpath.PathNVL {
		intraHw = 1
	}
	lt := LatTerms{Base: baseLat[AlgoRing][Simple], Intra: hwLat[intraHw][AlgoRing][Simple], Inter: hwLat[2][AlgoRing][Simple]}
	lt.Total = lt.Base + lt.Intra
	if t.NNodes > 1 {
		lt.Total = lt.Base + lt.Inter
	}
	return lt
}
