package collective

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/fabricsim/fabricsim/pkg/nccl"
)

// Options steer algorithm selection and decomposition.
type Options struct {
	Selector string // "nccl" (default) or "simai"
	Algo     string // forced algorithm ("" = select)
	Proto    string // forced protocol ("" = select)
	// NCCL_ALGO / NCCL_PROTO style enable lists (see NCCL's docs).
	AlgoList, ProtoList string
	// PXN: "" auto (NCCL: on where NVLink reaches a peer's NIC; SimAI
	// selector: AS_PXN_ENABLE, default off), "on", "off".
	PXN string
	// NVLS for the SimAI selector (AS_NVLS_ENABLE); the NCCL selector uses
	// the server's NVLS support.
	SimAINVLS bool
	// Channel overrides: AS_RING_CHANNELS, AS_NV_CHANNELS (0 = model's).
	RingChannels, NVLSChannels int
	// MaxChannels caps ring and tree channels as NCCL_MAX_NCHANNELS does,
	// where NCCL still runs small sizes on fewer (0: no cap).
	MaxChannels int
	// MaxChunks caps the pipeline chunks per channel (0: NCCL's chunk
	// sizes, however many chunks they make); NVLS gets four times as many. Beyond a few chunks a pipeline
	// only repeats its steady state, so the cap trades little fidelity for
	// far fewer flows on large collectives.
	MaxChunks int
	// LaunchLatency adds NCCL's latency to the DAG: the base latency as a
	// delay node per rank at the start of each collective and the per-step
	// hardware latency on every transfer (false: bandwidth terms only).
	LaunchLatency bool
	// SendLatPs is SimAI replay (its AS_SEND_LAT, in ps; 0: off): SimAI's
	// ns-3 SendFlow delays every flow's send by that much and adds no
	// other software latency, so every transfer's step latency becomes
	// this, in place of NCCL's base and per-step latencies, and the model
	// time counts it once per step of the algorithm (ReplayLatency).
	SendLatPs int64
	// Transport is the NCCL transport's slots and per-step costs
	// (transport.go); the zero value means DefaultTransport. Off under
	// SimAI replay and without LaunchLatency.
	Transport *Transport
	// CollTime is how a COLL node (collective granularity) is timed:
	// CollTimeNCCL (""), NCCL's tuning-model time, or CollTimeLinks, the
	// flows' mechanism in closed form (linktime.go).
	CollTime string
}

// The COLL node timings (Options.CollTime).
const (
	CollTimeNCCL  = "nccl"
	CollTimeLinks = "links"
)

// transport is the options' transport, DefaultTransport when unset.
func (o Options) transport() Transport {
	if o.Transport != nil {
		return *o.Transport
	}
	return DefaultTransport()
}

