package tests

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"
)

// p5Misses are the sizes of the AWS p5 sweeps (crazyguitar/aws-gpu-
// communication-benchmark, NCCL 2.28.7 with aws-ofi-nccl 1.16.3's tuner)
// that h100-efa's fluid run does not yet bring within 20% of measured,
// with their ratio when the list was written (issue 30). Each has a
// mechanism, not a constant, behind it:
//   - (fixed) AllGather's first Simple ring size (2x8 64 MiB 1.85, 4x8
//     128 MiB 1.90, 8x8 256 MiB 1.90): NCCL's model on p5's AMD EPYC
//     hosts (--transport host-cpu=amd, set by h100-efa) doubles its
//     network overhead, 6 us a Simple ring step against 3, and keeps
//     LL128 there (0.99, 0.99, 0.98).
//   - (fixed) AllGather's first Simple size, 16 MiB a rank (2x8 256
//     MiB, 4x8 512 MiB, 8x8 1 GiB: 0.77 each): each p5 run's busbw dips
//     there (215-224 GB/s) and climbs after. NCCL's ring graph on 8 H100s
//     with 400G rails is 8 channels at 48 GB/s (it logs "nChannels 8, bw
//     48.000000/48.000000, type NVL/PIX" on 2 x 8; search.cc: a multi-
//     server ring crosses NVLink 7 times over 8 GPUs, 7 x 48 < 370.8),
//     and with it and the plugin's 75 us of net-latency NCCL's model
//     (tuning.cc: Simple 8 x 48 GB/s, LL128 capped at 8 x 36.7) keeps
//     LL128 to 8 MiB a rank and takes Simple from 16 MiB a rank on 16,
//     32 and 64 ranks alike (nccl TestNetLatencySelection), so the dip
//     is Simple's. Measured, a Simple ring step there costs about 32 us
//     plus its chunk's wire bytes at the NIC share (16 to 64 MiB a rank,
//     2, 4 and 8 nodes), where h100-efa's Simple ring slices had IB's 8
//     us (16 a step) and NCCL's default 2 MiB chunk. Two changes, neither
//     fitted on these sweeps: a Simple ring's chunk follows NCCL_BUFFSIZE
//     (enqueue.cc calcCollChunking: buffSize/NCCL_STEPS x chunkSteps, 4
//     MiB at aws-ofi-nccl's 8 MiB), and h100-efa's Simple slice is 10.5
//     us, fitted on the one p5 Ring Simple size outside the held-out
//     sweeps (16 x 8 AllReduce at 8 GiB, TestTransportP5Band). They are
//     now 0.83, 0.83 and 0.84, 32 MiB a rank 0.88-0.92 (0.85-0.87), 64
//     and 128 MiB a rank 0.94 (0.97-0.99), and the Ring Simple AllReduce
//     (4x8 2 and 4 GiB, 8x8 4 GiB) 0.98, 1.00 and 0.99 (1.03-1.05). What
//     is left of the dip, about 13 us a ring step, no sweep outside the
//     held-out ones separates: the 16 x 8 AllReduce's 8 GiB, the only
//     one, has 2 MiB slices, whose bytes dwarf a slice's fixed work.
//   - (fixed) AllGather 8x8 32 MiB (0.75): an LL128 ring step of 32 KiB
//     takes 11 us on EFA against 7.5 on the Voltage Park IB sweep, where
//     h100-efa's ring proxy round was IB's (ring-op 1.2) plus the step's
//     copy in series. Measured, a p5 LL128 ring step is about 9.6 us plus
//     its wire bytes at every step size from 32 to 256 KiB (2, 4 and 8
//     nodes alike): 4 ops of a GPU's proxy a ring step at the proxy op
//     fitted on the 2 x 8 NVLS-Tree AllReduce (2.4 us), the copy
//     overlapping the wire (ll128-tail 0). h100-efa now sets both: every
//     LL128 AllGather size is 1.00-1.05 (8x8 32 MiB 1.05), the tuner's
//     Ring LL128 AllReduce 1.02-1.11 (0.98-1.04 before).
//   - (fixed) AllReduce on 8 nodes at 64 and 128 MiB (0.70, 0.72): the
//     preset now selects as aws-ofi-nccl's p5 tuner regions do
//     (--transport tuner=aws-p5: Tree LL128 to 36 MiB on 32 ranks and 112
//     MiB on 64, Ring LL128 to 1.3 and 2 GiB, Ring Simple above), and an
//     LL128 ring step's copy overlaps its wire bytes beyond its first 128
//     KiB (ll128-tail), so the LL128 ring's plateau is the wire's: 4 and 8
//     nodes are 0.97-1.12 from 32 MiB to 4 GiB.
//   - (fixed) the tuner's Tree LL128 AllReduce on 4 and 8 nodes (4x8 32
//     MiB, 8x8 32 and 64 MiB: 1.07, 1.04 and 1.12, in the band but with
//     the tree's network steps paced by their 18.5 us step cost whatever
//     their bytes): a tree LL128 step is now the sender's runTreeSplit
//     work (tree-op 7 us plus its inputs' bytes at its share of 36.7
//     GB/s), fitted on the 2 x 8 sweep only; out of sample these were
//     0.95, 0.90 and 0.99, and with the step refitted there (tree-op 4
//     us, tree-bw 30 GB/s, each network step leaving whole after its
//     sender's work, tree-ll128-send=whole: TestTreeLL128Monotone) 1.00,
//     0.99 and 1.10 (an 8 x 8 tree crosses servers 6 times, each first
//     step waiting its sender's whole step).
//   - (within the band, at its edge) AllReduce on 2 nodes at 64 MiB
//     (0.7996 when listed, 0.804 at c5cbb11, before EFA's ring op, which
//     does not touch it; 0.823 with the proxy's phase, proxyPhase; 0.805
//     with a loop's GPU work, nvls-tree-op and nvls-tree-bw, and the
//     proxy op 0.3 us): NVLS-Tree, NCCL's 128 KiB chunk per head there
//     (enqueue.cc calcCollChunking shrinks aws-ofi-nccl's 512 KiB below
//     16 x channels x heads chunks), one loop per channel; the fitted 2 x
//     8 sweep (aws-p5-2x8h100-efa_allreduce.csv, another run) is 0.81 at
//     that size (0.83 before the loop's work).
var p5Misses = map[string]float64{}

