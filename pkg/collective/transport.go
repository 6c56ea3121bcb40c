package collective

import (
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// Transport is NCCL's per-connection transport as the decomposition
// models it. Each channel's connection between two ranks is a FIFO of
// Slots steps (NCCL_STEPS) of StepBytes each; the sender fills a free
// slot, the proxy thread posts it (for the network: one RDMA write, whose
// completion the receiver's proxy must see), and the receiving GPU frees
// the slot only after consuming it (reducing or forwarding). Every step
// therefore costs fixed work on both sides on top of its bytes: the GPU's
// per-step cost on every hop (flag wait, consume, credit back), and on
// network hops the two proxies' per-step costs. With Slots slots the
// credit loop (the step's costs plus a hop latency each way) limits how
// often a connection can start a step, so a step costs at least
// (cost + 2 x latency) / Slots.
//
// The DAG carries these costs on the transfers' delay_ps: chunk k of a
// connection, of wire size b, waits steps(b) x StepCost after its deps
// (after the previous chunk on its connection has left the sender), and
// the connection's first chunk also pays the hop's latency. A chunk's
// steps pay their costs in series because one proxy thread and one GPU
// thread block progress a connection's steps in order; their bytes may
// then share the wire with other connections'. So at mid sizes, where a
// channel carries tens of steps, fill, drain and the per-step costs set
// the time; at the plateau the steps are large and the costs a few
// percent.
type Transport struct {
	// Slots per connection: NCCL_STEPS = 8 (src/include/device.h).
	Slots int
	// Per-connection buffer sizes (NCCL_BUFFSIZE, NCCL_LL_BUFFSIZE,
	// NCCL_LL128_BUFFSIZE; src/init.cc defaults): a step is buffer/Slots.
	// Simple 4 MiB (512 KiB steps); LL 512 KiB (64 KiB steps of which half
	// is payload); LL128 4800 KiB (614400-byte steps, 15/16 payload).
	BuffSimple, BuffLL, BuffLL128 int64
	// GPUStepUs: the GPU's cost per step on every hop, inside a server as
	// across: waiting on the FIFO's tail flag, the thread block's barrier,
	// and posting the head credit back (calibrated: TransportPresets).
	GPUStepUs float64
	// SendProxyUs, RecvProxyUs: the proxy threads' cost per step of a
	// network connection: the sender's proxy sees the tail move and posts
	// the RDMA write, the receiver's proxy polls its completion (and for
	// Simple with GPUDirect, flushes it) before telling the GPU.
	SendProxyUs, RecvProxyUs float64
	// CreditRTTUs: how long a freed slot takes to reach the sender again
	// on a network connection (the receiver's proxy posts the next
	// receive, the sender's proxy sees it): about one fabric round trip;
	// inside a server the credit is a flag in GPU memory, no time beyond
	// the GPU's per-step cost.
	CreditRTTUs float64
	// SliceUs (by protocol: LL, LL128, Simple): a ring's fixed work per
	// slice in series with the slice's bytes. One thread block runs a
	// channel's ring steps in order, and for each slice it waits on the
	// FIFO's tail and head flags, copies (reduces) the slice, fences and
	// posts the tail: the flag round trips and the fence do not overlap
	// its copy, so a connection moves a slice every SliceUs plus its
	// bytes' time, at the plateau as at mid sizes. A Simple ring chunk is
	// NCCL's SlicePerChunk (2) slices of sliceSteps (2) steps (prims'
	// sliceSize, at least 1/32 of a full slice); an LL or LL128 chunk one
	// step. Its slices pipeline across hops, so a chunk's hop latency
	// hides behind its slices' fixed work on the pipeline's fill (the
	// longer of the two is paid).
	SliceUs [3]float64
	// ProxyOpUs: the proxy thread's CPU per network send or receive step,
	// in series over all of a GPU's channels: one progress thread per GPU
	// (proxy.cc progressOps) walks every active op in turn, and each call
	// on an op does one action per sub (post a buffer, one isend or
	// irecv, one test: net.cc sendProxyProgress, recvProxyProgress), so a
	// step costs the thread a call whatever its bytes. It binds where a
	// GPU has a network connection in every channel, NVLS-Tree's, in
	// which every GPU heads every channel's tree: a GPU's tree connection
	// starts a step at most once per its proxy's round (proxyRound; a
	// ring's network connections are spread over the server's GPUs and
	// not paced by it). Fitted at 1.6 us (IB) and 2.4 (EFA) while it was
	// NVLS-Tree's only cost per loop, it made a loop cost the same
	// whatever its chunk, and NVLS-Tree's time fell where NCCL halves its
	// chunk (issue 30); a loop's bytes are now the GPU's work
	// (NVLSTreeLoopUs, NVLSTreeGBps), and the op what is left, 0.3 us.
	ProxyOpUs float64
	// P2POpUs: the same occupancy as an AllToAll's (point-to-point)
	// network connections pay it (a2aPace: a step at most once per round
	// of its proxy's ops): 1.6 us on InfiniBand, 2.4 on EFA, the values
	// ProxyOpUs was fitted at (on NVLS-Tree) and the p5 and NDmv4 AllToAll
	// sweeps were checked with (TestTransportP5AllToAll: the 4 x 8 p5 run
	// at 32 MiB goes from 0.71 to 0.65 of measured at 0.3 us). At 1.6 a
	// step costs a round of tens of ops whatever its bytes, so where NCCL
	// halves its p2p chunk an H100 InfiniBand AllToAll falls as the size
	// grows (2 x 8 14 MiB 406 us, 16 MiB 276); at the proxy's 0.3 it does
	// not (TestAllToAllTimeGrowsWithSize), but its connections then start
	// within 72 us on 128 H100s and the packet backend's DCQCN at
	// SimAI.conf's values collapses on the burst (16 MiB: packets 1.877 ms
	// against fluid's 527 us; 863 / 866 at 1.6). No H100 InfiniBand
	// AllToAll sweep is here to say which: not refitted.
	P2POpUs float64
	// NVLSChunk: NVLS-Tree's chunk per head before enqueue.cc shrinks it
	// (NCCL_NVLS_CHUNKSIZE, with NCCL_NVLSTREE_MAX_CHUNKSIZE at least as
	// large, as aws-ofi-nccl sets both to 512 KiB on AWS); 0: NCCL's
	// defaults, 128 KiB, 64 KiB from 4 servers.
	NVLSChunk int64
	// RingOpUs: the proxy thread's us per network send or receive step of
	// a multi-server LL or LL128 ring. Every ring step moves one step on
	// each channel's connection into and out of every server, and a GPU's
	// one proxy thread posts and polls its share of them (2 x channels /
	// GPUs per server), so a ring step takes at least that many ops: the
	// ring's proxy round (Plan.RingRoundPs), a floor on every hop's fixed
	// work. LL and LL128 steps are a few KiB, so the round, not the bytes,
	// sets their ring's pace; a Simple step's 512 KiB hide it. It is the
	// only pace of their network steps (cctx.ringHop): the step's cost is
	// the latency of its post, which the slots pipeline.
	RingOpUs float64
	// AROpUs: what an op costs more when its message exceeds ARThreshold:
	// with InfiniBand adaptive routing (NCCL_IB_ADAPTIVE_ROUTING, on by
	// default on IB) net_ib.cc posts such a message as an RDMA write and
	// a second, 0-byte write with immediate for the completion, "an extra
	// message ... with every transfer" (NCCL's maintainers, NVIDIA/nccl
	// issue 1050). ARThreshold is NCCL_IB_AR_THRESHOLD (8192 bytes); 0:
	// no adaptive routing (RoCE, EFA).
	AROpUs      float64
	ARThreshold int64
	// NVLSChunkUs and NVLSChannelGBps: a single-server NVLS channel's GPU
	// work per chunk (its thread block's flag waits, multimem loads and
	// stores), NVLSChunkUs plus the chunk's bytes at NVLSChannelGBps,
	// which paces the channel's chunks: the kernel's scatter, reduce and
	// gather warps work on different slots at once, so a chunk's work
	// overlaps the bytes of the chunk before it and bounds the channel's
	// rate rather than adding a gap after its bytes. nvlsEfficiency (0.85,
	// NCCL's) already carries it at NCCL's full 128 KiB chunk, where 16
	// channels' work fits in their NVLink share; below that, where
	// enqueue.cc shrinks the chunk to 64, 32 and 16 KiB by size
	// (nvlsChunk), the channel's chunks go no faster than their work
	// (nvlsWorkPs). As a gap in series with the bytes (before issue 30's
	// packet / fluid check) it depended on whether the 16 channels were in
	// phase: fluid, symmetric, kept them so and paid every gap on the
	// shared port; flowsim-packet's ports let them drift apart and hid the
	// gaps behind each other's bytes, 8% faster at 256-512 MiB.
	NVLSChunkUs     float64
	NVLSChannelGBps float64
	// NVLSTreeLoopUs and NVLSTreeGBps: an NVLS-Tree AllReduce's GPU work
	// per loop and channel on each GPU (0: none), NVLSTreeLoopUs plus the
	// loop's shard (the chunk the GPU heads) at NVLSTreeGBps: the
	// reduce warps' multimem load-reduce of the shard into the tree's
	// send buffer. It paces the GPU's reduced shards, one a loop, and the
	// first loop's waits it before its bytes (nvlsTree).
	NVLSTreeLoopUs, NVLSTreeGBps float64
	// LLBusGBps: LL's bus bandwidth on a ring (GB/s, nccl-tests' busbw
	// convention; 0: none), in series with each LL slice: a thread block
	// polls every 8-byte flag and stores every 16-byte line, so LL's
	// bytes go at what the GPUs' threads, not the links, sustain. NCCL's
	// tuning model caps LL's bus bandwidth so (llMaxBws: 87.7 GB/s on one
	// A100 server, 141 on one H100 server); the flows move LL's bytes at
	// the links' rate, so each slice of b payload bytes on one of a
	// ring's C channels waits b x C / LLBusGBps more (Plan.LLSlicePs),
	// which over a ring's 2(n-1) slices per channel is the collective's
	// bytes at that bus bandwidth.
	LLBusGBps float64
	// LaunchUs: the host's cost to launch one GPU's part of a collective
	// (ncclGroupEnd's per-device enqueue and kernel launch), and
	// GPUsPerProcess how many GPUs one host thread drives (nccl-tests'
	// -g; 1, one process per GPU, by default). One thread launches its
	// GPUs' kernels one after another, and back-to-back collectives (an
	// nccl-tests loop) cannot start faster than it launches them, so a
	// collective takes at least GPUsPerProcess x LaunchUs
	// (LaunchFloorPs): the "CUDA latency overheads of single process
	// jobs" (NCCL's maintainers, NVIDIA/nccl-tests issue 333). With one
	// GPU per process the launch hides behind the GPU's previous work
	// and nothing is added. Fitted on single-process (-g 8) sweeps: flat
	// at 33 us on 8 H100s (vp-1x8h100_*, 4.1 us a launch; without the
	// floor 0.82-0.88 of it) and 32 us on 8 A100s (oci-1x8a100_*, 4.0 us).
	LaunchUs       float64
	GPUsPerProcess int
	// LL128TailBytes: how much of a multi-server LL128 ring step its
	// thread block copies in series with the step's wire bytes (at NCCL's
	// per-channel LL128 rate, in series with the ring's proxy round);
	// beyond it the copy overlaps the wire (ll128CopyPs), since LL128's
	// flag in every 128-byte line lets the receiver consume and forward
	// lines as they land. 128 KiB by default, the largest LL128 ring step
	// of the Voltage Park AllGather (64 MiB on 32 ranks, 16 channels)
	// that calibrated h100-ib with the copy wholly in series, so that
	// calibration stands. Over the AWS p5 AllReduce's 256-512 KiB Ring
	// LL128 steps (held out) the time per step grows at the wire's rate
	// (about 21 GB/s a channel), not at the copy and the wire's in series
	// (14 GB/s): with the copy wholly in series, the LL128 ring's plateau
	// there was 200 GB/s busbw against the measured 275. On the DGX A100
	// 2 x 8 ring (NCCL 2.11.4) a step's added bytes went at 10.3 GB/s a
	// channel, near the NICs' 12 (a100 sets 0), where NCCL 2.7.5's 4 x 8
	// LL128 ring levels off at 7.5, the copy's in series (held out).
	LL128TailBytes int64
	// Tuner is the selection plugin NCCL loads (NCCL_TUNER_PLUGIN): ""
	// or "nccl", none, NCCL's model chooses; "aws-p5", aws-ofi-nccl's
	// tuner on p5/p5e, whose regions force the algorithm and protocol of
	// an AllReduce at 8 ranks a server on 3 servers or more
	// (nccl.Tuner.PluginChoice), as on the AWS p5 runs.
	Tuner string
	// AMDHost: the servers' CPUs are AMD x86 (AWS p5.48xlarge: AMD EPYC
	// 7R13), where NCCL's model doubles its network overhead
	// (getNetOverhead: 2 us a step of a multi-server ring, 6 for Simple,
	// against Intel's 1 and 3) and takes LL's multi-server bandwidth cap
	// from its AMD row (tuning.cc); it moves the ring's LL128-to-Simple
	// switch to larger sizes. Under the transport's costs only the choice
	// weighs the overhead: a ring's NVLink hops keep NVLink's latency, as
	// the step costs and the ring's proxy round price the proxy's posts
	// (Tuner.HopLatencyAt). false: Intel, NCCL's model as the topology
	// gives it.
	AMDHost bool
	// NetLatencyUs: the latency the network plugin reports to NCCL, which
	// NCCL's model adds to every step across servers, twice for Simple,
	// when it chooses (nccl.Tuner.SelectionTime): aws-ofi-nccl reports 75
	// us on p4d, p4de and p5/p5e (src/platform-aws.cpp, v1.16.3); NCCL's
	// IB plugin 0. It moves multi-server rings from LL128 to Simple at
	// larger sizes; no transfer waits on it. h100-efa sets 75: NCCL's
	// model then keeps p5's AllGather ring on LL128 to 8 MiB a rank on
	// 16, 32 and 64 ranks and takes Simple from 16 MiB a rank, where the
	// p5 runs' busbw dips (Simple's first size), and runs the 2-server
	// AllReduce as Tree LL128 to 16 MiB and Ring LL128 at 32 MiB before
	// NVLS-Tree, as the 2 x 8 p5 sweep's shape says (its time per added
	// byte changes between 32 and 64 MiB), where the tree step (TreeOpUs,
	// TreeGBps) prices the tree.
	NetLatencyUs float64
	// TreeOpUs, TreeGBps: a tree LL128 AllReduce's step on every GPU
	// (0: not modelled; the tree's network steps are then paced by the
	// step cost). NCCL runs it with runTreeSplit (src/device/all_reduce.h,
	// RunWorkColl for NCCL_ALGO_TREE, NCCL_PROTO_LL128): 70% of a
	// channel's threads reduce up the tree (each step reads its children's
	// lines and its own and sends one), 30% broadcast down (one input), and
	// the root's block does both with all its threads. So a GPU sends a
	// step no sooner than TreeOpUs of fixed work plus its inputs' wire
	// bytes at its share of TreeGBps, a thread block's LL128 rate (NCCL's
	// per-channel LL128 cap on Hopper, 36.7 GB/s: tuning.cc), while the
	// step's network cost (proxies, credits) is its latency, which the
	// slots pipeline, paid in full once on the pipeline's fill.
	TreeOpUs, TreeGBps float64
	// TreeLLGBps: a thread block's LL rate in a tree LL AllReduce's step
	// (0: not modelled), which NCCL runs with the same runTreeSplit as
	// LL128 (TreeGBps; no fixed work: the fit on OCI's A100 sweep took
	// none). Under it an LL tree's network step leaves whole, as an LL128
	// tree's does: the send proxy posts a step once the GPU has written
	// all of it (net.cc, the step's tail), so a connection's first piece
	// pays the step's whole cost rather than its share (cctx.treeStep).
	TreeLLGBps float64
	// TreeLLShare: under TreeLLGBps a connection's first piece pays its
	// share of the step cost (as without the rate: cctx.firstHop's
	// stepDiv), not the whole step (false, a100's fit). A fit, not NCCL's
	// behaviour (its send proxy posts an LL step whole on any network,
	// net.cc): h100-ib's tree LL steps at 8-64 B take 1.57-1.62 of Voltage
	// Park's 4 x 8 sweep with the whole step, 0.98-1.03 with its share,
	// at any tree-ll-bw.
	TreeLLShare bool
	// TreeLL128Whole: under TreeGBps a tree LL128 network step leaves only
	// once its sender's thread block has written all of it, so a
	// connection's first piece across servers also waits that step's work
	// (TreeOpUs plus its inputs at the block's share of TreeGBps) before
	// its bytes, and a larger step fills the tree later: NCCL's send proxy
	// posts an LL128 step when the GPU has moved the FIFO's tail past it,
	// which prims_ll128.h's postSend does after the whole step (NCCL
	// 2.28.7 src/transport/net.cc sendProxyProgress l. 1276: the step is
	// ready once the tail has passed it, and without GPUDirect every
	// line's flag set as well). false (tree-ll128-send=lines): the first piece pays
	// the hop's latency and step cost only, as a100's tree steps were
	// fitted (with it OCI's 2 x 8 tree LL128 sizes, 256 KiB-512 MiB, go
	// from 0.93-1.07 to 1.08-1.18 of measured: a refit not done).
	TreeLL128Whole bool
	// P2PChunk: a network point-to-point connection's step
	// (NCCL_P2P_NET_CHUNKSIZE, 128 KiB by default; aws-ofi-nccl sets 512
	// KiB on AWS), the step AllToAll's grouped sends and receives move in
	// (P2PPlan), at most a Simple buffer's slot.
	P2PChunk int64
	// MaxRecvs: how many receives the network plugin takes in one irecv
	// (ncclNetProperties maxRecvs). NCCL's receive proxy posts the steps
	// of an op's subs that share a network receive comm as one irecv, up
	// to maxRecvs (NCCL 2.24.3 src/transport/net.cc recvProxyProgress l.
	// 1232-1270 groups them, l. 1335 posts one irecv), and with PXN the
	// receives from one remote server's ranks share one: the comm is kept
	// per NIC, remote proxy rank and channel (net.cc l. 863-872, under
	// NCCL_NET_SHARED_COMMS=1, its default, when maxRecvs > 1). InfiniBand
	// 8 (net_ib.cc l. 752, 773: NCCL_NET_IB_MAX_RECVS); aws-ofi-nccl 1
	// through v1.19 (include/nccl_ofi.h NCCL_OFI_MAX_RECVS; v1.16.3 l. 49,
	// p5's runs), 8 from v1.20.0. It sets how many ops a proxy's round
	// over an AllToAll's receives takes (a2aProxies). Default 1, not
	// InfiniBand's 8. With 8, collective granularity's price of a paced
	// AllToAll under ecmp missed the flows by 12% while it took a draw's
	// class mean (SimAI's MoE layer's EP on the 1:1 k=16 fat-tree: 9.538
	// against 10.777 ms); with its slowest connection (pkg/analytical
	// pieceDraw.tailCost) it is 1.04 (TestGranularitiesAgreeOnFabrics).
	// That pricing errs high, 1.04-1.09 on the fat-trees with either
	// value (2:1 with 8: 1.089), as one draw's worst connection overstates
	// the slowest's tail; find why before making 8 the default. What else
	// holds 8 back: every InfiniBand AllToAll figure would move, and
	// TestPacedAllToAllDCQCNRecovery's gap (make test-long) fell below its
	// tripwire with 8 (report a2apace).
	MaxRecvs int
	// P2PDedicated: AllToAll's network connections get buffers of their
	// own (NCCL_NET_SHARED_BUFFERS=0), not NCCL's default shared ones
	// (-2: shared for p2p, net.cc l. 188 and 227), so each keeps all its
	// slots and no channel's connections split 16 (Transport.p2pPacePs).
	// Key net-shared-buffers: 1 (false, the default in every NCCL from
	// 2.18 to 2.30 and every preset) or 0.
	P2PDedicated bool
	// TreeDepthChunk: a tree Simple AllReduce's chunk follows NCCL 2.8-2.19
	// (enqueue.cc computeColl, v2.17.1 l. 1303-1311): the Simple step
	// (buffsize/NCCL_STEPS), halved to 128 KiB while a channel would get
	// fewer than 8 x depth chunks, to 64 KiB while fewer than 4 x depth and
	// to 32 KiB while fewer than depth, with the tree's depth nRanks/nNodes
	// - 1 + log2(nNodes). NCCL 2.20 dropped the rule (one step a chunk, as
	// by default): on 2 servers of 8 GPUs it cuts a 16 MiB AllReduce on 8
	// channels into 64 KiB chunks, 32 network steps a channel, where a
	// step's per-step costs (EFA's) dominate.
	TreeDepthChunk bool
	// ChannelCells: a ring or tree collective takes its channels as NCCL
	// 2.23-2.25 spread a launch's work over them (enqueue.cc
	// scheduleCollTasksToPlan, MinTrafficPerChannel = 16 KiB of traffic,
	// an AllReduce's byte counting twice): in cells of that traffic, at
	// least one cell a channel (channelCells), so a collective whose
	// thread threshold gives channels of less (a Tree LL AllReduce's 4
	// KiB a channel: nc x 512 threads x 8 bytes) runs on fewer channels
	// of 8 KiB. On Voltage Park's 4 x 8 H100 (NCCL 2.24.3) 8-128 KiB run
	// on 1, 2, 4, 8 and 16 channels of 8 KiB where the threshold gives 2,
	// 4, 8 and 16 of 4 KiB: the measured rise from 45 us at 4 KiB to 53
	// at 8 KiB is one channel's bytes doubling, not more channels. false:
	// NCCL 2.22 and earlier's even split over the threshold's channels
	// (2.22's 512-byte minimum splits them evenly too; 2.19-2.21 spread a
	// lone collective evenly, enqueue.cc addCBDCollToPlan). NCCL 2.26 and
	// later count an LL byte 4 times there (cells of 2 KiB of an LL
	// AllReduce: more channels than the threshold gives, not fewer): not
	// modelled.
	ChannelCells bool
	// TreeGraphNCCL: a 2-server tree takes the graph NCCL's search gives
	// it, its intra-server bandwidth raised up to twice the inter-server
	// one (nccl.Tuner.RaiseTreeIntra), which NCCL's model weighs when it
	// chooses and collective granularity's closed form times the tree
	// with. false: the tree uses the ring's graph, as before.
	TreeGraphNCCL bool
	// TreeLatLegacy: NCCL's choice weighs a tree Simple AllReduce's
	// latency as NCCL 2.22 and earlier do (nccl.Tuner.TreeLatLegacy: 28
	// us a hop, 448 us on 2 x 8 GPUs, where 2.23 and later, the tuner's
	// table, give 92.4), so that a 2-server Tree LL128 keeps the sizes to
	// 512 MiB, as NCCL 2.19 did on OCI's two-port server; no transfer
	// waits on it. false: the tuner's NCCL 2.23-2.27 table.
	TreeLatLegacy bool
}

// LaunchFloorPs is the shortest a collective takes when one host thread
// launches it on GPUsPerProcess GPUs (ps): GPUsPerProcess x LaunchUs, 0
// with one GPU per process.
func (t Transport) LaunchFloorPs() int64 {
	if t.GPUsPerProcess <= 1 || t.LaunchUs <= 0 {
		return 0
	}
	return int64(t.GPUsPerProcess) * usToPs(t.LaunchUs)
}

// launchFloorPs is the options' launch floor: none under SimAI replay (its
// send latency is all the software latency) or without launch latency.
func (o Options) launchFloorPs() int64 {
	if !o.LaunchLatency || o.SendLatPs > 0 {
		return 0
	}
	return o.transport().LaunchFloorPs()
}

// DefaultTransport is NCCL's slots and buffers with no per-step costs:
// transfers pay NCCL's tuning-model latencies alone (preset none).
// simccl-decompose starts from the calibrated preset of the fabric's GPU
// generation instead (NewTransport, PresetFor): with h100-ib, fluid's
// 32-GPU H100 AllGather and AllReduce are within 20% of the Voltage Park
// sweeps at every size from 1 MiB to 4 GiB (tests/transport_test.go
// TestTransportVPBands), with h100-efa the AWS p5 2- and 4-server
// AllReduce's NVLS-Tree sizes (TestTransportP5Band).
func DefaultTransport() Transport {
	return Transport{Slots: 8, BuffSimple: 4 << 20, BuffLL: 512 << 10, BuffLL128: 4915200, GPUsPerProcess: 1, LL128TailBytes: 128 << 10, P2PChunk: p2pNetChunk, MaxRecvs: 1}
}

// TransportPresets are named per-step costs (--transport preset=NAME).
// h100-ib is calibrated for HGX H100 with 8x400G InfiniBand on the Voltage
// Park 4 x 8 H100 sweeps (NCCL 2.24.3, examples/reference/vp-4x8h100-ib_*):
// the fill and pace (cctx.firstHop; 0.5 us GPU, 4 us per proxy side, 20
// us credit round trip) on the AllReduce sweep, of the order NCCL's own
// tuning model gives a step (hwLat NVLink Simple 0.6 us, network 2-14
// us); the Simple ring slices' serial work (SliceUs, 8 us) on the
// AllGather sweep from 128 MiB, whose Simple ring step of two slices
// costs 2 x (6.4 us + slice / 23 GB/s) there; its LL128 ring (1-64 MiB)
// by the ring's proxy round (RingOpUs 0.5 us per op, AROpUs 0.7 us more
// per op above InfiniBand's adaptive-routing threshold, 8 KiB: the sweep
// is flat at 110 us to 2 MiB, a 16-channel ring's 4 KiB steps, and 193 us
// at 4 MiB, 8 KiB steps) plus the step's bytes at NCCL's per-channel
// LL128 rate (36.7 GB/s). The AllReduce sweep's ring sizes (256 MiB-4
// GiB; 512 MiB up when fitted) are held out for the slice costs. An
// NVLS-Tree loop's GPU work (NVLSTreeGBps 1.3 GB/s a channel on the shard
// a GPU heads, no fixed part) is fitted on the AllReduce sweep's
// NVLS-Tree sizes (2-128 MiB; with NCCL's ring graph, 8 channels at 48
// GB/s, 256 MiB runs as a Simple ring): one loop of 32 and of 64 KiB
// shards at 4 and 8 MiB, 160.5 and 230.2 us measured, the later loops of
// 64 KiB about 51 us each (16-64 MiB), 0.95-1.07 of measured at 2-128
// MiB; the proxy's op (ProxyOpUs 0.3 us, NVLS-Tree's proxy round) what is
// left (1.6 us when it alone priced a loop, whose time then fell at 8
// MiB, where the shard doubles; AllToAll keeps 1.6, P2POpUs); its
// Tree LL sizes (8 B-128 KiB) by NCCL 2.23's spread over channels
// (channel-split=cells) and a tree LL step on the GPUs at 3 GB/s a
// thread block whose first piece pays its share of the step cost
// (tree-ll-bw, tree-ll-first=share: 0.91-1.03 of measured, 0.65-0.73 at
// 8-128 KiB without them).
//
// h100-efa is HGX H100 over EFA (AWS p5.48xlarge, 32 EFA devices per
// server), fitted on the 2 x 8 p5 AllReduce (examples/reference/
// aws-p5-2x8h100-efa_allreduce.csv): 18 us per proxy side, where IB's
// are 4 (the sweep's 1-8 MiB times, 123-205 us, need about twice IB's
// fill), and an NVLS-Tree loop's GPU work of 15 us plus its shard at 2
// GB/s a channel (NVLSTreeLoopUs, NVLSTreeGBps), fitted on its NVLS-Tree
// sizes (64 MiB-4 GiB): 4, 8 and 16 loops of 128 KiB shards at 64-256
// MiB, about 70 us a loop measured, and 256 KiB shards from 512 MiB,
// about 128 us a loop, whose rate, 16 channels x 2 GB/s a GPU, is the
// plateau's (algbw 260 GB/s on 2 x 8); the proxy op IB's 0.3 us (2.4
// when it alone priced a loop, which then cost 77 us whatever its
// chunk and the time fell at 64 MiB; AllToAll keeps 2.4, P2POpUs);
// with the buffers and NVLS chunk aws-ofi-nccl sets on AWS
// (NCCL_BUFFSIZE 8 MiB, NCCL_NVLS_CHUNKSIZE and
// NCCL_NVLSTREE_MAX_CHUNKSIZE 512 KiB: its release notes, and the 4 x 8
// p5 run's environment). The 4 x 8 p5 AllReduce (NCCL 2.28.7,
// aws-p5-4x8h100-efa_allreduce.csv) is held out. Its LL and LL128 ring
// slice costs are IB's (not fitted on EFA), its Simple ring slice's is
// fitted on the 16 x 8 p5 AllReduce's Ring Simple size (8 GiB: 10.5 us
// a slice); its ring round's op is its proxy op, with no
// AR threshold, and an LL128 step's copy wholly behind the wire
// (ll128-tail 0). It chooses with the 75 us aws-ofi-nccl reports to NCCL
// (net-latency), which runs that sweep's 256 KiB-16 MiB as Tree LL128,
// whose step on the GPUs (tree-op 7 us, fitted on those sizes, plus its
// inputs' bytes at tree-bw 36.7 GB/s) brings them within 6% (0.78-0.87
// at 256-512 KiB, 0.48-0.67 before), and its Tree LL sizes (8 B-128 KiB) take
// h100-ib's tree LL rate with the step leaving whole (held out: 0.93-1.06
// at 8 B-8 KiB, 0.57-0.82 at 16-128 KiB under that run's even split;
// 0.32-0.62 before). Both set the host's launch to 4.1 us a
// GPU (LaunchUs, which only a process driving several GPUs pays: the VP
// single-server sweep, -g 8, is flat at 33 us).
//
// a100 is one 8 x A100 SXM4 server (NVSwitch), fitted on the OCI
// BM.GPU4.8 AllReduce (examples/reference/oci-1x8a100_allreduce_*, one
// process driving 8 GPUs, 64 B-8 GiB): LL's bus bandwidth 62 GB/s in
// series with each LL slice (LLBusGBps; the sweep climbs from 35 to 112
// us between 64 KiB and 2 MiB, 0.38-0.45 of the default there) and 1.8
// us of fixed work per LL slice, 6 us per LL128 slice (4-16 MiB), 3.5 us
// per Simple slice (the plateau 3.7% above the default's, the measured
// one 2%), launch 4.0 us a GPU (flat 32 us to 32 KiB, which the LL costs
// alone give as well: this sweep does not separate the two). Across
// servers its per-step network costs are h100-ib's, with InfiniBand's
// adaptive routing, but for an LL128 ring step's copy, which overlaps
// its wire bytes (ll128-tail 0, fitted on NVIDIA DeepOps' 2 x 8 DGX A100
// ring sweep over HDR InfiniBand, NCCL 2.11.4; its 4 x 8 default sweep,
// NCCL 2.7.5, held out: tests/transport_a100ib_test.go), its host an AMD
// EPYC, and its tree steps fitted on
// the 2 x 8 OCI BM.GPU4.8 AllReduce over RoCE (NCCL 2.19, examples/
// reference/oci-2x8a100-roce_allreduce_nccl-2.19.csv; presetA100) on
// OCI's own server as NCCL 2.19 saw it (16 ports of 100G, two a GPU:
// examples/servers/oci-bm-gpu4.8.xml, tree-graph=nccl; 32 thread blocks):
// a tree LL128 step on the GPUs at 10 GB/s a block (NCCL's tree LL128
// rate on Ampere, 20 GB/s a graph channel, which NCCL runs as two
// blocks) plus 2 us, and LL's at 4 GB/s, under which a network step
// leaves whole, so its first piece pays the whole step cost. h100-ib's
// trees, whose pieces each paid only their share of it, took 0.51-0.73
// of that sweep's 256 B-128 KiB. Held out: Azure NDmv4 over HDR
// InfiniBand (NCCL 2.17.1; 1.19, 0.96, 0.98 at 1 KiB, 1 and 4 GiB).
//
// a100-roce is a100 over RoCE: no adaptive routing (NCCL enables it only
// on an InfiniBand link layer), so no ring op pays its extra completion.
// Fitted with a100's tree steps on the OCI sweep, with NCCL 2.19's tree
// Simple latency in its choice (tree-lat=legacy: the Tree LL128 to 512
// MiB): all 31 sizes within 20% (0.87-1.13 at 8 B-512 MiB, 0.85-0.93 at
// 1-8 GiB; tests/transport_a100efa_test.go TestTransportOCIA100RoCE).
// OCI's NCCL 2.25.1 (1-4 GiB: 0.98-0.99) and 2.29.3 runs are held out on
// topogen's one NIC a GPU, as NCCL 2.24's NIC fusion merges each card's
// two ports into one.
//
// a100-efa is A100 servers over EFA (AWS p4d/p4de, 4 x 100G EFA a
// server): a100's NVLink costs, h100-efa's EFA step costs (18 us per
// proxy side, chosen among 14, 18 and 22 on the calibration sweep),
// NCCL 2.8-2.19's tree Simple chunk (TreeDepthChunk) and NCCL's 2-server
// tree graph (TreeGraphNCCL). Calibrated on the
// AWS ParallelCluster workshop's 2 x p4de AllReduce (NCCL 2.17.1,
// NCCL_PROTO=simple, examples/reference/aws-p4de-2x8a100-efa_allreduce_
// simple_nccl-2.17.csv); awsome-distributed-training's 2 x p4de sweep is
// held out (tests/transport_a100efa_test.go, which sets 8 channels and
// the Simple protocol as the runs had them and lists the sizes outside
// 20%). none is
// DefaultTransport's: no per-step cost.
var TransportPresets = map[string]func(*Transport){
	"h100-ib": presetH100IB,
	// h100-ib without adaptive routing (as a100-roce is a100 without it):
	// reasoned from NCCL's source, not fitted (no H100 RoCE sweep here).
	"h100-roce": func(t *Transport) { presetH100IB(t); noAdaptiveRouting(t) },
	"h100-efa": func(t *Transport) {
		t.GPUStepUs, t.SendProxyUs, t.RecvProxyUs, t.CreditRTTUs = 0.5, 18.0, 18.0, 20.0
		// A Simple ring slice's fixed work, 10.5 us, is fitted on the
		// one p5 Simple ring outside the held-out sweeps: the 16 x 8
		// AllReduce at 8 GiB (aws-p5-16x8h100-efa_allreduce.csv, the
		// same NCCL 2.28.7 runs; aws-ofi-nccl's p5 regions run Ring
		// Simple there from about 6 GiB on 128 ranks, and its busbw,
		// 356 GB/s, is the 4 x 8 and 8 x 8 Ring Simple plateau's): 254
		// ring steps of NCCL's 4 MiB chunk (8 MiB buffers), two 2 MiB
		// slices each, 1.000 of measured (IB's 8 us: 0.973; each us
		// about 1%). With IB's 8 us the held-out AllGather's first
		// Simple size (16 MiB a rank) was 0.77 of measured.
		t.SliceUs = [3]float64{LL: 1.5, LL128: 2.0, Simple: 10.5}
		// IB's proxy op and an NVLS-Tree loop's GPU work fitted on the 2 x
		// 8 sweep's NVLS-Tree sizes (TransportPresets); AllToAll's op as
		// its sweeps' checks were written (P2POpUs).
		t.ProxyOpUs, t.P2POpUs = 0.3, 2.4
		t.NVLSTreeLoopUs, t.NVLSTreeGBps = 15, 2.0
		t.BuffSimple, t.NVLSChunk = 8<<20, 512<<10
		// A ring's network step is the same proxy op as NVLS-Tree's
		// (post, then poll to completion), and no EFA sweep outside the
		// held-out ones runs an LL or LL128 ring to fit it on, so the
		// ring's op is the proxy op as fitted on this sweep's NVLS-Tree
		// sizes before their loops' GPU work was split from it (2.4 us,
		// where IB's ring op is 0.5, 1.2 above its AR threshold), which
		// the held-out p5 LL128 rings were checked with. That op was fitted
		// with no LL128 copy in series with it, so the step's copy
		// overlaps the wire from its first byte (ll128-tail 0: LL128's
		// flag in every 128-byte line lets the receiving block forward
		// lines as they land: NCCL 2.28.7 src/device/prims_ll128.h polls
		// each line's flag, lines 185-240), where h100-ib keeps the
		// first 128 KiB in series as its ring op was fitted with them.
		t.RingOpUs, t.AROpUs, t.ARThreshold = 2.4, 0, 0
		t.LL128TailBytes = 0
		t.NVLSChunkUs, t.NVLSChannelGBps = 0.2, 20
		t.LLBusGBps, t.LaunchUs = 0, 4.1
		t.Tuner = "aws-p5"
		t.AMDHost = true
		// The 75 us aws-ofi-nccl reports to NCCL as network latency
		// (src/platform-aws.cpp, v1.16.3), which NCCL's model weighs
		// when it chooses, and a tree LL128 step's work on the GPUs
		// (TreeOpUs, TreeGBps), each network step leaving whole after it
		// (TreeLL128Whole): 4 us fixed plus its inputs' bytes at 30 GB/s
		// a block, both fitted on the 2 x 8 sweep's Tree LL128 sizes (1-16
		// MiB under that latency: 1.02 1.00 0.99 1.00 1.01 of measured).
		// Those sizes tell the two apart: 1 to 2 MiB doubles a channel's
		// steps at the same 18000 bytes (enqueue.cc calcCollChunking), 2,
		// 4 and 8 MiB double the step at 8 steps, 16 MiB doubles the steps
		// at 72000 bytes; measured, a step costs about 3-4 us plus its
		// bytes at 7-8 GB/s a channel (the down role's 0.3 of a block).
		// With 7 us and NCCL's per-channel LL128 rate (36.7 GB/s), the fit
		// before, the step's fixed work outweighed its bytes, and where
		// NCCL doubles its chunk and a channel runs fewer, larger steps (3
		// to 4 MiB, 6 to 7 MiB on 2 x 8) the time fell 7-8% as the size
		// grew (issue 30; TestTreeLL128Monotone).
		t.NetLatencyUs = 75
		t.TreeOpUs, t.TreeGBps, t.TreeLL128Whole = 4, 30, true
		// A tree LL step on the GPUs at h100-ib's rate (the same H100
		// thread block; not fitted here), its network step leaving whole
		// as NCCL's send proxy posts an LL step only once every line's
		// flags are set (NCCL 2.24.3 src/transport/net.cc
		// sendProxyProgress), and NCCL 2.23-2.25's spread over channels
		// (2.26 and later, as the 2.28.7 runs above, count an LL byte 4
		// times there: not modelled): held out, the 2 x 8 sweep's Tree
		// LL sizes (8 B-128 KiB; its NCCL 2.20.3 split evenly,
		// channel-split=even) are 0.57-1.06 of measured (0.93-1.06 to 8
		// KiB), 0.32-0.62 without the step.
		t.TreeLLGBps = 3
		t.ChannelCells = true
		// aws-ofi-nccl's platform table (src/platform-aws.cpp) sets
		// NCCL_P2P_NET_CHUNKSIZE=524288, with NCCL_BUFFSIZE=8 MiB, on p4d,
		// p4de and p5/p5e: AllToAll's network steps are 512 KiB.
		t.P2PChunk = 512 << 10
	},
	"a100": presetA100,
	// Over OCI's RoCE the 16-64 MiB LL128 rings take 1.19, 1.28, 1.11 of
	// measured without adaptive routing's message, 1.40, 1.46, 1.22 with.
	"a100-roce": func(t *Transport) { presetA100(t); noAdaptiveRouting(t) },
	"a100-efa": func(t *Transport) {
		// An A100 server's NVLink costs are a100's; its network is EFA,
		// whose per-step costs are h100-efa's (18 us per proxy side, 2.4
		// us of proxy op): on p4de (A100, 4 x 100G EFA) the same 18 us
		// brings the 8 B-8 KiB tree steps within 10% of both p4de sweeps,
		// 14 and 22 us 10% under and over.
		t.GPUStepUs, t.SendProxyUs, t.RecvProxyUs, t.CreditRTTUs = 0.5, 18.0, 18.0, 20.0
		t.SliceUs = [3]float64{LL: 1.8, LL128: 6, Simple: 3.5}
		t.ProxyOpUs, t.P2POpUs = 2.4, 2.4
		// aws-ofi-nccl 1.5-1.7 set no NCCL_BUFFSIZE on p4d/p4de (NCCL's 4
		// MiB; 1.16.3 sets 8 MiB), and the runs' NCCL (2.17.1) cut a tree
		// Simple AllReduce's chunk by the tree's depth (tree-chunk=depth).
		t.BuffSimple, t.NVLSChunk = 4<<20, 0
		t.RingOpUs, t.AROpUs, t.ARThreshold = t.ProxyOpUs, 0, 0
		t.LL128TailBytes = 0
		t.NVLSChunkUs, t.NVLSChannelGBps = 0, 0
		t.LLBusGBps, t.LaunchUs = 62, 4.0
		t.TreeDepthChunk = true
		// NCCL's 2-server tree graph, which makes its model take the tree
		// at every size there, as both p4de runs did (busbw 78 GB/s, above
		// what a ring moves through 50 GB/s of NICs).
		t.TreeGraphNCCL = true
		// aws-ofi-nccl reports 75 us of network latency on p4d and p4de
		// (src/platform-aws.c, from 2023-05-31: v1.7.0-aws), which NCCL's
		// model weighs when it chooses; the 1.5.0aws of both p4de sweeps
		// reported 150 (nccl_ofi_net.c). Neither moves a forced tree.
		t.NetLatencyUs = 75
	},
	"none": func(t *Transport) {
		t.GPUStepUs, t.SendProxyUs, t.RecvProxyUs, t.CreditRTTUs = 0, 0, 0, 0
		t.SliceUs = [3]float64{}
		t.ProxyOpUs, t.P2POpUs, t.BuffSimple, t.NVLSChunk = 0, 0, 4<<20, 0
		t.RingOpUs, t.AROpUs, t.ARThreshold = 0, 0, 0
		t.NVLSChunkUs, t.NVLSChannelGBps = 0, 0
		t.LLBusGBps, t.LaunchUs = 0, 0
	},
}

// presetH100IB is the h100-ib preset (TransportPresets).
func presetH100IB(t *Transport) {
	t.GPUStepUs, t.SendProxyUs, t.RecvProxyUs, t.CreditRTTUs = 0.5, 4.0, 4.0, 20.0
	t.SliceUs = [3]float64{LL: 1.5, LL128: 2.0, Simple: 8}
	// The proxy's op and an NVLS-Tree loop's GPU work (TransportPresets:
	// fitted on Voltage Park's NVLS-Tree sizes); AllToAll's op as its
	// sweeps' checks were written (P2POpUs).
	t.ProxyOpUs, t.P2POpUs = 0.3, 1.6
	t.NVLSTreeGBps = 1.3
	t.BuffSimple, t.NVLSChunk = 4<<20, 0
	t.RingOpUs, t.AROpUs, t.ARThreshold = 0.5, 0.7, 8192
	t.NVLSChunkUs, t.NVLSChannelGBps = 0.2, 20
	t.LLBusGBps, t.LaunchUs = 0, 4.1
	// A collective takes its channels as NCCL 2.23-2.25 spread it
	// (channel-split=cells; Voltage Park ran 2.24.3), and a tree LL
	// step's work on the GPUs (runTreeSplit, as a100's) runs at 3 GB/s
	// a thread block: fitted on Voltage Park's 4 x 8 AllReduce, whose 8
	// B-128 KiB are Tree LL, on the one change of a channel's bytes alone
	// (4 to 8 KiB, both on one channel under the cells: 8.2 us measured,
	// 8.1 modelled; 2.5 and 3.5 GB/s give 10.0 and 7.0). 8 B-1 MiB are
	// then 0.91-1.03 of measured (0.65-0.73 at 8-128 KiB without the
	// step, 0.84-1.12 with the even split at 2 GB/s, the earlier fit).
	// Its first piece pays its share of the step cost (a fit: NCCL's
	// send proxy posts an LL step whole on InfiniBand too, as h100-efa's
	// comment says; with the whole step 8 B-2 KiB are 1.53-1.62 of
	// measured at any rate, and why h100-ib's network step overprices a
	// tiny tree step is not known).
	t.TreeLLGBps, t.TreeLLShare = 3, true
	t.ChannelCells = true
}

// noAdaptiveRouting makes an InfiniBand preset a RoCE one: NCCL turns
// adaptive routing on by default only where the port's link layer is
// InfiniBand (net_ib.cc: ar = link_layer == IBV_LINK_LAYER_INFINIBAND),
// so a RoCE step pays no extra completion message.
func noAdaptiveRouting(t *Transport) { t.AROpUs, t.ARThreshold = 0, 0 }

// presetA100 is the a100 preset (TransportPresets): one A100 server's
// NVLink costs, fitted on the OCI BM.GPU4.8 single-server sweep, and
// across servers h100-ib's per-step network costs with the tree steps
// fitted on the 2 x 8 OCI sweep (NCCL 2.19) and the host CPU the A100
// platforms have.
func presetA100(t *Transport) {
	// The proxies' 4 us a side and the 20 us credit round trip are
	// h100-ib's, and the OCI 2 x 8 sweep on its real server (all trees,
	// 8 B-512 MiB under a100-roce's tree steps) picks the same: over 2-6
	// us a side and 10-40 us its worst size is least at 4 us and 10-20 us
	// (1.155, the 8 B tree LL against the 128 KiB one; 1.17-1.26
	// elsewhere). It has no ring across servers to fit ring-op and ar-op.
	t.GPUStepUs, t.SendProxyUs, t.RecvProxyUs, t.CreditRTTUs = 0.5, 4.0, 4.0, 20.0
	t.SliceUs = [3]float64{LL: 1.8, LL128: 6, Simple: 3.5}
	t.ProxyOpUs, t.P2POpUs, t.BuffSimple, t.NVLSChunk = 1.6, 1.6, 4<<20, 0
	t.RingOpUs, t.AROpUs, t.ARThreshold = 0.5, 0.7, 8192
	// A multi-server LL128 ring step's copy overlaps its wire bytes from
	// the first line (ll128-tail 0, as h100-efa): the receiving block
	// polls each 128-byte line's flag and forwards it as it lands (NCCL
	// 2.11.4 src/collectives/device/prims_ll128.h recvReduceSendCopy), so
	// the step is written as its last line arrives. Fitted on the DGX A100
	// 2 x 8 InfiniBand ring sweep (examples/reference/dgx-a100-2x8-ib_
	// allreduce_ring_nccl-2.11.csv, NCCL_ALGO=RING): from 32 to 64 MiB a
	// step's added 128 KiB took 12.7 us a channel (10.3 GB/s), near the
	// 12 GB/s a channel's share of 8 x 200G carries alone; its 8-64 MiB
	// were 1.27, 1.31, 1.24, 1.09 of measured with h100-ib's 128 KiB in
	// series, 1.21, 1.11, 0.94, 0.92 without.
	t.LL128TailBytes = 0
	t.NVLSChunkUs, t.NVLSChannelGBps = 0, 0
	t.LLBusGBps, t.LaunchUs = 62, 4.0
	// The A100 platforms measured here run AMD EPYC hosts (DGX A100 and
	// OCI BM.GPU4.8 EPYC 7742 and 7542, Azure NDm A100 v4 EPYC 7V12),
	// whose row of NCCL's model (network overhead, LL's multi-server cap)
	// chooses. Intel-hosted A100s (AWS p4d/p4de: a100-efa; GCP A2, many
	// OEM boards) take host-cpu=intel after the preset.
	t.AMDHost = true
	// A tree step's work on the GPUs (runTreeSplit): LL128 at half NCCL's
	// per-channel tree LL128 rate on Ampere (perChMaxTreeLL128Bws, 20
	// GB/s), plus 2 us of fixed work, and LL at 4 GB/s a thread block,
	// fitted on the OCI 2 x 8 sweep's tree sizes (8 B-256 MiB) on OCI's
	// own server (two 100G ports a GPU: 32 thread blocks). Half, because
	// NCCL's model caps a tree LL128 at the graph's channels times that
	// rate (tuning.cc: graphs[a]->nChannels*perChMaxTreeLL128Bw) while
	// it runs two blocks per graph channel (connect.cc: nChannels*2), so
	// a block moves 10 GB/s: 20 a block, fitted on topogen's one 200G
	// NIC a GPU (16 blocks where NCCL ran 32), made OCI's 8-256 MiB
	// trees 0.72-0.82 of measured on its real server.
	t.TreeOpUs, t.TreeGBps, t.TreeLLGBps = 2, 10, 4
}

// PresetAuto is the preset value that names the calibrated preset of the
// fabric's GPU generation (PresetFor); NewTransport applies it first.
const PresetAuto = "auto"

// PresetFor is the calibrated preset for a fabric of gpuType GPUs whose
// NICs are on network (topo.NetIB, NetRoCE, NetEFA; "" when the topology
// does not say, taken as InfiniBand): Ampere (A100, A800) a100, a100-roce
// or a100-efa (fitted with --proto simple --max-channels 8, as
// aws-ofi-nccl runs p4d and p4de: the preset does not restrict the
// protocol); Hopper (H100, H800, H20) h100-ib, h100-roce or h100-efa.
// Blackwell (B200) has no sweep to calibrate on and takes Hopper's, the
// nearest generation, rather than NCCL's model alone, which is up to 2x
// fast at 1-256 MiB across servers on every generation measured. An
// unknown type takes none.
func PresetFor(gpuType, network string) string {
	spec, ok := topo.GPUSpecs[gpuType]
	if !ok {
		return "none"
	}
	gen := "h100"
	if spec.CC < 90 {
		gen = "a100"
	}
	switch network {
	case topo.NetRoCE:
		return gen + "-roce"
	case topo.NetEFA:
		return gen + "-efa"
	case "", topo.NetIB:
		if gen == "a100" {
			return "a100" // its tree steps were fitted over RoCE, its network steps checked there
		}
		return "h100-ib"
	}
	return "none" // topo.Validate refuses any other network
}

// NewTransport is the transport simccl-decompose runs with: the preset of
// the fabric's GPU generation (PresetFor), then keys (KEY=VALUE, later
// keys win; preset=auto names that preset, preset=none NCCL's model
// latencies alone).
func NewTransport(gpuType, network string, keys []string) (Transport, error) {
	tr := DefaultTransport()
	for _, kv := range append([]string{"preset=" + PresetAuto}, keys...) {
		if kv == "preset="+PresetAuto {
			kv = "preset=" + PresetFor(gpuType, network)
		}
		if err := tr.Set(kv); err != nil {
			return tr, err
		}
	}
	return tr, tr.treeWorkWithoutSteps()
}

// treeWorkWithoutSteps refuses a tree step's GPU work (tree-op, tree-bw,
// tree-ll-bw) where the transport has no step cost for it to ride on
// (every step and proxy cost 0, as under preset=none): the flows'
// stepCosts then carry nothing, so the key would be dropped without a word.
func (t Transport) treeWorkWithoutSteps() error {
	if t.StepPs(Simple, true) > 0 || t.StepPs(Simple, false) > 0 || t.ProxyOpUs > 0 {
		return nil
	}
	for _, k := range []struct {
		name string
		v    float64
	}{{"tree-op", t.TreeOpUs}, {"tree-bw", t.TreeGBps}, {"tree-ll-bw", t.TreeLLGBps}} {
		if k.v > 0 {
			return fmt.Errorf("--transport %s=%v: a tree step's work needs the transport's step costs, and gpu-step, send-proxy, recv-proxy and proxy-op are all 0 (as under preset=none): set one of them, or a preset, before it", k.name, k.v)
		}
	}
	return nil
}

// TransportLabel says which transport keys (as NewTransport takes them)
// give on gpuType GPUs on network: the last preset named (auto resolved),
// then the keys set after it, e.g. "h100-ib (auto: H100) slots=4" or
// "h100-efa (auto: H100, efa)".
func TransportLabel(gpuType, network string, keys []string) string {
	auto := PresetFor(gpuType, network) + " (auto: " + strings.Join(slices.DeleteFunc([]string{gpuType, network}, func(s string) bool { return s == "" }), ", ") + ")"
	label, after := auto, []string(nil)
	for _, kv := range keys {
		switch v, ok := strings.CutPrefix(kv, "preset="); {
		case ok && v == PresetAuto:
			label, after = auto, nil
		case ok:
			label, after = v, nil
		default:
			after = append(after, kv)
		}
	}
	return strings.Join(append([]string{label}, after...), " ")
}

// badGBps: a per-channel or per-block rate that is not 0 (not modelled)
// or 0.001 to 1e6 GB/s. Below 0.001 GB/s a byte's time in fs overflows
// int64 (1e6/bw), which turned a slower rate into none.
func badGBps(bw float64) bool { return !(bw == 0 || bw >= 1e-3 && bw <= 1e6) }

// transportKeys lists the keys Set accepts, in the order --help shows them.
var transportKeys = []string{"preset", "slots", "buffsize", "ll-buffsize", "ll128-buffsize", "gpu-step", "send-proxy", "recv-proxy", "credit-rtt", "slice-ll", "slice-ll128", "slice-simple", "proxy-op", "p2p-op", "nvls-chunk", "ring-op", "ar-op", "ar-threshold", "nvls-op", "nvls-bw", "nvls-tree-op", "nvls-tree-bw", "ll-bw", "launch", "gpus-per-process", "ll128-tail", "tuner", "host-cpu", "net-latency", "p2p-chunk", "max-recvs", "tree-op", "tree-bw", "tree-ll-bw", "tree-ll-first", "tree-ll128-send", "tree-chunk", "tree-graph", "tree-lat", "channel-split", "net-shared-buffers"}

// Set parses one KEY=VALUE (--transport): counts and byte sizes are
// positive integers, costs non-negative microseconds. The error names
// the key.
func (t *Transport) Set(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok {
		return fmt.Errorf("--transport %q: want KEY=VALUE with KEY one of %s", kv, strings.Join(transportKeys, ", "))
	}
	switch k {
	case "preset":
		set, ok := TransportPresets[v]
		if !ok {
			return fmt.Errorf("--transport preset=%q: want one of %s", v, strings.Join(append([]string{PresetAuto}, slices.Sorted(maps.Keys(TransportPresets))...), ", "))
		}
		// The platform's keys start from the default in every preset;
		// a preset sets those its platform differs in.
		d := DefaultTransport()
		t.LL128TailBytes, t.Tuner, t.AMDHost, t.NetLatencyUs, t.P2PChunk = d.LL128TailBytes, d.Tuner, d.AMDHost, d.NetLatencyUs, d.P2PChunk
		t.MaxRecvs, t.P2PDedicated = d.MaxRecvs, d.P2PDedicated
		t.TreeOpUs, t.TreeGBps, t.TreeLLGBps = d.TreeOpUs, d.TreeGBps, d.TreeLLGBps
		t.TreeDepthChunk, t.TreeGraphNCCL, t.TreeLatLegacy, t.TreeLLShare = d.TreeDepthChunk, d.TreeGraphNCCL, d.TreeLatLegacy, d.TreeLLShare
		t.TreeLL128Whole = d.TreeLL128Whole
		t.ChannelCells = d.ChannelCells
		t.NVLSTreeLoopUs, t.NVLSTreeGBps = d.NVLSTreeLoopUs, d.NVLSTreeGBps
		set(t)
	case "ar-threshold":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1<<40 {
			return fmt.Errorf("--transport ar-threshold=%q: want a size in bytes, 0 (no adaptive routing) or more", v)
		}
		t.ARThreshold = n
	case "host-cpu":
		return twoWay(k, v, &t.AMDHost, "intel", "amd", "intel or amd")
	case "tree-graph":
		return twoWay(k, v, &t.TreeGraphNCCL, "ring", "nccl", "ring (the tree uses the ring's graph) or nccl (NCCL's search raises a 2-server tree's intra-server bandwidth)")
	case "tree-lat":
		return twoWay(k, v, &t.TreeLatLegacy, "current", "legacy", "current (NCCL 2.23 and later's tree Simple latency) or legacy (NCCL 2.22 and earlier's, 28 us a hop, in NCCL's choice)")
	case "tree-ll-first":
		return twoWay(k, v, &t.TreeLLShare, "whole", "share", "whole (a tree LL step's first piece pays the whole step cost under tree-ll-bw) or share (its share of it)")
	case "tree-ll128-send":
		return twoWay(k, v, &t.TreeLL128Whole, "lines", "whole", "lines (a tree LL128 network step's first piece pays its latency and step cost) or whole (it also waits its sender's work on the whole step, under tree-bw)")
	case "net-shared-buffers":
		return twoWay(k, v, &t.P2PDedicated, "1", "0", "1 (NCCL_NET_SHARED_BUFFERS' default: AllToAll's network connections share a channel's 16 buffer slots) or 0 (each has its own 8)")
	case "channel-split":
		return twoWay(k, v, &t.ChannelCells, "even", "cells", "even (NCCL 2.22 and earlier: a collective's bytes split evenly over its channels) or cells (NCCL 2.23-2.25: 16 KiB of traffic a channel at least)")
	case "tree-chunk":
		return twoWay(k, v, &t.TreeDepthChunk, "step", "depth", "step (NCCL 2.20 and later) or depth (NCCL 2.8-2.19's tree Simple chunk)")
	case "tuner":
		if !slices.Contains(nccl.TunerPlugins, v) {
			return fmt.Errorf("--transport tuner=%q: want %s", v, strings.Join(nccl.TunerPlugins, " or "))
		}
		t.Tuner = v
	case "ll128-tail":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1<<40 {
			return fmt.Errorf("--transport ll128-tail=%q: want a size in bytes, 0 (the copy wholly overlaps the wire) or more", v)
		}
		t.LL128TailBytes = n
	case "ll-bw", "nvls-bw", "tree-bw", "tree-ll-bw", "nvls-tree-bw":
		bw, err := strconv.ParseFloat(strings.TrimSuffix(v, "GBps"), 64)
		if err != nil || badGBps(bw) {
			return fmt.Errorf("--transport %s=%q: want a bandwidth in GB/s, 0 (none) or 0.001 to 1e6", k, v)
		}
		switch k {
		case "nvls-bw":
			t.NVLSChannelGBps = bw
		case "tree-bw":
			t.TreeGBps = bw
		case "tree-ll-bw":
			t.TreeLLGBps = bw
		case "nvls-tree-bw":
			t.NVLSTreeGBps = bw
		default:
			t.LLBusGBps = bw
		}
	case "max-recvs":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1<<20 {
			return fmt.Errorf("--transport max-recvs=%q: want a positive integer (receives the network plugin groups in one irecv)", v)
		}
		t.MaxRecvs = n
	case "gpus-per-process":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1<<20 {
			return fmt.Errorf("--transport gpus-per-process=%q: want a positive integer (nccl-tests' -g)", v)
		}
		t.GPUsPerProcess = n
	case "slots", "buffsize", "ll-buffsize", "ll128-buffsize", "nvls-chunk", "p2p-chunk":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > 1<<40 {
			return fmt.Errorf("--transport %s=%q: want a positive integer", k, v)
		}
		c := *t
		switch k {
		case "slots":
			if n > 1<<20 {
				return fmt.Errorf("--transport slots=%q: at most %d", v, 1<<20)
			}
			c.Slots = int(n)
		case "buffsize":
			c.BuffSimple = n
		case "ll-buffsize":
			c.BuffLL = n
		case "nvls-chunk":
			c.NVLSChunk = n
		case "p2p-chunk":
			c.P2PChunk = n
		default:
			c.BuffLL128 = n
		}
		// Validate's rule, with the key that broke it named (a key's
		// order matters: set the buffers before more slots).
		if !c.buffersHoldSlots() {
			return fmt.Errorf("--transport %s=%q: each protocol's buffer (buffsize %d, ll-buffsize %d, ll128-buffsize %d) needs at least one byte per slot (%d)", k, v, c.BuffSimple, c.BuffLL, c.BuffLL128, c.slots())
		}
		*t = c
	case "gpu-step", "send-proxy", "recv-proxy", "credit-rtt", "slice-ll", "slice-ll128", "slice-simple", "proxy-op", "p2p-op", "ring-op", "ar-op", "nvls-op", "nvls-tree-op", "launch", "net-latency", "tree-op":
		us, err := strconv.ParseFloat(strings.TrimSuffix(v, "us"), 64)
		if err != nil || math.IsNaN(us) || us < 0 || us > 1e6 {
			return fmt.Errorf("--transport %s=%q: want a cost in microseconds, 0 to 1e6", k, v)
		}
		switch k {
		case "gpu-step":
			t.GPUStepUs = us
		case "send-proxy":
			t.SendProxyUs = us
		case "credit-rtt":
			t.CreditRTTUs = us
		case "slice-ll":
			t.SliceUs[LL] = us
		case "slice-ll128":
			t.SliceUs[LL128] = us
		case "slice-simple":
			t.SliceUs[Simple] = us
		case "proxy-op":
			t.ProxyOpUs = us
		case "p2p-op":
			t.P2POpUs = us
		case "ring-op":
			t.RingOpUs = us
		case "ar-op":
			t.AROpUs = us
		case "nvls-op":
			t.NVLSChunkUs = us
		case "nvls-tree-op":
			t.NVLSTreeLoopUs = us
		case "launch":
			t.LaunchUs = us
		case "net-latency":
			t.NetLatencyUs = us
		case "tree-op":
			t.TreeOpUs = us
		default:
			t.RecvProxyUs = us
		}
	default:
		return fmt.Errorf("--transport %q: unknown key %s (%s)", kv, k, strings.Join(transportKeys, ", "))
	}
	return nil
}

// twoWay sets *on for a key of two values, off or on (want says which
// and what they mean).
func twoWay(k, v string, on *bool, off, onV, want string) error {
	if v != off && v != onV {
		return fmt.Errorf("--transport %s=%q: want %s", k, v, want)
	}
	*on = v == onV
	return nil
}

// buffersHoldSlots says whether each protocol's buffer has at least one
// byte per slot (a slot of 0 bytes would never carry a step).
func (t Transport) buffersHoldSlots() bool {
	return min(t.BuffSimple, t.BuffLL, t.BuffLL128) >= t.slots()
}

// Validate checks a Transport built in code (Set checks each value).
func (t Transport) Validate() error {
	switch {
	case t.Slots < 1:
		return fmt.Errorf("transport slots %d: at least 1", t.Slots)
	case !t.buffersHoldSlots():
		return fmt.Errorf("transport buffsize: each buffer needs at least one byte per slot")
	case !(t.GPUStepUs >= 0):
		return fmt.Errorf("transport gpu-step %v: a cost is not negative", t.GPUStepUs)
	case !(t.SendProxyUs >= 0):
		return fmt.Errorf("transport send-proxy %v: a cost is not negative", t.SendProxyUs)
	case !(t.RecvProxyUs >= 0):
		return fmt.Errorf("transport recv-proxy %v: a cost is not negative", t.RecvProxyUs)
	case !(t.CreditRTTUs >= 0):
		return fmt.Errorf("transport credit-rtt %v: a time is not negative", t.CreditRTTUs)
	case t.MaxRecvs < 0:
		return fmt.Errorf("transport max-recvs %d: a count is not negative", t.MaxRecvs)
	case t.P2PChunk < 0:
		return fmt.Errorf("transport p2p-chunk %d: a size is not negative", t.P2PChunk)
	case t.NVLSChunk < 0:
		return fmt.Errorf("transport nvls-chunk %d: a size is not negative", t.NVLSChunk)
	case !(t.ProxyOpUs >= 0):
		return fmt.Errorf("transport proxy-op %v: a cost is not negative", t.ProxyOpUs)
	case !(t.P2POpUs >= 0):
		return fmt.Errorf("transport p2p-op %v: a cost is not negative", t.P2POpUs)
	case !(t.RingOpUs >= 0):
		return fmt.Errorf("transport ring-op %v: a cost is not negative", t.RingOpUs)
	case !(t.TreeOpUs >= 0):
		return fmt.Errorf("transport tree-op %v: a cost is not negative", t.TreeOpUs)
	case badGBps(t.TreeGBps):
		return fmt.Errorf("transport tree-bw %v: a bandwidth is 0 (none) or 0.001 to 1e6 GB/s", t.TreeGBps)
	case badGBps(t.TreeLLGBps):
		return fmt.Errorf("transport tree-ll-bw %v: a bandwidth is 0 (none) or 0.001 to 1e6 GB/s", t.TreeLLGBps)
	case !(t.AROpUs >= 0):
		return fmt.Errorf("transport ar-op %v: a cost is not negative", t.AROpUs)
	case t.ARThreshold < 0:
		return fmt.Errorf("transport ar-threshold %d: a size is not negative", t.ARThreshold)
	case !(t.NVLSChunkUs >= 0):
		return fmt.Errorf("transport nvls-op %v: a cost is not negative", t.NVLSChunkUs)
	case badGBps(t.NVLSChannelGBps):
		return fmt.Errorf("transport nvls-bw %v: a bandwidth is 0 (none) or 0.001 to 1e6 GB/s", t.NVLSChannelGBps)
	case !(t.NVLSTreeLoopUs >= 0):
		return fmt.Errorf("transport nvls-tree-op %v: a cost is not negative", t.NVLSTreeLoopUs)
	case badGBps(t.NVLSTreeGBps):
		return fmt.Errorf("transport nvls-tree-bw %v: a bandwidth is 0 (none) or 0.001 to 1e6 GB/s", t.NVLSTreeGBps)
	case badGBps(t.LLBusGBps):
		return fmt.Errorf("transport ll-bw %v: a bandwidth is 0 (none) or 0.001 to 1e6 GB/s", t.LLBusGBps)
	case !(t.LaunchUs >= 0):
		return fmt.Errorf("transport launch %v: a cost is not negative", t.LaunchUs)
	case t.Tuner != "" && !slices.Contains(nccl.TunerPlugins, t.Tuner):
		return fmt.Errorf("transport tuner %q: want %s", t.Tuner, strings.Join(nccl.TunerPlugins, " or "))
	case !(t.NetLatencyUs >= 0):
		return fmt.Errorf("transport net-latency %v: a time is not negative", t.NetLatencyUs)
	case t.LL128TailBytes < 0:
		return fmt.Errorf("transport ll128-tail %d: a size is not negative", t.LL128TailBytes)
	case t.GPUsPerProcess < 0:
		return fmt.Errorf("transport gpus-per-process %d: not negative (0 and 1: one GPU per process)", t.GPUsPerProcess)
	}
	for p, us := range t.SliceUs {
		if !(us >= 0) {
			return fmt.Errorf("transport slice-%s %v: a cost is not negative", Proto(p), us)
		}
	}
	return nil
}

func (t Transport) slots() int64 { return int64(max(t.Slots, 1)) }

// nvlsFullChunk is NCCL_NVLS_CHUNKSIZE's default, the chunk at which
// nvlsEfficiency carries an NVLS channel's work (Transport.NVLSChunkUs).
const nvlsFullChunk = 128 << 10

// nvlsChunk is enqueue.cc's (calcCollChunking) single-server NVLS chunk
// for size bytes over ops = channels x heads concurrent chunks: 64 KiB
// below 64 loops of the full chunk, 32 KiB below 8, 16 KiB below 2.
func nvlsChunk(ck, size, ops int64) int64 {
	if size < 64*ops*ck && ck > 64<<10 {
		ck = 64 << 10
	}
	if size < 8*ops*ck && ck > 32<<10 {
		ck = 32 << 10
	}
	if size < 2*ops*ck && ck > 16<<10 {
		ck = 16 << 10
	}
	return ck
}

// nvlsWork reports whether the transport gives a single-server NVLS
// channel's chunks a GPU work (nvlsWorkPs).
func (t Transport) nvlsWork() bool { return t.NVLSChunkUs > 0 || t.NVLSChannelGBps > 0 }

// nvlsTreeWork reports whether the transport gives an NVLS-Tree loop a
// GPU work (nvlsTreeWorkPs).
func (t Transport) nvlsTreeWork() bool { return t.NVLSTreeLoopUs > 0 || t.NVLSTreeGBps > 0 }

// nvlsWorkPs is a single-server NVLS channel's GPU work (ps) per NCCL
// chunk of x bytes: NVLSChunkUs plus x at NVLSChannelGBps; 0 from NCCL's
// full chunk up, where nvlsEfficiency carries it.
func (t Transport) nvlsWorkPs(x int64) int64 {
	if x <= 0 || x >= nvlsFullChunk {
		return 0
	}
	w := usToPs(t.NVLSChunkUs)
	if t.NVLSChannelGBps > 0 {
		w += int64(math.Round(float64(x) / t.NVLSChannelGBps * 1e3))
	}
	return w
}

// nvlsChunkPs is the GPU work (ps) of an NVLS transfer of payload b: the
// NCCL chunks of x bytes it stands for at work each (nvlsWorkPs), a pace
// on its connection (nvlsChannel.row); one chunk's at least. A transfer
// that is not a whole number of chunks (the DAG's chunk raised by
// --max-chunks to a channel's bytes / 64) stands for its fraction of the
// last: counted whole, a 38 KiB transfer of 32 KiB chunks paid two
// chunks' work, and a 1 x 8 H100 AllReduce took 206.7 us at 32 MiB and
// 324.3 from 38 to 54 MiB, where a channel's 64 transfers crossed one
// NCCL chunk, then 311.5 at 64 MiB, as NCCL's chunk doubles.
func nvlsChunkPs(b, x, work int64) int64 {
	if work <= 0 || x <= 0 || b <= 0 {
		return 0
	}
	if b <= x {
		return work
	}
	return int64(math.Round(float64(b) * float64(work) / float64(x)))
}

// RingRoundPs is a multi-server LL or LL128 ring's proxy round (ps), a
// floor on its hops' fixed work (RingOpUs): every ring step, each GPU's
// proxy posts and polls ceil(2 x channels / ppn) network steps of msg
// wire bytes, RingOpUs each and AROpUs more when msg exceeds
// ARThreshold. 0 inside a server, for Simple, or without the costs.
func (t Transport) RingRoundPs(p Proto, channels, ppn, nNodes int, msg int64) int64 {
	if nNodes < 2 || p == Simple || t.RingOpUs == 0 && t.AROpUs == 0 {
		return 0
	}
	ppn = max(ppn, 1)
	ops := (2*max(channels, 1) + ppn - 1) / ppn
	us := t.RingOpUs
	if t.ARThreshold > 0 && msg > t.ARThreshold {
		us += t.AROpUs
	}
	return int64(ops) * usToPs(us)
}

// P2PPlan is how NCCL moves one peer's share of bytes over the network
// in a group of sends and receives to each of n ranks (NCCL 2.28.7
// enqueue.cc scheduleP2pTasksToPlan and addP2pToPlan, paths.cc
// ncclTopoGetNchannels and ncclTopoComputeP2pChannels): in parts on up
// to the channels per peer, which start at 2 and halve while 2 x n
// exceeds 4 x the comm's p2p channels ("avoid overloading channels with
// 8+ operations"), then at least the GPU's NICs (getLocalNetCountByBw:
// the NICs its PCIe link needs; a GPU's NICs here), a power of two; one
// part while the channels cannot give every peer one, doubled while a
// part exceeds a step (P2PChunk); each part in steps of a step, a half
// of one below 8 steps of bytes and a quarter below one step (the
// network's tuning).
func (t Transport) P2PPlan(bytes int64, n, nics, channels int) (parts int, chunk int64) {
	step := t.P2PChunk
	if step <= 0 {
		step = p2pNetChunk
	}
	step = min(step, max(t.BuffSimple/t.slots(), 1))
	p2pChannels := p2pChannelsOf(channels)
	perPeer := 2
	for perPeer*n > 4*p2pChannels && perPeer > 1 {
		perPeer /= 2
	}
	perPeer = min(pow2Up(max(perPeer, nics, 1)), p2pChannels)
	minParts := perPeer
	for minParts*n > p2pChannels && minParts > 1 {
		minParts /= 2
	}
	half := max(step/2, 1)
	parts = int(max(min(int64(minParts), (bytes+half-1)/half), 1))
	part := max(half, (bytes+int64(parts)-1)/int64(parts))
	for part > step && parts <= perPeer/2 {
		parts *= 2
		part = (bytes + int64(parts) - 1) / int64(parts)
	}
	chunk = step
	if bytes < step {
		chunk = max(step/4, 1)
	} else if bytes < 8*step {
		chunk = max(step/2, 1)
	}
	return parts, chunk
}

// p2pChannelsOf is the comm's p2p channels for channels (P2PPlan's): a
// power of two, at most 64.
func p2pChannelsOf(channels int) int { return pow2Up(min(max(channels, 1), 64)) }

// channelCells is how many of nc channels NCCL 2.23 and later give a
// lone collective op of size bytes (the whole buffer for AllGather and
// ReduceScatter) on n ranks (enqueue.cc scheduleCollTasksToPlan): its
// traffic (twice the bytes for AllReduce, n times a rank's share for
// AllGather and ReduceScatter, once otherwise) at least 16 KiB
// (MinTrafficPerChannel) a channel, cut into cells of 16 KiB of traffic
// rounded up to 16 bytes, each channel taking as many cells as its share
// of the traffic needs, in order.
func channelCells(op Op, n int, size int64, nc int) int {
	const minTraffic = 16 << 10
	if nc <= 1 || size <= 0 {
		return max(nc, 1)
	}
	count, perByte := size, int64(1)
	switch op {
	case AllReduce:
		perByte = 2
	case AllGather, ReduceScatter:
		perByte = int64(max(n, 1))
		count = (size + perByte - 1) / perByte
	}
	traffic := max(minTraffic, count*perByte)
	perChannel := max(minTraffic, traffic/int64(nc))
	cell := ((minTraffic+perByte-1)/perByte + 15) / 16 * 16
	cells := (count + cell - 1) / cell
	perCh := min(cells, (perChannel+cell*perByte-1)/(cell*perByte))
	return int(min(int64(nc), (cells+perCh-1)/perCh))
}

// pow2Up is the least power of two at least x (1 for x below 2).
func pow2Up(x int) int {
	p := 1
	for p < x {
		p *= 2
	}
	return p
}

// StepBytes is the wire bytes one slot holds under protocol p.
func (t Transport) StepBytes(p Proto) int64 {
	b := t.BuffSimple
	switch p {
	case LL:
		b = t.BuffLL
	case LL128:
		b = t.BuffLL128
	}
	return max(b/t.slots(), 1)
}

// StepPs is the cost (ps) one step of protocol p exposes (inter: a
// network hop, which adds the proxies' costs and a credit round trip):
// its fixed work, or, when the slots run dry first, the credit loop's
// share per slot. LL and LL128 carry their flags in the data, so the
// receiving GPU polls the lines as they land and the receive proxy
// skips the completion (net.cc, NCCL_NET_OPTIONAL_RECV_COMPLETION=1):
// only Simple's steps wait on the receive proxy.
func (t Transport) StepPs(p Proto, inter bool) int64 {
	work, loop := t.stepLoop(p, inter, t.slots())
	return max(work, loop)
}

// stepLoop is a step's fixed work (ps: the GPU's, and on a network hop
// the proxies' in series) and the credit loop's share per slot (the
// work plus the credit's round trip, over depth slots).
func (t Transport) stepLoop(p Proto, inter bool, depth int64) (work, loop int64) {
	us, rtt := t.GPUStepUs, 0.0
	if inter {
		us += t.SendProxyUs
		if p == Simple {
			us += t.RecvProxyUs
		}
		rtt = t.CreditRTTUs
	}
	work = usToPs(us)
	return work, (work + usToPs(rtt)) / max(depth, 1)
}

// StepPacePs is a network connection's steady step interval (ps) under
// protocol p: its slowest stage, or the credit loop's share per slot
// when the slots run dry first. The GPU, the send proxy and the receive
// proxy are different engines (a thread block, the sender's and the
// receiver's proxy threads) and a connection's NCCL_STEPS slots let
// each work on its own step at once (net.cc sendProxyProgress and
// recvProxyProgress move a sub's posted, transmitted and done counters
// apart, up to NCCL_STEPS): StepPs, their sum, is one step's latency,
// the pipeline's fill. Only AllToAll's point-to-point steps take it
// (p2pSteps); every other algorithm's pace was fitted with StepPs. An
// AllToAll's connections have fewer slots where many share a channel
// (p2pPacePs).
func (t Transport) StepPacePs(p Proto, inter bool) int64 {
	return t.paceAt(p, inter, t.slots())
}

// paceAt is StepPacePs with depth steps in flight a connection.
func (t Transport) paceAt(p Proto, inter bool, depth int64) int64 {
	stage := t.GPUStepUs
	if inter {
		stage = max(stage, t.SendProxyUs)
		if p == Simple {
			stage = max(stage, t.RecvProxyUs)
		}
	}
	_, loop := t.stepLoop(p, inter, depth)
	return max(usToPs(stage), loop)
}

// ncclSharedSteps is NCCL_SHARED_STEPS (NCCL 2.24.3 net.cc l. 510): the
// slots of a channel's shared p2p buffer, split among an op's subs.
const ncclSharedSteps = 16

// p2pPacePs is the step interval of an AllToAll's network connections
// when subs of them share one of a rank's channels (p2pSubs) and each
// moves steps steps: NCCL's p2p network connections use shared buffers
// (net.cc l. 188 and 227: every connection but connIndex 0 outside a
// graph; p2p's is 1, enqueue.cc l. 730) and both proxy loops cap a sub's
// steps in flight at min(NCCL_STEPS, NCCL_SHARED_STEPS/nsubs) (l. 1095
// send, l. 1275 receive): 2 on 2 x 8 H100, whose channels each carry a
// rank's 8 remote peers. A connection's first depth steps go a stage
// apart, each later one a credit loop (a step's work and the credit's
// round trip) after the one depth before it, so its steps' mean interval
// is the last one's start over the gaps: the stage while a connection
// has no more steps than its depth (2 x 8 H100 at 1.75 MiB: 2 steps a
// part), up to the loop over the depth (h100-ib: (8.5 + 20)/2 = 14.25
// us, against a 4 us stage).
func (t Transport) p2pPacePs(p Proto, subs int, steps int64) int64 {
	depth := t.slots()
	if subs > 0 {
		depth = min(depth, max(int64(ncclSharedSteps/subs), 1))
	}
	steady := t.paceAt(p, true, depth)
	stage := t.paceAt(p, true, math.MaxInt32) // the loop's share gone
	if depth >= t.slots() || steady <= stage {
		return steady // as every connection with all its slots
	}
	if steps <= depth {
		return stage // no step waits for a credit
	}
	_, loop := t.stepLoop(p, true, 1)
	gaps := steps - 1
	return ((gaps/depth)*loop + (gaps%depth)*stage) / gaps
}

// stepCosts is what a collective's transfers pay per step: the step's
// wire bytes and the cost of a step inside a server and between servers
// (ps); zero costs (streams from before the transport, SimAI replay,
// --no-launch-latency) add nothing.
type stepCosts struct {
	bytes        int64
	intra, inter int64
	// serial: a ring slice's fixed work in series with its bytes (ps),
	// and slices: how a ring chunk is cut (sliceOf)
	serial int64
	slice  sliceRule
	// proxyOp: the proxy's occupancy per network step (ps), in series
	// over a GPU's network connections (Transport.ProxyOpUs)
	proxyOp int64
	// pace: a network step's steady interval on its connection (ps,
	// Transport.StepPacePs), AllToAll's (p2pSteps); 0: inter, as in
	// streams written before it
	pace int64
	// maxRecvs: receives one irecv takes (Transport.MaxRecvs); 0 or 1:
	// none grouped
	maxRecvs int
	// roundPaced: an LL or LL128 ring, whose network steps are paced by
	// the ring's proxy round in serial, not by the step cost (cctx.ringHop)
	roundPaced bool
	// treeFs: a tree LL128 (LL) AllReduce under Transport.TreeGBps
	// (TreeLLGBps), a thread
	// block's time per wire byte of one input (fs); its step's fixed
	// work (TreeOpUs) rides in serial (cctx.treeStep). 0: not modelled.
	treeFs int64
	// treeShare: under treeFs a connection's first piece pays its share
	// of the step cost, not the whole step (Transport.TreeLLShare)
	treeShare bool
	// treeWhole: under treeFs a tree LL128 network step leaves once its
	// sender's block has written all of it (Transport.TreeLL128Whole), so
	// the connection's first piece also waits that step's work
	// (cctx.treeStep)
	treeWhole bool
}

// sliceRule is how NCCL's ring cuts a chunk into slices (prims): slices
// of up to bytes, a chunk into at least perChunk of them when it allows
// slices of min bytes (Simple: 2 slices of 2 steps, at least 1/32 of
// that; LL and LL128: one step, one slice).
type sliceRule struct {
	bytes, min int64
	perChunk   int64
}

// costsFor is the transport's step costs under protocol p.
func (t Transport) costsFor(p Proto) stepCosts {
	return stepCosts{bytes: t.StepBytes(p), intra: t.StepPs(p, false), inter: t.StepPs(p, true), serial: usToPs(t.SliceUs[p]), proxyOp: usToPs(t.ProxyOpUs),
		pace: t.StepPacePs(p, true), maxRecvs: t.MaxRecvs}
}

// slices is how many slices a ring chunk of wire bytes b is cut into.
func (s stepCosts) slices(b int64) int64 {
	r := s.slice
	if r.bytes <= 0 || b <= 0 {
		return s.steps(b)
	}
	n := (b + r.bytes - 1) / r.bytes
	if r.perChunk > n && r.min > 0 {
		n = max(n, min(r.perChunk, (b+r.min-1)/r.min))
	}
	return n
}

// steps is how many slots a transfer of wire bytes b fills.
func (s stepCosts) steps(b int64) int64 {
	if s.bytes <= 0 || b <= 0 {
		return 0
	}
	return (b + s.bytes - 1) / s.bytes
}

// transportPs is the closed form of the transport's per-step costs on a
// collective's critical path, which collective granularity adds to NCCL's
// model time so that it agrees with flow granularity, where the same
// costs ride on the transfers (cctx.firstHop): each hop's first step on
// the pipeline's fill, then a throughput limit. A pipeline through H hops
// pays every hop's step cost once while it fills; after that each
// connection starts a step at most once per step interval, so K chunks
// of S steps on the slowest connection (a network one when the
// collective crosses servers) take K x S intervals, which only add what
// exceeds the model's bandwidth term (the slots hide the rest).
//
// A ring's slices also pay their fixed work in series with their bytes
// (Transport.SliceUs): on the fill each hop takes the longer of its step
// latency and cost and its chunk's slices' work, and every later chunk
// adds its slices' work to the bandwidth term; a connection's chunk takes
// the longer of its pace and its work plus bytes, so the steady state
// adds whichever of the two excesses is larger.
//
// bw is the bandwidth term the costs overlap: NCCL's model's (ncclBwPs),
// or the flows' link time (Decomposer.linkBwPs).
func transportPs(co *Coll, k cut, s stepCosts, nNodes int, bw int64) int64 {
	fill, steady, serial := transportTerms(co, k, s, nNodes)
	if co.Plan.Algo == AlgoNVLSTree && Op(co.Rec.Op) == AllReduce && steady > 0 {
		// A paced tree exposes its first chunk's NVLS phases before the
		// steps and its last chunk's after them (nvlsTree's chain).
		steady += 2 * bw / nvlsTreeChunks(co, k, s)
	}
	return fill + max(0, steady-bw, serial)
}

// ncclBwPs is the bandwidth term of NCCL's model time for co.
func ncclBwPs(co *Coll) int64 { return max(co.Rec.PredictedPs-usToPs(co.Plan.Lat.Total), 0) }

// nvlsTreeChunks is how many loops an NVLS-Tree AllReduce's channel runs
// under the transport (nvlsTreeChunk).
func nvlsTreeChunks(co *Coll, k cut, s stepCosts) int64 {
	channels := int64(max(co.Plan.Channels, 1))
	per := (co.Rec.Size + channels - 1) / channels
	chunk := max(co.nvlsTreeChunk(k, s.intra > 0 || s.inter > 0), 1)
	return max((per+chunk-1)/chunk, 1)
}

// transportTerms splits transportPs into the pipeline's fill, the
// slowest connection's steps at the step interval (before overlap) and a
// ring's slices' serial work after the first loop.
func transportTerms(co *Coll, k cut, s stepCosts, nNodes int) (fill, steady, serial int64) {
	pl := co.Plan
	n := len(co.Ranks)
	if pl.NoOp || n < 2 || co.Rec.Size <= 0 || s.intra == 0 && s.inter == 0 && s.serial == 0 && s.proxyOp == 0 && s.treeFs == 0 {
		return 0, 0, 0
	}
	channels := int64(max(pl.Channels, 1))
	per := (co.Rec.Size + channels - 1) / channels
	slow := s.intra
	if nNodes > 1 {
		slow = s.inter
		if s.roundPaced {
			slow = s.intra // its network steps' pace is the round in serial
		}
	}
	op := Op(co.Rec.Op)
	if ringRows(pl.Algo, op) {
		hops, inter := int64(n-1), int64(max(nNodes-1, 0))
		if op == AllReduce {
			hops, inter = 2*hops, 2*inter
		}
		chunk := max(co.chunk(n, k), 1)
		loops := (per + int64(n)*chunk - 1) / (int64(n) * chunk)
		b := wire(min(chunk, (per+int64(n)-1)/int64(n)), pl.Proto)
		st := s.steps(b)
		// ringHop: the first loop's hops take the longer of latency plus
		// cost and the slices' work, of which the model has the latency.
		work := s.serial * s.slices(b)
		hopIntra, hopInter := usToPs(pl.Lat.Intra), usToPs(pl.Lat.Inter)
		fillIntra := max(hopIntra+s.intra, work) - hopIntra
		fillInter := max(hopInter+s.inter, work) - hopInter
		return (hops-inter)*fillIntra + inter*fillInter, (loops - 1) * hops * st * slow, (loops - 1) * hops * work
	}
	if pl.Algo == AlgoPAT {
		// Loops of n pieces; each phase a transfer of its blocks (pat.go),
		// every phase across servers.
		chunk := max(co.chunk(n, k), 1)
		loops := (per + int64(n)*chunk - 1) / (int64(n) * chunk)
		piece := min(chunk, (per+int64(n)-1)/int64(n))
		var st int64
		phases := patPhases(n)
		for _, d := range phases {
			st += s.steps(wire(piece*int64(patBlocks(n, d)), pl.Proto))
		}
		return int64(len(phases)) * s.inter, (loops - 1) * st * s.inter, 0
	}
	if pl.Algo != AlgoTree && pl.Algo != AlgoNVLS && pl.Algo != AlgoNVLSTree && pl.Algo != AlgoRing {
		// AllToAll, PXN, P2P and MSCCL transfers are one message per
		// connection: their step latency stands for the transport (a2a.go).
		return 0, 0, 0
	}
	chunk := max(co.chunk(1, k), 1)
	var work int64 // an NVLS chunk's GPU work, in its pace (nvlsChannel.row)
	if pl.Algo == AlgoNVLS {
		work = nvlsChunkPs(min(chunk, per), s.bytes, s.serial)
	}
	if pl.Algo == AlgoNVLSTree && op == AllReduce {
		chunk = max(co.nvlsTreeChunk(k, s.intra > 0 || s.inter > 0), 1)
		if nNodes > 1 {
			// the proxy's round paces the tree connections (nvlsTree)
			slow = max(slow, proxyRound(int(channels), co.Rec.Size, s.proxyOp))
		}
	}
	chunks := (per + chunk - 1) / chunk
	ppn := int64(n / max(nNodes, 1))
	piece := min(chunk, per)
	if pl.Algo == AlgoNVLSTree {
		piece = (piece + ppn - 1) / ppn // each GPU carries a shard across servers
	}
	st := s.steps(wire(piece, pl.Proto))
	if pl.Algo == AlgoNVLS && k.nvlsEff > 0 {
		st = s.steps(nvlsWire(piece, k.nvlsEff)) // its uploads' wire bytes (nvlsChannel.row)
	}
	interval := st * slow
	if pl.Algo == AlgoNVLSTree && op == AllReduce {
		// a loop's reduce work: on the first loop's path, then a pace
		loopWork := s.nvlsTreeWorkPs(piece)
		interval, fill = max(interval, loopWork), loopWork
	}
	levels := int64(bits.Len(uint(max(nNodes, 1))) - 1) // log2, rounded down
	switch pl.Algo {
	case AlgoTree:
		fill = 2 * ((ppn-1)*s.intra + levels*s.inter)
	case AlgoNVLSTree:
		fill += 2 * (s.intra + levels*s.inter)
	case AlgoNVLS:
		fill = 2*s.intra + work
	default: // Broadcast, Reduce: a chain through every rank
		fill = int64(n-nNodes)*s.intra + int64(nNodes-1)*s.inter
	}
	return fill, (chunks - 1) * (interval + work), serial
}

// ringCyclePs is a queued ring's time (ps) under the transport's costs in
// closed form: the mechanism flow granularity's transfers carry
// (ringConns.send), step by step. Every connection of a channel runs its
// steps in order: a step waits its slices' fixed work f (Transport.SliceUs
// x slices) once the connection's previous step has left, then sends its
// b wire bytes, and starts no sooner than its pace (step cost x slots it
// fills) after the previous one started. Its data comes from the
// upstream hop's previous step, which runs ahead of the slowest
// connection, so the ring moves at its slowest connection's cycle,
//
//	cycle(b) = max(pace(b), f(b) + b x phase),
//
// phase being how long a byte of one connection takes on the link its ring
// loads most when its channels share that link in phase (ringPhasePs).
// Every connection makes a loop's P steps (n-1, or 2(n-1) for AllReduce)
// per loop; the first step waits the hop's latency and step cost instead
// of f (ringHop), after NCCL's base latency. Rings that are out of phase
// share a link's bytes but hide one another's fixed work, so the link's
// total bytes over its rate (bw) bound the steps from below instead:
//
//	T = base + max(lat + cost, f) - f + max(sum over loops of P x cycle(b), bw).
//
// co must be a queued ring (queuedRing).
func ringCyclePs(co *Coll, k cut, s stepCosts, nNodes int, phase float64, bw int64) int64 {
	pl := co.Plan
	n := len(co.Ranks)
	op := Op(co.Rec.Op)
	channels := int64(max(pl.Channels, 1))
	per := (co.Rec.Size + channels - 1) / channels // channel 0's, the largest
	steps := int64(n - 1)
	if op == AllReduce {
		steps *= 2
	}
	slow, hop := s.intra, usToPs(pl.Lat.Intra)
	if nNodes > 1 {
		slow, hop = s.inter, usToPs(pl.Lat.Inter)
	}
	loopBytes := int64(n) * max(co.chunk(n, k), 1)
	cycle := func(b int64) int64 {
		return max(slow*s.steps(b), s.serial*s.slices(b)+int64(float64(b)*phase))
	}
	full := per / loopBytes
	var total int64
	b0 := wire((min(per, loopBytes)+int64(n)-1)/int64(n), pl.Proto) // a loop's largest slice
	if full > 0 {
		total += full * steps * cycle(wire(loopBytes/int64(n), pl.Proto))
	}
	if rest := per - full*loopBytes; rest > 0 {
		total += steps * cycle(wire((rest+int64(n)-1)/int64(n), pl.Proto))
	}
	f0 := s.serial * s.slices(b0)
	return usToPs(pl.Lat.Base) + max(hop+slow, f0) - f0 + max(total, bw)
}

// queuedRing reports whether co is a ring whose steps keep their
// connection's order on every loop (cctx.queued): a Simple ring of
// AllReduce, AllGather or ReduceScatter under the transport's step costs.
// SimAI replay and --no-launch-latency carry no step costs (stepCosts).
func queuedRing(co *Coll, s stepCosts) bool {
	pl := co.Plan
	return !pl.NoOp && len(co.Ranks) > 1 && co.Rec.Size > 0 && pl.Algo == AlgoRing && pl.Proto == Simple &&
		ringRows(pl.Algo, Op(co.Rec.Op)) && (s.intra > 0 || s.inter > 0)
}