// stepCosts is what plan pl's transfers pay per step: nothing under
// SimAI replay (its send latency is all the software latency) or without
// launch latency (bandwidth terms only).
func (o Options) stepCosts(pl Plan) stepCosts {
	if !o.LaunchLatency || o.SendLatPs > 0 {
		return stepCosts{}
	}
	tr := o.transport()
	s := tr.costsFor(pl.Proto)
	if pl.Algo == AlgoDirect || pl.Algo == AlgoPXN || pl.Algo == AlgoP2P {
		s.proxyOp = usToPs(tr.P2POpUs) // an AllToAll's proxy round (a2aPace)
	}
	if pl.P2PSubs > 0 {
		s.pace = tr.p2pPacePs(pl.Proto, pl.P2PSubs, pl.P2PSteps)
	}
	// A GPU work alone is a cost too (preset=none,nvls-tree-bw=1).
	gpuWork := pl.Algo == AlgoNVLS && tr.nvlsWork() || pl.Algo == AlgoNVLSTree && tr.nvlsTreeWork()
	if s.intra == 0 && s.inter == 0 && !gpuWork && s.proxyOp == 0 && pl.RingRoundPs == 0 && pl.LLSlicePs == 0 {
		return stepCosts{} // no cost to carry: the cut record stays as it was
	}
	// A step holds at most a slot, and NCCL fills a slot with no more
	// than one chunk's share: ring Simple's 2 MiB chunk is chunkSteps (4)
	// slots, NVLS-Tree's 64 KiB chunk one partly filled slot.
	if pl.Chunk > 0 {
		chunkSteps := int64(1)
		if pl.Algo == AlgoRing && pl.Proto == Simple && pl.Chunk >= 4*s.bytes {
			chunkSteps = 4
		}
		s.bytes = min(s.bytes, max(wire(pl.Chunk, pl.Proto)/chunkSteps, 1))
	}
	s.slice = sliceRuleOf(pl.Algo, pl.Proto, s.bytes)
	s.roundPaced = pl.Algo == AlgoRing && pl.Proto != Simple
	switch {
	case pl.Algo == AlgoNVLS:
		s.serial = tr.nvlsWorkPs(s.bytes) // an NVLS chunk's GPU work (nvlsChunkPs), step_bytes its chunk
	case pl.Algo == AlgoNVLSTree:
		// its loop's GPU work (Transport.NVLSTreeLoopUs, NVLSTreeGBps),
		// the cut carrying it as a tree step's (nvlsTreeWorkPs)
		s.serial, s.treeFs = usToPs(tr.NVLSTreeLoopUs), 0
		if tr.NVLSTreeGBps > 0 {
			s.treeFs = int64(math.Round(1e6 / tr.NVLSTreeGBps))
		}
	case pl.Algo == AlgoRing:
		s.serial = max(s.serial, pl.RingRoundPs) + pl.LLSlicePs // the cut carries both in step_serial_ps
	case pl.Algo == AlgoTree && pl.Proto == LL128 && tr.TreeGBps > 0:
		// runTreeSplit's step: fixed work plus its inputs at the block's
		// LL128 rate (Transport.TreeOpUs, TreeGBps)
		s.serial, s.treeFs = usToPs(tr.TreeOpUs), int64(math.Round(1e6/tr.TreeGBps))
		s.treeWhole = tr.TreeLL128Whole
	case pl.Algo == AlgoTree && pl.Proto == LL && tr.TreeLLGBps > 0:
		// the same step at a thread block's LL rate (Transport.TreeLLGBps)
		s.serial, s.treeFs = 0, int64(math.Round(1e6/tr.TreeLLGBps))
		s.treeShare = tr.TreeLLShare
	default:
		s.serial = 0 // trees give each role its own warps
	}
	return s
}

// collCosts is stepCosts for a collective of op: an NVLS-Tree loop's
// GPU work is AllReduce's (other ops run NVLS-Tree as a ring, whose
// slices' work it is not).
func (o Options) collCosts(pl Plan, op Op) stepCosts {
	s := o.stepCosts(pl)
	if pl.Algo == AlgoNVLSTree && op != AllReduce {
		s.serial, s.treeFs = 0, 0
	}
	return s
}

// sliceRuleOf is how a ring of algorithm a cuts its chunks under protocol
// p, for steps of stepBytes (prims_simple.h: SlicePerChunk =
// chunkSteps/sliceSteps = 2, sliceSize = stepSize x sliceSteps (2), and
// at least 1/32 of it; other protocols and algorithms: one step).
func sliceRuleOf(a Algo, p Proto, stepBytes int64) sliceRule {
	if a == AlgoRing && p == Simple {
		return sliceRule{bytes: 2 * stepBytes, min: max(2*stepBytes/32, 1), perChunk: 2}
	}
	return sliceRule{bytes: stepBytes}
}

// MaxCollectiveBytes bounds a collective's size: at 2^40 bytes, the wire
// bytes of every rank together (at most twice the size per rank, 2^20
// ranks) and the picoseconds it takes at 1 Gbit/s still fit an int64.
const MaxCollectiveBytes = 1 << 40