// knownDrift is how far a listed miss or gap (p5Misses, p5AllToAllMisses,
// dgxH100PacketGaps) may move from the ratio it was listed with: one
// that grew worse, or that a change cured, is news either way, and the
// list must say it.
const knownDrift = 0.05

// checkRatio asserts that ratio r (what: the case, for the message) is
// within [lo, hi], or, where listed says the case is a known miss with
// ratio was, logs it and asserts it is still within knownDrift of was.
func checkRatio(t *testing.T, what string, r, lo, hi, was float64, listed bool) {
	t.Helper()
	switch {
	case listed && math.Abs(r-was) > knownDrift:
		t.Errorf("%s: %.3f, listed as a known miss at %.2f: moved more than %.2f, update the list", what, r, was, knownDrift)
	case listed:
		t.Logf("%s: %.3f (known miss, %.2f when listed)", what, r, was)
	case r < lo || r > hi:
		t.Errorf("%s: %.3f outside [%.2f, %.2f]", what, r, lo, hi)
	}
}

// checkPacketFluid asserts that packet ran want sizes and that each is
// within 5% of fluid's run of the same size (what: the case, for the
// message).
func checkPacketFluid(t *testing.T, what string, fluid, packet map[int64]float64, want int) {
	t.Helper()
	if len(packet) != want {
		t.Fatalf("%s: packet ran %d sizes, want %d", what, len(packet), want)
	}
	for _, s := range slices.Sorted(maps.Keys(packet)) {
		f, ok := fluid[s]
		if !ok {
			t.Fatalf("%s %d B: no fluid run", what, s)
		}
		if r := packet[s] / f; r < 0.95 || r > 1.05 {
			t.Errorf("%s %d B: packet %.1f us, fluid %.1f us (%.3f), want within 5%%", what, s, packet[s], f, r)
		}
	}
}

