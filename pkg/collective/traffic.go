package collective

import (
	"fmt"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// TrafficSpec is what a collective's traffic matrix depends on: the
// collective record's op, algorithm, protocol and channels, and the plan's
// PXN choice and NVLS efficiency.
type TrafficSpec struct {
	Op       Op
	Algo     Algo
	Proto    Proto
	Channels int
	PXN      bool
	NVLSEff  float64 // share of NVLink rate NVLS traffic gets; 0 means 1
}

// SpecOf reads a collective record (as the stream carries it) into a
// TrafficSpec; gpuType picks NVLS's efficiency.
func SpecOf(c *stream.Collective, gpuType string) (TrafficSpec, error) {
	op, err := nccl.ParseOp(c.Op)
	if err != nil {
		return TrafficSpec{}, err
	}
	a, err := nccl.ParseAlgo(c.Algorithm)
	if err != nil {
		return TrafficSpec{}, err
	}
	sp := TrafficSpec{Op: op, Algo: a, Proto: Simple, Channels: max(c.Channels, 1), PXN: c.PXN, NVLSEff: nccl.NVLSEfficiency(topo.GPUSpecs[gpuType].CC)}
	switch strings.ToLower(c.Protocol) {
	case "ll":
		sp.Proto = LL
	case "ll128":
		sp.Proto = LL128
	}
	return sp, nil
}

// wireShare is the wire bytes per payload byte of a protocol.
func wireShare(p Proto) float64 {
	switch p {
	case LL:
		return 2
	case LL128:
		return 16.0 / 15
	}
	return 1
}

// Traffic calls add(src, dst, bytes) with the bytes node src sends node dst
// over a whole collective of size bytes on group ranks, summed over the
// chunks and steps of its decomposition (decompose.go) and counted on the
// wire (LL's flags, NVLS's efficiency included); a pair may come more than
// once. Ends are GPUs, or a server's NVSwitch for NVLS. It is the
// decomposition's traffic without its flows: a model pricing the fabric
// for a whole collective (flowsim-analytical at collective granularity)
// loads the links with it.
func Traffic(f Fabric, sp TrafficSpec, size float64, ranks []int32, add func(src, dst int32, bytes float64)) error {
	return TrafficConns(f, sp, size, ranks, func(src, dst int32, bytes float64, _ int) { add(src, dst, bytes) })
}

// TrafficConns is Traffic that also says over how many connections (NCCL
// channels whose rings coincide, each a flow of its own with its own ECMP
// hash) the bytes of each call go: what a model of hash collisions needs.
// Bytes that join another call's connection (PXN's relayed shares) come
// with 0; summed over a pair's calls, conns counts its flows.
func TrafficConns(f Fabric, sp TrafficSpec, size float64, ranks []int32, addConns func(src, dst int32, bytes float64, conns int)) error {
	return trafficGroups(f, sp, size, ranks, func(src, dst int32, bytes float64, conns, _ int) { addConns(src, dst, bytes, conns) })
}

// trafficGroups is TrafficConns that also names each call's ring: a ring
// collective's channels whose rings coincide run in phase, and group is
// their ring's index (ringOrder's channel); 0 for other algorithms.
func trafficGroups(f Fabric, sp TrafficSpec, size float64, ranks []int32, addGroup func(src, dst int32, bytes float64, conns, group int)) error {
	n := len(ranks)
	group := 0
	addConns := func(src, dst int32, bytes float64, conns int) { addGroup(src, dst, bytes, conns, group) }
	add := func(src, dst int32, bytes float64) { addConns(src, dst, bytes, 1) }
	if n < 2 || size == 0 {
		return nil
	}
	ch := max(sp.Channels, 1)
	data := size / float64(ch)
	w := wireShare(sp.Proto)
	eff := sp.NVLSEff
	if eff <= 0 {
		eff = 1
	}
	ringLike := sp.Algo == AlgoRing || (sp.Algo == AlgoNVLSTree && sp.Op != AllReduce)
	// PXN relays ring hops and AllToAll's PXN variant; the decomposition
	// ignores it elsewhere.
	relay := (sp.PXN && ringLike) || sp.Algo == AlgoPXN
	// send moves b from src to dst, through the sender's GPU on the
	// receiver's rail when PXN relays it.
	send := func(src, dst int32, b float64, conns int) {
		if relay && f.server(src) != f.server(dst) {
			if px := int32(f.server(src)*f.GPUsPerServer) + dst%int32(f.GPUsPerServer); px != src {
				addConns(src, px, b, conns)
				src = px
			}
		}
		addConns(src, dst, b, conns)
	}
	switch {
	case ringLike:
		switch sp.Op {
		case Broadcast, Reduce:
			order := ringOrder(f.nodesOf(ranks), 0)
			if sp.Op == Reduce {
				order = append(order[1:], order[0])
			}
			for i := 0; i+1 < n; i++ {
				send(ranks[order[i]], ranks[order[i+1]], w*size, ch)
			}
		default:
			steps := float64(n - 1)
			if sp.Op == AllReduce {
				steps *= 2
			}
			// Channels whose rings coincide are added as one, weighted
			// by how many there are: a 24-channel ring in one server
			// is one ring's traffic.
			nodes := f.nodesOf(ranks)
			period := ringPeriod(nodes, ch)
			for c := 0; c < period; c++ {
				group = c
				same := (ch - c + period - 1) / period
				order := ringOrder(nodes, c)
				for i := range order {
					send(ranks[order[i]], ranks[order[(i+1)%n]], float64(same)*w*data*steps/float64(n), same)
				}
			}
		}
	case sp.Algo == AlgoTree:
		for c := 0; c < ch; c++ {
			parent, _, _ := rankTree(f, ranks, c)
			for p, q := range parent {
				if q >= 0 {
					add(ranks[p], ranks[q], w*data) // partial sums up
					add(ranks[q], ranks[p], w*data) // the result down
				}
			}
		}
	case sp.Algo == AlgoNVLS:
		for c := 0; c < ch; c++ {
			sw, err := f.nvswitch(f.server(ranks[0]), c)
			if err != nil {
				return err
			}
			up, down := data, data // AllReduce, as nvlsShape's callers do
			switch sp.Op {
			case AllGather:
				up, down = data/float64(n), data-data/float64(n)
			case ReduceScatter:
				up, down = data, data/float64(n)
			}
			for _, r := range ranks {
				if sp.Op == AllReduce {
					add(sw, r, data/float64(n)/eff) // reduced shard
					add(r, sw, data/float64(n)/eff) // its multicast store
				}
				add(r, sw, up/eff)
				add(sw, r, down/eff)
			}
		}
	case sp.Algo == AlgoNVLSTree:
		nodes := f.nodesOf(ranks)
		ppn := len(nodes[0])
		for c := 0; c < ch; c++ {
			shard := data / float64(ppn)
			for _, local := range nodes {
				sw, err := f.nvswitch(f.server(ranks[local[0]]), c)
				if err != nil {
					return err
				}
				for _, p := range local {
					add(ranks[p], sw, data/eff)  // upload for reduction
					add(sw, ranks[p], shard/eff) // reduced shard
					add(ranks[p], sw, shard/eff) // multicast store
					add(sw, ranks[p], data/eff)  // multicast
				}
			}
			tr := newServerTree(len(nodes), c%2)
			for j, par := range tr.par {
				if par < 0 {
					continue
				}
				for li := 0; li < ppn && li < len(nodes[j]) && li < len(nodes[par]); li++ {
					a, b := ranks[nodes[j][li]], ranks[nodes[par][li]]
					add(a, b, shard)
					add(b, a, shard)
				}
			}
		}
	case sp.Algo == AlgoDirect || sp.Algo == AlgoPXN:
		per := size / float64(n)
		lay := newPXNLayout(f.nodesOf(ranks), n)
		for i, a := range ranks {
			for j, b := range ranks {
				if a == b {
					continue
				}
				if relay && f.server(a) != f.server(b) {
					// PXN: every GPU of a's server hands b's share to the
					// proxy on b's rail, which sends it all as one flow.
					if px := ranks[lay.relay(i, j)]; px != a {
						addConns(a, px, per, 1)
						addConns(px, b, per, 0) // joins the proxy's own flow to b
						continue
					}
				}
				addConns(a, b, per, 1)
			}
		}
	case sp.Algo == AlgoPAT:
		patTraffic(sp.Op, size, w, ranks, add)
	case sp.Algo == AlgoP2P:
		for i := 0; i+1 < n; i++ {
			add(ranks[i], ranks[i+1], size)
		}
	default:
		return fmt.Errorf("no traffic model for algorithm %s", sp.Algo)
	}
	return nil
}