// Plan is how one collective runs.
type Plan struct {
	Algo        Algo
	Proto       Proto
	Channels    int
	Chunk       int64
	PXN         bool
	PredictedUs float64  // NCCL's model; 0 where it has none (MSCCL schedules)
	Lat         LatTerms // the model's latency terms the DAG carries
	// RingRoundPs: a multi-server LL or LL128 ring's proxy round per ring
	// step (Transport.RingRoundPs), a floor on its slices' fixed work.
	RingRoundPs int64
	// LLSlicePs: an LL ring slice's bytes at LL's bus bandwidth
	// (Transport.LLBusGBps), in series with its fixed work.
	LLSlicePs int64
	// P2PSubs: under the transport's costs, an AllToAll's most network
	// connections on one of a rank's channels (p2pSubs), which share its
	// buffer, and P2PSteps the steps each of them moves (p2pPartSteps):
	// Transport.p2pPacePs; 0: none.
	P2PSubs  int
	P2PSteps int64
	// NoOp: a 1-rank group or 0 bytes; NCCL returns without moving data.
	NoOp bool
}

// Planner chooses plans; it caches a tuner per communicator shape.
type Planner struct {
	M       ServerModel
	F       Fabric
	Opt     Options
	MSCCL   *MSCCLAlgo // replaces the built-in algorithm for its collective and rank count
	algoOK  func(op Op, name string) bool
	protoOK func(op Op, name string) bool
	tuners  map[[3]int]*Tuner
}

// NewPlanner validates the options.
func NewPlanner(m ServerModel, f Fabric, opt Options) (*Planner, error) {
	p := &Planner{M: m, F: f, Opt: opt, tuners: map[[3]int]*Tuner{}}
	if opt.Selector == "" {
		p.Opt.Selector = "nccl"
	}
	if p.Opt.Selector != "nccl" && p.Opt.Selector != "simai" {
		return nil, fmt.Errorf("--selector %q: nccl or simai", opt.Selector)
	}
	if opt.Algo != "" {
		if _, err := nccl.ParseAlgo(opt.Algo); err != nil {
			return nil, err
		}
	}
	if opt.Proto != "" {
		if _, err := nccl.ParseProto(opt.Proto); err != nil {
			return nil, err
		}
	}
	var err error
	if p.algoOK, err = parseEnableList(opt.AlgoList, "NCCL_ALGO", func(s string) bool { _, e := nccl.ParseAlgo(s); return e == nil }); err != nil {
		return nil, err
	}
	if p.protoOK, err = parseEnableList(opt.ProtoList, "NCCL_PROTO", func(s string) bool { _, e := nccl.ParseProto(s); return e == nil }); err != nil {
		return nil, err
	}
	switch opt.PXN {
	case "", "on", "off":
	default:
		return nil, fmt.Errorf("pxn %q: on, off or empty for auto", opt.PXN)
	}
	return p, nil
}

// tuner is NCCL's model for a group of nRanks over nNodes servers;
// uneven when its servers hold different numbers of its ranks. NVLS and
// NVLS-Tree are then left out of the choice: NVLS-Tree's intra-server
// reduction hands each local GPU one shard (nvlsTree), which needs the
// same GPUs on every server, and the model has no NVLS graph for servers
// that differ; such a group takes NCCL's next choice (a tp 6 group over
// 2 + 4 GPUs stopped the run on H100s).
func (p *Planner) tuner(nRanks, nNodes int, uneven bool) *Tuner {
	k := [3]int{nRanks, nNodes, 0}
	if uneven {
		k[2] = 1
	}
	t := p.tuners[k]
	if t == nil {
		m := p.M
		if p.Opt.transport().AMDHost {
			m.AMDCPU = true
		}
		m.NVLS = m.NVLS && !uneven
		t = nccl.NewTuner(m, nRanks, nNodes)
		t.NetLatencyUs = p.Opt.transport().NetLatencyUs
		t.MaxChannels = p.Opt.MaxChannels
		if p.Opt.transport().TreeGraphNCCL {
			t.RaiseTreeIntra()
		}
		t.TreeLatLegacy = p.Opt.transport().TreeLatLegacy
		t.Enabled = func(op Op, a Algo, pr Proto) bool {
			return p.algoOK(op, a.String()) && p.protoOK(op, pr.String())
		}
		p.tuners[k] = t
	}
	return t
}