// TestTransportP5HeldOut (issue 30): the AWS p5 AllReduce and AllGather
// sweeps at 2, 4 and 8 nodes (NCCL 2.28.7, 32 MiB-4 GiB AllReduce, 32
// MiB-2 GiB AllGather, examples/reference/aws-p5-*), none of them used to
// fit h100-efa (the 4-node AllReduce's 32-256 MiB, checked by
// TestTransportP5Band, ran as NVLS-Tree when it was fitted; aws-ofi-nccl's
// regions run them as Tree and Ring LL128 now), through
// fluid with --transport preset=h100-efa: every size within 20% of
// measured except those p5Misses lists, which it prints; and without
// -short, packet within 5% of fluid on the 2-, 4- and 8-node sweeps from
// 32 to 256 MiB (both ops). When written, over every size of the sweeps
// (32 MiB to 4 GiB AllReduce, 2 GiB AllGather), packet / fluid was
// 0.997-1.012 and 1.002-1.011 on 2 nodes, 0.993-1.010 and 0.995-1.021 on
// 4, 0.991-1.010 and 0.992-1.010 on 8 (AllReduce and AllGather); the
// sizes above 256 MiB are not run here (the 8-node AllReduce to 4 GiB
// alone takes 2 minutes of packet CPU). -short runs 2 nodes through fluid
// only (8 nodes take most of its fluid time).
func TestTransportP5HeldOut(t *testing.T) {
	t.Parallel()
	fl := []string{"flowsim-analytical", "--model", "fluid"}
	nodes := []int{2, 4, 8}
	if testing.Short() {
		nodes = nodes[:1]
	}
	for _, op := range []string{"allreduce", "allgather"} {
		for _, n := range nodes {
			if testing.Short() {
				break
			}
			tr := []string{"--transport", "preset=h100-efa"}
			f := sweepBackend(t, op, n*8, "32MiB:256MiB:2", fl, tr...)
			p := sweepBackend(t, op, n*8, "32MiB:256MiB:2", []string{"flowsim-packet"}, tr...)
			checkPacketFluid(t, fmt.Sprintf("p5 %dx8 %s", n, op), f, p, 4)
		}
		for _, n := range nodes {
			ref := fmt.Sprintf("aws-p5-%dx8h100-efa_%s.csv", n, op)
			if op == "allreduce" && n == 2 {
				ref = "aws-p5-2x8h100-efa_allreduce_nccl-2.28.csv"
			}
			pub := measuredUs(t, ref)
			top, want := "4GiB", 8
			if op == "allgather" {
				top, want = "2GiB", 7
			}
			got := sweepBackend(t, op, n*8, "32MiB:"+top+":2", fl, "--transport", "preset=h100-efa")
			var sizes []int64
			for s := range got {
				if _, ok := pub[s]; ok {
					sizes = append(sizes, s)
				}
			}
			if len(sizes) != want {
				t.Fatalf("%s: %d sizes compared, want %d", ref, len(sizes), want)
			}
			slices.Sort(sizes)
			for _, s := range sizes {
				was, listed := p5Misses[fmt.Sprintf("%s %d %d", op, n*8, s)]
				checkRatio(t, fmt.Sprintf("%s %dx8 %d B, h100-efa: simulated %.1f us / measured %.1f us", op, n, s, got[s], pub[s]),
					got[s]/pub[s], 0.8, 1.2, was, listed)
			}
		}
	}
}