// unevenNodes: the servers (Fabric.nodesOf) hold different numbers of a
// group's ranks.
func unevenNodes(nodes [][]int) bool {
	return slices.ContainsFunc(nodes, func(l []int) bool { return len(l) != len(nodes[0]) })
}

func (p *Planner) pxn() bool {
	switch p.Opt.PXN {
	case "on":
		return true
	case "off":
		return false
	}
	if p.Opt.Selector == "simai" {
		return false
	}
	return p.M.PXN
}

// Plan chooses the algorithm, protocol, channels and chunking for op on a
// group of ranks.
func (p *Planner) Plan(op Op, size int64, groupType string, ranks []int32) (Plan, error) {
	return p.PlanOn(op, size, groupType, ranks, unevenNodes(p.F.nodesOf(ranks)))
}

// PlanOn is Plan, told whether NVLS is out (uneven: this group's servers,
// or a sibling's it stands for, hold different numbers of its ranks).
func (p *Planner) PlanOn(op Op, size int64, groupType string, ranks []int32, uneven bool) (Plan, error) {
	pl, err := p.plan(op, size, groupType, ranks, uneven)
	if err != nil || pl.NoOp || p.Opt.SendLatPs <= 0 {
		return pl, err
	}
	// SimAI replay: the choice stands; its latency terms become the send
	// latency, on every transfer.
	send := float64(p.Opt.SendLatPs) / 1e6
	lat := p.tuner(len(ranks), len(p.F.nodesOf(ranks)), uneven).ReplayLatency(op, pl.Algo, send)
	if pl.PredictedUs > 0 {
		pl.PredictedUs += lat - pl.Lat.Total
	}
	pl.Lat = LatTerms{Intra: send, Inter: send, Total: lat}
	return pl, nil
}

func (p *Planner) plan(op Op, size int64, groupType string, ranks []int32, uneven bool) (Plan, error) {
	n := len(ranks)
	pl := Plan{PXN: p.pxn()}
	if size < 0 || size > MaxCollectiveBytes {
		return pl, fmt.Errorf("%d bytes: a collective moves 0 to %d (1 TiB); the bytes its ranks put on the wire and the times they take must stay within 64-bit counters", size, int64(MaxCollectiveBytes))
	}
	if n < 2 || size == 0 {
		pl.Algo, pl.Proto, pl.NoOp = AlgoRing, Simple, true
		return pl, nil
	}
	nNodes := len(p.F.nodesOf(ranks))
	t := p.tuner(n, nNodes, uneven)
	if a := p.MSCCL; a != nil && a.Applies(op, n) {
		// NCCL's model has no term for a user schedule; it launches like a
		// ring kernel of its protocol and pays a ring's per-hop latencies.
		pl.Algo, pl.Proto, pl.Channels = AlgoMSCCL, a.Proto, a.Channels
		pl.Lat = t.LatencyTerms(AllReduce, AlgoRing, a.Proto)
		pl.Lat.Total = 0
		return pl, nil
	}
	switch op {
	case AllToAll:
		pl.Algo, pl.Proto, pl.Channels = AlgoDirect, Simple, 1
		if pl.PXN && nNodes > 1 {
			pl.Algo = AlgoPXN
		}
		pl.Chunk = p2pNetChunk // PXN's proxies forward in steps of this
		if p.Opt.Algo != "" {
			a, _ := nccl.ParseAlgo(p.Opt.Algo)
			if a != AlgoDirect && a != AlgoPXN {
				return pl, fmt.Errorf("algorithm %s does not implement %s (direct or pxn)", a, op)
			}
			pl.Algo = a
		}
		pl.Lat = t.P2PLatency()
		pl.PredictedUs = nccl.AllToAllTime(p.M, t, size)
		if nNodes > 1 && p.Opt.stepCosts(pl) != (stepCosts{}) {
			// Under the transport's costs, NCCL's grouped sends and
			// receives: each peer's share in parts over channels, each
			// part in steps (P2PPlan).
			nics := max(p.M.NICs/max(p.F.GPUsPerServer, 1), 1)
			pl.Channels, pl.Chunk = p.Opt.transport().P2PPlan(size/int64(n), n, nics, 2*t.Ring.NChannels)
			if !p.Opt.transport().P2PDedicated {
				pl.P2PSubs = p2pSubs(p.F.nodesOf(ranks), pl.Channels, p2pChannelsOf(2*t.Ring.NChannels))
				pl.P2PSteps = p2pPartSteps(size/int64(n), pl.Channels, pl.Chunk)
			}
		}
		return pl, nil
	case SendRecv:
		pl.Algo, pl.Proto, pl.Channels = AlgoP2P, Simple, 1
		pl.Lat = t.P2PLatency()
		bw := p.M.GPUGPUGBps
		if nNodes > 1 {
			bw = p.M.GPUNICGBps
		}
		pl.PredictedUs = pl.Lat.Total + float64(size)/(1000*bw)
		return pl, nil
	}
	var err error
	switch {
	case p.Opt.Algo != "" || p.Opt.Proto != "":
		if err = p.forced(t, op, size, &pl); err != nil && uneven && strings.HasPrefix(strings.ToLower(p.Opt.Algo), "nvls") {
			err = fmt.Errorf("%v (its servers hold different numbers of its ranks: no NVLS)", err)
		}
	case p.Opt.Selector == "simai":
		err = p.simai(t, op, groupType, n, size, &pl)
	default:
		pl.Algo, pl.Proto, pl.PredictedUs, err = t.Select(op, size)
		if a, pr, ok := t.PluginChoice(p.Opt.transport().Tuner, op, size); ok && err == nil {
			pl.Algo, pl.Proto, pl.PredictedUs = a, pr, t.Time(op, a, pr, size)
		}
	}
	if err != nil {
		return pl, err
	}
	if pl.PredictedUs == 0 {
		pl.PredictedUs = t.Time(op, pl.Algo, pl.Proto, size)
	}
	pl.Channels = t.Channels(op, pl.Algo, pl.Proto, size)
	if (pl.Algo == AlgoRing || pl.Algo == AlgoTree) && p.Opt.transport().ChannelCells {
		pl.Channels = channelCells(op, n, size, pl.Channels)
	}
	if pl.Algo == AlgoNVLS || pl.Algo == AlgoNVLSTree {
		if p.Opt.NVLSChannels > 0 {
			pl.Channels = p.Opt.NVLSChannels
		}
	} else if p.Opt.RingChannels > 0 {
		pl.Channels = p.Opt.RingChannels
	}
	pl.Chunk = nccl.ChunkBytes(op, pl.Algo, pl.Proto, nNodes, n, pl.Channels, size)
	if tr := p.Opt.transport(); pl.Algo == AlgoRing && pl.Proto == Simple && (op == AllReduce || op == AllGather || op == ReduceScatter) && tr.BuffSimple > 0 {
		// A Simple ring's chunk is chunkSteps (NCCL_STEPS/2) of the
		// buffer's steps (enqueue.cc calcCollChunking: stepSize =
		// buffSize/NCCL_STEPS, chunkSize = stepSize x chunkSteps), so
		// NCCL_BUFFSIZE moves it: 2 MiB at NCCL's 4 MiB, 4 MiB at the 8
		// MiB aws-ofi-nccl sets on AWS (h100-efa).
		pl.Chunk = tr.BuffSimple / 2
	}
	if tr := p.Opt.transport(); tr.TreeDepthChunk && pl.Algo == AlgoTree && pl.Proto == Simple && op == AllReduce {
		pl.Chunk = nccl.TreeSimpleChunk(tr.StepBytes(Simple), size, pl.Channels, n, nNodes)
	}
	if c := p.Opt.transport().NVLSChunk; c > 0 && pl.Algo == AlgoNVLSTree && op == AllReduce {
		pl.Chunk = c
	}
	if tr := p.Opt.transport(); pl.Algo == AlgoNVLS && tr.nvlsWork() && p.Opt.LaunchLatency && p.Opt.SendLatPs <= 0 {
		// NCCL shrinks the NVLS chunk for smaller sizes; under the
		// transport's costs, which it pays per chunk, the DAG does too.
		pl.Chunk = nvlsChunk(pl.Chunk, size, int64(max(pl.Channels, 1))*int64(n))
	}
	pl.Lat = t.LatencyAt(op, pl.Algo, pl.Proto, size)
	if pl.Algo == AlgoRing && (op == AllReduce || op == AllGather || op == ReduceScatter) && p.Opt.LaunchLatency {
		// One ring step's message per channel connection: a rank's share
		// of the channel's loop, at most a chunk.
		per := (size + int64(pl.Channels) - 1) / int64(max(pl.Channels, 1))
		step := min(max(pl.Chunk, 1), (per+int64(n)-1)/int64(n))
		pl.RingRoundPs = p.Opt.transport().RingRoundPs(pl.Proto, pl.Channels, n/nNodes, nNodes, wire(step, pl.Proto))
		if bw := t.BusBw(op, AlgoRing, LL128) / float64(max(t.Ring.NChannels, 1)); pl.RingRoundPs > 0 && pl.Proto == LL128 && bw > 0 {
			// The proxy posts a step once the channel's thread block has
			// written it, at LL128's per-channel rate in NCCL's model
			// (perChMaxRingLL128Bw, 36.7 GB/s on Hopper). The block writes
			// a step as the upstream hop's lines land (LL128's flag in
			// every 128-byte line), so that copy overlaps the step's bytes
			// on the wire beyond the step's first ll128-tail bytes
			// (ll128CopyPs).
			pl.RingRoundPs += ll128CopyPs(step, p.Opt.transport().LL128TailBytes, bw, ringWireGBps(p.M, n/nNodes, p.F.GPUsPerServer, pl.Channels), pl.Channels)
		}
		if llBw := p.Opt.transport().LLBusGBps; pl.Proto == LL && llBw > 0 && p.Opt.SendLatPs <= 0 {
			// A slice of step payload bytes on one of the ring's channels
			// at LL's bus bandwidth (Transport.LLBusGBps).
			pl.LLSlicePs = int64(float64(step) * float64(max(pl.Channels, 1)) / llBw * 1e3)
		}
	}
	if pl.Algo == AlgoRing && nNodes > 1 && p.Opt.stepCosts(pl) != (stepCosts{}) {
		// NCCL's model raises a multi-server ring's every hop to its
		// network overhead (the proxy's posts: "inter-node rings still
		// have to launch nsteps * net overhead"); the transport prices
		// the posts on the network hops themselves (their step costs, and
		// an LL or LL128 ring's proxy round), so an NVLink hop keeps its
		// own latency. It moves LL rings everywhere, LL128 and Simple
		// only on AMD hosts (Intel's overhead is NVLink's latency there);
		// measured on OCI's rings +0.001 to +0.004, NDmv4's 1 KiB LL
		// AllGather 1.59 -> 1.32. Lat.Total keeps the overhead: the
		// bandwidth term is PredictedPs less it, NCCL's own split.
		pl.Lat.Intra = t.HopLatencyAt(op, pl.Algo, pl.Proto, size).Intra
	}
	return pl, nil
}