// Packet and fluid on one DGX A100 with preset a100 (issue 30): an LL
// ring's step on a channel is 8 KiB on the wire (4 KiB payload), one
// packet at flowsim-packet's default 9000-byte payload, so a GPU's
// NVLink port sent the 16 channels' steps one after another: the first
// channel's ended after its own bytes, its next step's hop latency ran
// while the others' bytes still went, and the channels drifted apart and
// overlapped their latencies with each other's bytes. Fluid shares the
// port among them, which keeps them in step: each ring step costs the hop
// latency plus all channels' bytes. So packet was 0.94 and 0.89 of fluid
// at 256 and 512 KiB (0.86 and 0.73 without the transport). NVLink carries
// at most 256 data bytes a request, so the channels' writes interleave on
// it as fluid shares it: flowsim-packet now sends a transport step over
// NVLink alone in about 16 cells (pkg/packet nvcell.go), and the backends
// agree within 5% at every size from 64 KiB to 16 MiB, LL and LL128, at
// the default payload (within 2% when written, 0.981 at 16 MiB the
// farthest; from 32 MiB to 8 GiB within 1.2%).
func TestLLNVLinkPacketGranularity(t *testing.T) {
	t.Parallel()
	a100 := []string{"--transport", "preset=a100", "--transport", "gpus-per-process=8"}
	fl := sweepGPU(t, "A100", "allreduce", 8, "64KiB:16MiB:2", []string{"flowsim-analytical", "--model", "fluid"}, a100...)
	pk := sweepGPU(t, "A100", "allreduce", 8, "64KiB:16MiB:2", []string{"flowsim-packet"}, a100...)
	if len(fl) != 9 || len(pk) != 9 {
		t.Fatalf("%d and %d sizes, want 9", len(fl), len(pk))
	}
	for s, us := range fl {
		if r := pk[s] / us; r < 0.95 || r > 1.05 {
			t.Errorf("DGX A100 allreduce %d B: packet %.2f us, fluid %.2f us (%.3f), want within 5%%", s, pk[s], us, r)
		}
	}
}