// forced applies --algo/--proto: the other choice is still selected by the model.
func (p *Planner) forced(t *Tuner, op Op, size int64, pl *Plan) error {
	best := -1.0
	for a := AlgoTree; a <= AlgoPAT; a++ {
		if p.Opt.Algo != "" {
			if fa, _ := nccl.ParseAlgo(p.Opt.Algo); fa != a {
				continue
			}
		}
		for pr := LL; pr <= Simple; pr++ {
			if p.Opt.Proto != "" {
				if fp, _ := nccl.ParseProto(p.Opt.Proto); fp != pr {
					continue
				}
			}
			if tm := t.SelectionTime(op, a, pr, size); tm >= 0 && (best < 0 || tm < best) {
				best, pl.Algo, pl.Proto = tm, a, pr
			}
		}
	}
	if best < 0 {
		return fmt.Errorf("%s with algorithm %q protocol %q is not available on %d ranks over %d servers",
			op, orAny(p.Opt.Algo), orAny(p.Opt.Proto), t.NRanks, t.NNodes)
	}
	pl.PredictedUs = t.Time(op, pl.Algo, pl.Proto, size)
	return nil
}

func orAny(s string) string {
	if s == "" {
		return "any"
	}
	return s
}

// simai applies SimAI's GPU-type rules (MockNcclGroup::get_algo_proto_info):
// TP AllReduce uses NVLS on Hopper with 8+ ranks when NVLS is enabled, TP
// AllGather NVLS-Tree under the same condition, everything else Ring; the
// protocol is Simple.
func (p *Planner) simai(t *Tuner, op Op, groupType string, n int, size int64, pl *Plan) error {
	pl.Algo, pl.Proto = AlgoRing, Simple
	hopper := p.M.CC >= 90
	if groupType == TP && p.Opt.SimAINVLS && n >= 8 && hopper {
		switch op {
		case AllReduce:
			pl.Algo = AlgoNVLS
			if t.NNodes > 1 {
				pl.Algo = AlgoNVLSTree
			}
		case AllGather:
			pl.Algo = AlgoNVLSTree
			if t.NNodes == 1 {
				pl.Algo = AlgoNVLS // NVLS-Tree on one server is NVLS
			}
		}
	}
	if tm := t.Time(op, pl.Algo, pl.Proto, size); tm >= 0 {
		pl.PredictedUs = tm
	} else if pl.Algo != AlgoRing {
		return fmt.Errorf("SimAI's rules pick %s for %s, which this group cannot run (no NVSwitch, not Hopper, or servers holding different numbers of its ranks)", pl.Algo, op)
	}
	return nil
}

// parseEnableList reads NCCL's NCCL_ALGO / NCCL_PROTO syntax:
// "[^]a,b[;func:[^]c,d]" with case-insensitive names; the first list may
// omit the function and then applies to all.
func parseEnableList(s, name string, valid func(string) bool) (func(op Op, v string) bool, error) {
	type rule struct {
		neg bool
		set map[string]bool
	}
	if strings.TrimSpace(s) == "" {
		return func(Op, string) bool { return true }, nil
	}
	norm := func(x string) string {
		return strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(strings.TrimSpace(x)))
	}
	rules := map[Op]*rule{}
	var global *rule
	for i, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		var op Op
		list := part
		if k := strings.Index(part, ":"); k >= 0 {
			o, err := nccl.ParseOp(part[:k])
			if err != nil {
				return nil, fmt.Errorf("%s=%q: %v", name, s, err)
			}
			op, list = o, part[k+1:]
		} else if i > 0 {
			return nil, fmt.Errorf("%s=%q: only the first list may omit the function", name, s)
		}
		r := &rule{set: map[string]bool{}}
		if strings.HasPrefix(list, "^") {
			r.neg, list = true, list[1:]
		}
		for _, e := range strings.Split(list, ",") {
			if !valid(e) {
				return nil, fmt.Errorf("%s=%q: unknown entry %q", name, s, strings.TrimSpace(e))
			}
			r.set[norm(e)] = true
		}
		if op == "" {
			global = r
		} else {
			rules[op] = r
		}
	}
	return func(op Op, v string) bool {
		r := rules[op]
		if r == nil {
			r = global
		}
		if r == nil {
			return true
		}
		return r.set[norm(v)] != r.neg
	}, nil
}