// p5AllToAllMisses are, by server count, the sizes of the 2, 4 and 8 x 8
// p5 AllToAll (NCCL 2.28.7, aws-p5-{2,4,8}x8h100-efa_alltoall.csv) that
// h100-efa's fluid run, with the run's NCCL_P2P_NET_CHUNKSIZE, does not
// bring within 20% of measured, with their ratio when listed (issue 30).
// All sizes (32 MiB-2 GiB): 0.68 0.82 0.82 0.84 0.84 0.85 0.86 (2 x 8),
// 0.71 0.78 0.90 0.88 0.85 0.85 0.85 (4 x 8), 0.62 0.69 0.68 0.82 0.84
// 0.87 0.89 (8 x 8). Each connection now starts when its proxies have
// posted the ops NCCL's round order puts before it (a2aPosts: 2.4 us an
// op, up to 92 of a 4 x 8 rail GPU's 96 ops), which the NIC's bytes hide
// only in part: that moved 32-128 MiB up by 0.01-0.09 (2 x 8 64 and 128
// MiB into the band; they were 0.59 0.76 0.79 (2 x 8), 0.64 0.73 (4 x
// 8) and 0.59 0.67 0.67 (8 x 8) before). P2PPlan now gives NCCL 2.28.7's channels per peer
// (paths.cc ncclTopoGetNchannels: 2, halved while 2 x nRanks > 4 x
// p2pnChannels, then at least getLocalNetCountByBw, 1 on p5 where
// aws-ofi-nccl's RDMA protocol shows NCCL one 400G device a GPU,
// nccl_ofi_rdma.cpp "port_speed *= max_group_size"): 2, 2 and 1 on 16,
// 32 and 64 ranks, where the model had 4, 2 and 2 (one per 14 GB/s, a
// rule NCCL does not have). That moved 2 x 8 by up to 0.04 and 8 x 8
// 64-256 MiB by 0.01-0.02 down, and 2 x 8 128 MiB out of the band: the
// source-true plan has fewer connections, so fewer proxy rounds.
//
// Two gaps remain, neither explained by a cited mechanism. (1) A fixed
// part: measured less simulated at 32 MiB is about 210 us plus 33 us
// per 8 ranks. (2) A rate: at 1-2 GiB measured moves a GPU's network
// bytes (S x remote / n) at 43.1, 42.1 and 45.3 GB/s, 84-91% of the
// 400G NIC, where the flows go at line rate; as a what-if the NIC at 42
// GB/s (topogen --nic-bw 337Gbps) put the 4 x 8 curve at 0.74 0.88 1.05
// 1.04 1.01 1.00 1.00. What was checked in NCCL 2.28.7 and aws-ofi-nccl
// 1.16.3 and ruled out or left unquantified:
//   - PXN is on for p2p (search.cc ncclTopoGetNetDev, NCCL_P2P_PXN_LEVEL
//     2; aws-ofi-nccl's p5 table, platform-aws.cpp, sets only
//     NCCL_BUFFSIZE, NCCL_P2P_NET_CHUNKSIZE, the NVLS chunks and
//     NCCL_NET_FORCE_FLUSH=0), as the model has it.
//   - Rounds and batches (init.cc ncclP2pSchedule, channel.h
//     ncclP2pChannelBaseForRound): each group of 8 rounds (one remote
//     server) gets its own channel base, 4 groups x 2 parts on 32 ranks
//     and 8 x 1 on 64 fit the 16 p2p channels, so batches do not queue
//     (device.h ncclP2pChannelForPart, base + part: 2 x 8 runs on
//     channels {0,1} and {8,9}, 4 x 8 on {0,1} {8,9} {4,5} {12,13}).
//   - Shared p2p buffers (net.cc: NCCL_SHARED_STEPS 16 slots of
//     p2pChunkSize per (local rank, channel); sendProxyProgress and
//     recvProxyProgress post at most min(NCCL_STEPS, 16 / nsubs) steps a
//     connection): a channel's batch receives from 8 peers of one server
//     through the GPU's own NIC, so 2 steps in flight a receive, not 8.
//     With h100-efa's step (36.5 us of work, 20 us credit RTT) two slots
//     still cover the loop ((36.5 + 20) / 2 < 36.5), and 16-96
//     connections a GPU hold far more than the NIC's bandwidth-delay
//     product: no rate or fill change from it.
//   - One warp a send and one a receive (sendrecv.h RunWorkBatch:
//     nWarpPerWork = 20 warps / 8 works = 2, split 1 + 1; NCCL 2.8's
//     notes: "each warp sending or receiving to a different peer"), each
//     step copied by that warp before the proxy posts it and after it
//     lands. Little's law (Unroll 8 x 16 B x 32 lanes = 4 KiB in flight,
//     ~0.5-0.7 us HBM latency) gives ~6-8 GB/s a warp: a fill of two
//     256 KiB copies, ~75 us, a third of gap (1), and no cap on 16-56
//     connections a GPU. A warp rate would need a measurement no source
//     here gives; fitting it on these sweeps is not allowed.
//   - The proxy's serial posting (96 ops x 2.4 us a rail GPU on 4 x 8):
//     now modelled (a2aPosts); the NIC's bytes (24 MiB at 50 GB/s is
//     503 us) hide most of it. Measured less simulated at 32 MiB is now
//     224, 276 and 433 us on 2, 4 and 8 x 8.
//   - aws-ofi-nccl's striping (nccl_ofi_scheduler.cpp
//     set_schedule_by_threshold, min_stripe_size 128 KiB): a 256 KiB
//     step goes as 2 stripes, 512 KiB as 4, from a round-robin start, so
//     the GPU's 4 EFA rails stay balanced: no rate change.
//   - The proxy's intake (proxy.cc ncclProxyGetPostedOps: at most
//     NCCL_PROXY_APPEND_BATCH_SIZE, 16, op groups a call, one call every
//     NCCL_PROGRESS_APPENDOP_FREQ, 8, progress loops while ops are
//     active): 2 x 8's rail proxy takes its ~16 groups in one call yet
//     has 4 x 8's fill, and nccl-tests' non-blocking loop posts the next
//     iteration's ops while this one runs.
//   - The host (2 x nRanks tasks a group): a non-blocking loop takes the
//     longer of host and GPU time, not their sum, and every sweep's time
//     grows from 32 to 64 MiB (32 x 8: 1696 to 2917 us).
//   - aws-ofi-nccl's receiver-driven RDMA (nccl_ofi_rdma.cpp send: the
//     write waits for the receiver's control message): the receiver's
//     proxy posts it per slot, ahead of the data; with 2 slots a
//     connection and 16-56 connections a GPU the NIC stays saturated
//     unless a slot's loop took ~300 us, 5 x h100-efa's.
//   - Grouped receives (net.cc recvProxyProgress: a sub's receives that
//     share a recvComm go as one irecv of up to the plugin's maxRecvs, 8
//     in NCCL's IB plugin and in aws-ofi-nccl's RDMA protocol,
//     nccl_ofi_net.cpp max_group_receives = NCCL_OFI_MAX_RECVS, and the
//     group posts a step only when every sub has a free slot): under PXN
//     a channel's 8 receives from one server all come from its rail GPU
//     on one shared comm (NCCL_NET_SHARED_COMMS), so they move in
//     lockstep, 2 steps of 8 chunks in flight a group. That couples the
//     peers but leaves 16 MiB in flight a GPU on 2 x 8: holding the NIC
//     at 84% would take a ~400 us loop (h100-efa's is 56.5 us plus the
//     step's wire time), and more servers add channels, hence more in
//     flight, where measured stays at 84-88%. Two slots in the model's
//     pace (max(step cost, (step cost + credit RTT) / 2)) would move
//     nothing either: the rail GPU's proxy round (32 ops on 2 x 8, 77 us
//     on h100-efa, 51 on a100) already exceeds it.
//   - The proxy thread's occupancy per step, serial over all the subs a
//     rail GPU serves (proxy.cc progressOps): the only candidate whose
//     bound is flat in the server count, as measured (a rail GPU posts 2
//     ops a chunk it sends on 2, 4 and 8 x 8). But it needs 6.2 us an op
//     on p5 (512 KiB at 42.3 GB/s) and 3.2 us on NDmv4 (128 KiB at 20.2),
//     2.6 and 2.0 x the presets' p2p-op (2.4, 1.6 us); one multiplier
//     for both (2.3) gives p5 0.90-0.94 and NDmv4 1.15, and no source says
//     how many proxy passes a step costs.
//   - A per-step cost serial on the NIC, read off each system's own ring
//     plateau: NDmv4's AllGather ring moves 23.3 GB/s a NIC (93%, 512 KiB
//     steps), 1.6 us a step, which predicts 77% for its 128 KiB p2p steps
//     (81% measured); on p5 the 4 x 8 AllReduce ring (89%, 1 MiB steps)
//     predicts 80% for 512 KiB steps but the 2 and 4 x 8 AllGather rings
//     (82-83%) 70%, so no one cost fits p5's own rings.
//
// Measured, the two gaps are one shape across the repository's five
// sweeps (with 16 and 32 x 8, ../shared/refs/nccl-tests/published-
// multinode.md): less the network bytes at 42 GB/s, 32 MiB leaves 303,
// 344, 453, 602 and 922 us on 2, 4, 8, 16 and 32 servers, 282 us + 2.6
// us per remote peer within 10 us. 42 GB/s is also what a NIC moves in
// the p5 and Voltage Park (InfiniBand) Ring Simple plateaus (busbw / 8:
// 44.6 and 41.4), which the presets carry as the ring slice's fixed work
// (slice-simple), so on p5 it is neither EFA's nor AllToAll's alone (on
// Azure NDmv4 it is the AllToAll's: its rings move 93-94% of the NIC,
// its AllToAll 81%). As a
// what-if, the NIC at 337 Gbps gives 0.67 0.88 0.92 0.97 0.98 1.00 1.02
// (2 x 8), 0.74 0.86 1.02 1.03 1.00 1.00 1.00 (4 x 8), 0.69 0.78 0.79
// 0.96 1.00 1.03 1.06 (8 x 8); about 200 us more on each AllToAll would
// put every size in the band. Neither term has a mechanism in NCCL
// 2.28.7 or aws-ofi-nccl 1.16.3 to cite, so neither is fitted.
var p5AllToAllMisses = map[int]map[int64]float64{
	2: {32 << 20: 0.68},
	4: {32 << 20: 0.71, 64 << 20: 0.78},
	8: {32 << 20: 0.62, 64 << 20: 0.69, 128 << 20: 0.68},
}