// ll128CopyPs is what an LL128 ring step's copy of step payload bytes, at
// bw GB/s per channel, adds in series with the step's wire bytes. The
// receiving thread block consumes and forwards lines as they land (LL128's
// flag in every 128-byte line), so beyond the step's first tail bytes
// (Transport.LL128TailBytes) the copy overlaps the wire, at the channel's
// share of the links its bytes cross (nics GB/s over the channels,
// ringWireGBps), and adds only what it takes beyond it; the
// first tail bytes are copied in series. On HGX H100 with 8 x 400G and 16
// channels a full server's ring has a 25 GB/s share and the copy 36.7:
// hidden beyond the tail.
func ll128CopyPs(step, tail int64, bw, nics float64, channels int) int64 {
	head := min(step, max(tail, 0))
	ps := float64(head) / bw * 1e3
	if rest := step - head; rest > 0 {
		over := float64(rest) / bw * 1e3
		if nics > 0 {
			share := nics / float64(max(channels, 1))
			over -= float64(wire(rest, LL128)) / share * 1e3
		}
		ps += max(over, 0)
	}
	return int64(ps)
}

// ringWireGBps is the rate (GB/s, over the ring's channels) at which an
// LL128 ring step's bytes move, the slower of the NICs out of a server
// (ringNICsGBps) and, with ranks on several GPUs of a server, the NVLink
// of the GPU with most of the ring's connections in phase: every rank but
// a channel's exit sends each channel's step to a peer in the server, so
// with the exits spread over the ranks a GPU carries channels -
// channels/ppn connections at most. The receiving block forwards each
// step over that NVLink as its lines land, so the copy hides behind
// whichever link is slower: on 2 x 8 A100s with 800G NICs and 22 channels
// the NVLink's 12 GB/s a connection, not the NICs' 36 (without it the
// copy beyond the NICs' share was in series and 800G took 1.16-1.19x
// 400G's time with the same channels); on H100 at 400G with 16 channels
// the NICs' 25 GB/s, not the NVLink's 26.5. 0 when the model has no NIC
// rate (the copy wholly in series).
func ringWireGBps(m ServerModel, ppn, gpusPerServer, channels int) float64 {
	nics := ringNICsGBps(m, ppn, gpusPerServer)
	if nics <= 0 || ppn < 2 || m.NVLinkGBps <= 0 {
		return nics
	}
	channels = max(channels, 1)
	conns := channels - channels/ppn
	return min(nics, m.NVLinkGBps/float64(max(conns, 1))*float64(channels))
}

// ringNICsGBps is the NIC rate (GB/s) a ring with ppn ranks on each of its
// servers sends through out of one server: a channel leaves a server from
// its ranks' own NICs (the GPU's NIC in the flows, as NCCL's search tries
// the NICs nearest a GPU first, search.cc's typeInter relaxed a step at a
// time), so a data-parallel ring of one GPU a server moves all its
// channels through that GPU's NIC, a full server's ring through all of
// them. 0 when the model has no NIC rate.
func ringNICsGBps(m ServerModel, ppn, gpusPerServer int) float64 {
	if m.NICs <= 0 || m.NICGBps <= 0 {
		return 0
	}
	nics := float64(m.NICs)
	if gpusPerServer > 0 && ppn < gpusPerServer {
		nics = max(nics*float64(max(ppn, 1))/float64(gpusPerServer), 1)
	}
	return nics * m.NICGBps
}