// TestTransportP5AllToAll (issue 30): NCCL's AllToAll under the transport
// (collective P2PPlan, p2pSteps, allToAllPs): each peer's share in parts
// over channels and each part in NCCL_P2P_NET_CHUNKSIZE steps (the p5
// run's 512 KiB, its environment's), every network piece after a step's
// cost, paced by the step cost or the proxy's round over its connections.
// Against the published 2, 4 and 8 x 8 p5 sweeps (aws-p5-{2,4,8}x8h100-
// efa_alltoall.csv) through fluid with h100-efa: every size within 20%
// except p5AllToAllMisses, which it prints (4 x 8 before the transport,
// with the same preset: 0.56 0.69 0.83 0.85 0.84 0.84 0.85). Collective
// granularity's closed form agrees with flow granularity within 5% at
// every size (0.978-0.999 on the three sweeps when written). At 32 MiB
// on 4 x 8 the steps add at least their fill, a network step's cost (18
// us per proxy side and 0.5 us of GPU: 36.5 us), to the run without the
// transport's costs. Without -short, packet is within 5% of fluid on
// the 2 x 8 sweep from 32 to 256 MiB (1.012-1.014 when written). -short
// runs the 4 x 8 sweep only.
func TestTransportP5AllToAll(t *testing.T) {
	t.Parallel()
	fl := []string{"flowsim-analytical", "--model", "fluid"}
	tr := []string{"--transport", "preset=h100-efa"}
	nodes := []int{2, 4, 8}
	if testing.Short() {
		nodes = []int{4}
	}
	for _, n := range nodes {
		ref := fmt.Sprintf("aws-p5-%dx8h100-efa_alltoall.csv", n)
		pub := measuredUs(t, ref)
		flow := sweepBackend(t, "alltoall", n*8, "32MiB:2GiB:2", fl, append(tr, "--granularity", "flow")...)
		coll := sweepBackend(t, "alltoall", n*8, "32MiB:2GiB:2", fl, append(tr, "--granularity", "collective")...)
		if len(flow) != 7 || len(coll) != 7 {
			t.Fatalf("%s: %d flow and %d collective sizes, want 7", ref, len(flow), len(coll))
		}
		if n == 4 {
			bare := sweepBackend(t, "alltoall", 32, "32MiB:32MiB:2", fl)
			if d := flow[32<<20] - bare[32<<20]; d < 36.5 {
				t.Errorf("alltoall 32 MiB: the transport adds %.1f us, less than one network step's cost (36.5 us)", d)
			}
		}
		if n == 2 {
			checkPacketFluid(t, "alltoall 2x8", flow, sweepBackend(t, "alltoall", 16, "32MiB:256MiB:2", []string{"flowsim-packet"}, tr...), 4)
		}
		for _, s := range slices.Sorted(maps.Keys(flow)) {
			m, ok := pub[s]
			if !ok {
				t.Fatalf("%s: %d B: no published row", ref, s)
			}
			if r := coll[s] / flow[s]; r < 0.95 || r > 1.05 {
				t.Errorf("alltoall %dx8 %d B: collective %.1f us, flow %.1f us (%.3f), want within 5%%", n, s, coll[s], flow[s], r)
			}
			was, listed := p5AllToAllMisses[n][s]
			what := fmt.Sprintf("alltoall %dx8 %d B, h100-efa: simulated %.1f us / measured %.1f us", n, s, flow[s], m)
			if !listed {
				t.Logf("%s: %.3f", what, flow[s]/m)
			}
			checkRatio(t, what, flow[s]/m, 0.8, 1.2, was, listed)
		}
	}
}

// dgxH100PacketGaps are the sizes of the one-server H100 sweep (h100-ib,
// gpus-per-process=8) where packet is more than 5% from fluid, with
// packet / fluid when listed (issue 30). None now: NVLS at 256 and 512
// MiB were 0.92 while an NVLS chunk's GPU work (nvls-op) was a gap in
// series after the previous chunk's bytes. Fluid kept the 16 channels
// in phase, so every channel's gap left the GPU's NVLink port idle at
// once and each chunk cost the gap plus all channels' bytes; packet's
// ports served the channels' transfers in turn, the channels drifted
// apart and hid each other's gaps. The kernel's scatter, reduce and
// gather warps work on different slots at once, so the work overlaps the
// bytes: it now paces the channel's chunks (nvls-op plus nvls-bw,
// collective nvlsWorkPs), which in phase or apart costs the same, and
// the backends agree within 1.2% at every size.
var dgxH100PacketGaps = map[int64]float64{}

// Packet and fluid on one HGX H100 under h100-ib with gpus-per-process=8
// (TestTransportDGXH100Band's setting), AllReduce from 1 MiB to 1 GiB:
// within 5% except dgxH100PacketGaps, which it prints (0.997-1.000 from
// 1 to 512 MiB and 1.012 at 1 GiB when written; 8 B-512 KiB, the launch
// floor, and 1-8 GiB agree as well). Collective granularity's closed form
// of the same pace (collective transportTerms) is within 5% of flow
// granularity through fluid at every size (0.955-0.984 when written; it
// was 1.064 at 32 MiB with the gap in series). -short runs 1-128 MiB.
func TestTransportDGXH100PacketFluid(t *testing.T) {
	t.Parallel()
	tr := []string{"--transport", "preset=h100-ib", "--transport", "gpus-per-process=8"}
	sweep, want := "1MiB:1GiB:2", 11
	if testing.Short() {
		sweep, want = "1MiB:128MiB:2", 8 // 0.6 s of packet CPU, not 2
	}
	fl := sweepBackend(t, "allreduce", 8, sweep, []string{"flowsim-analytical", "--model", "fluid"}, tr...)
	pk := sweepBackend(t, "allreduce", 8, sweep, []string{"flowsim-packet"}, tr...)
	if len(fl) != want || len(pk) != want {
		t.Fatalf("%d and %d sizes, want %d", len(fl), len(pk), want)
	}
	coll := sweepBackend(t, "allreduce", 8, sweep, []string{"flowsim-analytical", "--model", "fluid"}, append(tr, "--granularity", "collective")...)
	if len(coll) != want {
		t.Fatalf("%d collective sizes, want %d", len(coll), want)
	}
	for s, us := range fl {
		was, listed := dgxH100PacketGaps[s]
		checkRatio(t, fmt.Sprintf("DGX H100 allreduce %d B: packet %.1f us / fluid %.1f us", s, pk[s], us), pk[s]/us, 0.95, 1.05, was, listed)
		if r := coll[s] / us; r < 0.95 || r > 1.05 {
			t.Errorf("DGX H100 allreduce %d B: collective %.1f us, flow %.1f us (%.3f), want within 5%%", s, coll[s], us, r)
		}
	}
}
