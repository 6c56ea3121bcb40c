package tests

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/stats"
)

// A100 over EFA (issue 30): two published AllReduce sweeps of 2 x
// p4de.24xlarge (16 A100 80GB, 4 x 100G EFA a server). The first ran with
// aws-ofi-nccl 1.5.0aws (its log), whose platform code sets
// NCCL_PROTO=simple on p4d/p4de ("Setting NCCL_PROTO to \"simple\"": its
// src/platform-aws.c, and the log of a p4d run of the time,
// awsome-distributed-training commit ca07522d,
// 3.test_cases/0.nccl-tests/slurm-104.out, NCCL 2.18.3, which also shows
// "8 coll channels"); the second names neither its NCCL nor its plugin,
// and its flat 161 us from 8 B to 1 KiB matches the first's Simple tree. The AWS ParallelCluster workshop's run
// (NCCL 2.17.1, NCCL_PROTO=simple set by hand, 8 B-1 GiB,
// aws-p4de-2x8a100-efa_allreduce_simple_nccl-2.17.csv) calibrates
// a100-efa; awsome-distributed-training's README run (8 B-2 GiB, NCCL
// version not printed, aws-p4de-2x8a100-efa_allreduce.csv) is held out.
//
// What a100-efa carries and where each part comes from:
//
//   - the network's per-step costs are h100-efa's (EFA, fitted on AWS p5):
//     18 us per proxy side. On the calibration sweep 14, 18 and 22 us
//     give 0.90, 0.99 and 1.08 at 8 B (the tree's latency) and 0.87,
//     1.08 and 1.29 at 16 MiB; 18 is kept.
//
//   - the tree Simple chunk of NCCL 2.8-2.19 (tree-chunk=depth; enqueue.cc
//     computeColl): 32-128 KiB chunks by the tree's depth (8 here), so a
//     16 MiB AllReduce is 32 network steps a channel. With NCCL 2.20's
//     one-step chunk (512 KiB) the sweep is 0.50-0.72 of measured from 1
//     to 64 MiB; with the depth rule 0.81-1.08.
//
//   - NVLink's costs are a100's (fitted on one OCI A100 server).
//
//   - NCCL's 2-server tree graph (tree-graph=nccl): its search raises the
//     tree's intra-server bandwidth up to twice the inter-server one
//     (search.cc "increase bwIntra for trees (2 nodes or collnet)",
//     v2.17.1 l. 876), and its model, which takes a 2-server tree's
//     bandwidth from it, then chooses the tree at every size, as the runs
//     did: their plateau (78 GB/s busbw) is above what a ring moves
//     through 50 GB/s of NICs a server (TestP4deA100Plateau). With the
//     ring's graph for the tree, the model took Ring Simple from 4 MiB
//     (1.5x of measured at 512 MiB-1 GiB).
//
// The channel count is capped (--max-channels 8, as NCCL_MAX_NCHANNELS
// would: the p4d log's 8 are NCCL's graph on p4d's 4 NICs of 12.5 GB/s,
// doubled at run time; topogen's one NIC a GPU, 8 of 6.25 GB/s, gives 8
// doubled to 16), so that below 256 KiB NCCL's thread thresholds still
// run fewer (1 channel at 32 KiB; with --channels 8 every size ran on 8
// and 32-128 KiB were 0.78-0.79), and the protocol is set (--proto
// simple, the plugin's).
//
// p4deMisses are the sizes a100-efa does not bring within 20% (keyed
// "sweep size", with their ratio when listed):
//   - 256 and 512 KiB (0.73-0.79 on both sweeps; 32-128 KiB are 0.80-0.84):
//     measured, the time jumps 30 us between 16 and 32 KiB (190 -> 220
//     us) and stays flat to 256 KiB, then climbs to 257 us at 512 KiB;
//     the model's tree moves those sizes in one network step a channel
//     (8 channels from 256 KiB) and stays at 185-190 us. A size-dependent
//     cost of EFA's messages would fit (libfabric's EFA provider sends small
//     messages eagerly and larger ones by a read after a handshake), but
//     no source here gives its threshold for aws-ofi-nccl 1.5's SENDRECV
//     protocol, so it is not modelled.
//   - 128 MiB on the calibration sweep (0.77; the held-out one 0.80):
//     measured, 64 -> 128 MiB adds 1347 us and 128 -> 256 MiB 3319 us
//     (50 and 40 GB/s for the added bytes), the model a steady 46-49 GB/s
//     (chunk 256 KiB from 128 MiB).
//   - 4 MiB on the held-out sweep (0.79; the calibration sweep 0.81): the
//     depth rule gives 2 and 4 MiB the same 8 steps a channel (32 and 64
//     KiB chunks), so the model adds 12 us from 2 to 4 MiB where both
//     runs add 135-145 us: measured, a step's time grows with its bytes
//     (about 17 us per 32 KiB more at these sizes), which the model's
//     pace, 36.5 us a network step whatever its bytes up to a slot, does
//     not.
//   - the NCCL 2.23.4 run from 32 KiB to 128 MiB (0.40-0.79): it is far
//     slower than both NCCL 2.17-era runs at 512 KiB-64 MiB (4 MiB: 925
//     us against 523 and 534) and as fast at the small sizes (8 B: 180 us)
//     and the plateau (1 GiB: 26.4 ms). The mechanism is not identified:
//     NCCL 2.20's one-step tree chunk makes the model faster there, not
//     slower (with the depth rule it is still 0.46-0.67 at 512 KiB-4 MiB);
//     NCCL 2.23 weighing the plugin's 75 us and choosing rings at some of
//     these sizes, or aws-ofi-nccl 1.13's SENDRECV path, are candidates the
//     printed log (cut) does not settle.
var p4deMisses = map[string]float64{
	"pcluster 262144":    0.79,
	"pcluster 524288":    0.74,
	"pcluster 134217728": 0.77,
	"awsome 262144":      0.78,
	"awsome 524288":      0.73,
	"awsome 4194304":     0.79,
	"dlami 32768":        0.79,
	"dlami 65536":        0.78,
	"dlami 131072":       0.78,
	"dlami 262144":       0.74,
	"dlami 524288":       0.64,
	"dlami 1048576":      0.54,
	"dlami 2097152":      0.44,
	"dlami 4194304":      0.40,
	"dlami 8388608":      0.40,
	"dlami 16777216":     0.48,
	"dlami 33554432":     0.59,
	"dlami 67108864":     0.67,
	"dlami 134217728":    0.76,
}

// p4deSweep runs a100-efa's AllReduce sweep (8 B to top) on 2 x 8 A100s
// with 8 NICs of 50 Gb/s (p4de's 400 Gb/s a server) through fluid, NCCL's
// model choosing, and returns simulated / measured by size for ref's
// sizes (every one of them a tree).
func p4deSweep(t *testing.T, ref, top string, transport ...string) map[int64]float64 {
	t.Helper()
	pub := measuredUs(t, ref)
	topo := mustRun(t, mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16", "--gpu-type", "A100", "--nic-bw", "50Gbps"), "ncclpath")
	args := []string{"--op", "allreduce", "--group", "dp", "--tp", "1", "--sweep", "8:" + top + ":2",
		"--transport", "preset=a100-efa", "--proto", "simple", "--max-channels", "8"}
	for _, kv := range transport {
		args = append(args, "--transport", kv)
	}
	return fluidOverMeasured(t, mustRun(t, topo, "simccl-decompose", args...), pub)
}

// checkP4de asserts every size of one p4de sweep within 20% of measured
// but the listed misses (checkRatio).
func checkP4de(t *testing.T, name, ref, top string, want int, transport ...string) {
	t.Helper()
	got := p4deSweep(t, ref, top, transport...)
	if len(got) != want {
		t.Fatalf("%s: %d sizes compared, want %d", ref, len(got), want)
	}
	checkBand(t, got, p4deMisses, name, "p4de "+name, "a100-efa")
}

// checkBand asserts each size's simulated / measured in got within 20%,
// but for the known misses listed in misses under "name size"
// (checkRatio); what and preset name the case in messages.
func checkBand(t *testing.T, got map[int64]float64, misses map[string]float64, name, what, preset string) {
	t.Helper()
	for _, s := range slices.Sorted(maps.Keys(got)) {
		was, listed := misses[fmt.Sprintf("%s %d", name, s)]
		checkRatio(t, fmt.Sprintf("%s %d B, %s: simulated / measured", what, s, preset), got[s], 0.8, 1.2, was, listed)
	}
}

// TestTransportP4deBand: the calibration sweep (28 sizes, 8 B-1 GiB).
func TestTransportP4deBand(t *testing.T) {
	t.Parallel()
	checkP4de(t, "pcluster", "aws-p4de-2x8a100-efa_allreduce_simple_nccl-2.17.csv", "1GiB", 28)
}

// TestTransportP4deHeldOut: the held-out sweep (29 sizes, 8 B-2 GiB),
// which no a100-efa value was chosen on; and a later NCCL's run on the
// same network (p4d: A100 40GB, 4 x 100G EFA; AWS DLAMI guide, NCCL
// 2.23.4 and aws-ofi-nccl 1.13.2, aws-p4d-2x8a100-efa_allreduce_nccl-
// 2.23.csv), with NCCL 2.20's one-step tree chunk (tree-chunk=step).
func TestTransportP4deHeldOut(t *testing.T) {
	t.Parallel()
	checkP4de(t, "awsome", "aws-p4de-2x8a100-efa_allreduce.csv", "2GiB", 29)
	checkP4de(t, "dlami", "aws-p4d-2x8a100-efa_allreduce_nccl-2.23.csv", "1GiB", 28, "tree-chunk=step")
}

// ociRoCE is TestTransportOCIA100RoCE's calibration pipeline: two OCI
// BM.GPU4.8 servers as NCCL 2.19 sees them (examples/servers/
// oci-bm-gpu4.8.xml: 16 NICs of 100 Gb/s a server, two a GPU, whose
// 16-channel graphs NCCL runs on 32 channels) with NCCL's 2-server tree
// graph (tree-graph=nccl, under which its model takes the tree from 16
// MiB, as the run did) and NCCL 2.19's tree Simple latency (tree-lat=
// legacy, under which it keeps the Tree LL128 to 512 MiB and takes the
// Tree Simple from 1 GiB, as the run's busbw says: 156 GB/s at 512 MiB,
// as LL128's 153-165 at 64-256 MiB, 219 at 1 GiB), the stream of an
// AllReduce sweep under a100-roce, NCCL's model choosing (nccl-tests'
// default).
func ociRoCE(t *testing.T, sweep string) []byte {
	t.Helper()
	return mustRun(t, ociTwoPorts(t), "simccl-decompose", "--op", "allreduce", "--group", "dp", "--tp", "1", "--sweep", sweep,
		"--transport", "preset=a100-roce,tree-graph=nccl,tree-lat=legacy")
}

// ociTwoPorts is two OCI BM.GPU4.8 servers through ncclpath with OCI's
// server XML (ociRoCE).
func ociTwoPorts(t *testing.T) []byte {
	t.Helper()
	fabric := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16", "--gpu-type", "A100", "--nic-bw", "200Gbps")
	return mustRun(t, fabric, "ncclpath", "--server-xml", "examples/servers/oci-bm-gpu4.8.xml")
}

// ociFused is the same servers as NCCL 2.24 and later see them: NIC
// fusion (NCCL 2.24.3, graph/topo.cc: NCCL_NET_MERGE_LEVEL defaults to
// PATH_PORT, so the two ports of one card become one virtual NIC) makes
// the 16 ports 8 NICs of 200 Gb/s, topogen's one NIC a GPU, whose ring
// graph (8 x 24 GB/s) NCCL's model keeps at 1-8 GiB, as the NCCL 2.25.1
// and 2.29.3 runs' busbw (185-190 GB/s, under the 200 a ring moves
// through 16 x 100G) says they ran.
func ociFused(t *testing.T, sweep string) []byte {
	t.Helper()
	topo := mustRun(t, mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16", "--gpu-type", "A100", "--nic-bw", "200Gbps"), "ncclpath")
	return mustRun(t, topo, "simccl-decompose", "--op", "allreduce", "--group", "dp", "--tp", "1", "--sweep", sweep, "--transport", "preset=a100-roce")
}

// TestTransportOCIA100RoCE: preset a100-roce across two OCI BM.GPU4.8
// servers (2 x 8 A100 40GB, 16 x 100G RoCE a server: oci-2x8a100-roce_*)
// through fluid: the NCCL 2.19 sweep (8 B-8 GiB), which fitted a100's
// tree steps (tree-op, tree-bw, tree-ll-bw on its 8 B-256 MiB trees) and
// a100-roce's want of adaptive routing, on OCI's server as NCCL 2.19 saw
// it (ociRoCE), every size within 20% (0.87-1.13 at 8 B-512 MiB,
// 0.85-0.93 at 1-8 GiB when fitted); and two held-out runs, both rings
// on fused ports (ociFused): NCCL 2.25.1 on BM.GPU4.8 (1-4 GiB:
// 0.98-0.99) and NCCL 2.29.3 on BM.GPU.B4.8 (the same A100 40GB and 16 x
// 100G RoCE; 1-8 GiB: 0.97-0.98). Before the fit, with h100-ib's network
// costs on topogen's one NIC a GPU, 19 of the 2.19 sweep's 31 sizes
// missed (its tree LL steps from 256 B to 128 KiB 0.51-0.73 of measured,
// a network step's pieces each paying only their share of its cost).
// With the tree LL128 block rate fitted on one NIC a GPU (16 blocks where
// NCCL ran 32: 20 GB/s), 8-256 MiB were 0.72-0.82 here; with the tuner's
// NCCL 2.23-2.27 tree Simple latency (tree-lat=current) 512 MiB is a Tree
// Simple at 0.61, where NCCL 2.19 ran the Tree LL128.
func TestTransportOCIA100RoCE(t *testing.T) {
	t.Parallel()
	two, fused := ociRoCE(t, "8:8GiB:2"), ociFused(t, "1GiB:8GiB:2")
	for _, run := range []struct {
		name, ref string
		st        []byte
		want      int
	}{{"nccl-2.19", "oci-2x8a100-roce_allreduce_nccl-2.19.csv", two, 31}, {"nccl-2.25", "oci-2x8a100-roce_allreduce_nccl-2.25.csv", fused, 3},
		{"b4-nccl-2.29", "oci-2x8a100b4-roce_allreduce_nccl-2.29.csv", fused, 4}} {
		got := fluidOverMeasured(t, run.st, measuredUs(t, run.ref))
		if len(got) != run.want {
			t.Fatalf("%s: %d sizes compared, want %d", run.ref, len(got), run.want)
		}
		checkBand(t, got, nil, run.name, "OCI 2x8 A100 "+run.name, "a100-roce")
	}
}

// TestTransportOCITwoPortsTree: NCCL's choice on OCI's own server
// (examples/servers/oci-bm-gpu4.8.xml, 16 x 100G ports, two a GPU) with
// NCCL's 2-server tree graph: the tree from 16 MiB to 8 GiB, on NCCL
// 2.19's 32 runtime channels (connect.cc doubles the 16 of the graph), as
// the run's busbw says it was at 4-8 GiB (219-238 GB/s, above the 200 a
// ring carries through 16 x 100G); with NCCL 2.19's tree Simple latency
// (tree-lat=legacy) LL128 to 512 MiB and Simple from 1 GiB, by hand in
// NCCL 2.19's terms 5.24 against 5.31 ms at 512 MiB (48.5 us plus 512 MiB
// at 103.5 GB/s; 448 us plus 512 MiB at 110.4) and 10.42 against 10.17
// at 1 GiB, where the tuner's own latency (92.4 us) takes Simple from 512
// MiB. On topogen's default server (one 200G NIC a GPU) the same
// transport keeps the ring there. The graphs and bandwidths behind it are
// counted by hand in pkg/nccl's TestModelFromPathsOCITwoPortsAGPU.
// TestTransportOCIA100RoCE calibrates on this server (ociRoCE).
func TestTransportOCITwoPortsTree(t *testing.T) {
	t.Parallel()
	fabric := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16", "--gpu-type", "A100", "--nic-bw", "200Gbps")
	xml := []string{"--server-xml", "examples/servers/oci-bm-gpu4.8.xml"}
	for _, c := range []struct {
		ncclpath      []string
		lat, algo, ch string
		simpleFrom    int64 // the first size run as Simple (0: any protocol)
	}{{xml, "current", "tree", "32", 512 << 20}, {xml, "legacy", "tree", "32", 1 << 30}, {nil, "current", "ring", "16", 0}} {
		sum := string(mustRun(t, mustRun(t, fabric, "ncclpath", c.ncclpath...), "simccl-decompose", "--op", "allreduce", "--group", "dp", "--tp", "1",
			"--sweep", "16MiB:8GiB:2", "--transport", "preset=a100-roce,tree-graph=nccl,tree-lat="+c.lat, "--summary"))
		rows, size := 0, int64(16<<20)
		for _, line := range strings.Split(sum, "\n") {
			f := strings.Fields(line)
			if len(f) < 11 || f[0] != "allreduce" || f[2] != "allreduce" {
				continue
			}
			rows++
			if f[8] != c.algo || f[10] != c.ch {
				t.Errorf("ncclpath %v, tree-lat=%s, %s AllReduce: %s on %s channels, want %s on %s", c.ncclpath, c.lat, f[1], f[8], f[10], c.algo, c.ch)
			}
			if want := map[bool]string{false: "ll128", true: "simple"}[size >= c.simpleFrom]; c.simpleFrom > 0 && f[9] != want {
				t.Errorf("ncclpath %v, tree-lat=%s, %s AllReduce: %s, want %s", c.ncclpath, c.lat, f[1], f[9], want)
			}
			size *= 2
		}
		if rows != 10 {
			t.Fatalf("ncclpath %v: %d sizes in the summary, want 10:\n%s", c.ncclpath, rows, sum)
		}
	}
}

// TestTransportOCIRoCEPacketFluid: packet and fluid within 5% on
// a100-roce's calibration sweep, on OCI's two-port server (1.000-1.012 at
// every size from 8 B to 8 GiB when written, the Tree Simple from 512 MiB
// the farthest; 0.961-1.012 on the one-NIC server, its first LL128 ring
// the farthest). -short runs 1, 8 and 64 MiB; the whole sweep takes about
// 36 s of packet CPU.
func TestTransportOCIRoCEPacketFluid(t *testing.T) {
	t.Parallel()
	sweep, want := "8:8GiB:2", 31
	if testing.Short() {
		sweep, want = "1MiB:64MiB:8", 3
	}
	st := ociRoCE(t, sweep)
	fl := spanTimes(t, st, "flowsim-analytical", "--model", "fluid")
	if len(fl) != want {
		t.Fatalf("fluid ran %d sizes, want %d", len(fl), want)
	}
	checkPacketFluid(t, "OCI 2x8 A100 a100-roce", fl, spanTimes(t, st, "flowsim-packet"), want)
}

// TestTransportP4deCollFlow: collective granularity's closed form against
// flow granularity on the calibration sweep's sizes, both through fluid,
// within the 5% at every size. The tree Simple AllReduce is timed
// by treePs, the pieces' pipeline the flows make: each hop's first piece
// its latency and step cost, later ones the longer of their pace and
// their bytes at the links' rates, and while the first piece climbs its
// server's chain, the later pieces of the channels whose chains start on
// the rails before pile onto the GPU's NVLink (chainPile). 0.992-1.001
// when written (1.000 to 256 KiB, 0.998-1.001 at 512 KiB-8 MiB, 0.992-0.997
// from 16 MiB; 0.970-0.98 from 128 MiB without the pile-up). It took
// NCCL's model time plus the transport's fill before, 0.92-1.13: the
// model's tree bandwidth (0.92 of the graph's, tuning.cc) where the flows
// move at the NICs' rate, and a one-channel tree's fill from the model's
// latency terms. With the ring's graph for the tree (tree-graph=ring) the
// model's 2-server tree had half that bandwidth and collective granularity
// was 1.7-2.2x of flow from 32 MiB.
func TestTransportP4deCollFlow(t *testing.T) {
	t.Parallel()
	topo := mustRun(t, mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16", "--gpu-type", "A100", "--nic-bw", "50Gbps"), "ncclpath")
	checkCollFlow(t, topo, 28, "--sweep", "8:1GiB:2", "--transport", "preset=a100-efa", "--proto", "simple", "--max-channels", "8")
}

// checkCollFlow runs an AllReduce sweep (args) at collective and flow
// granularity through fluid and holds their times within the 5%
// at each of its want sizes.
func checkCollFlow(t *testing.T, topo []byte, want int, args ...string) {
	t.Helper()
	at := func(gran string) map[int64]float64 {
		st := mustRun(t, topo, "simccl-decompose", append([]string{"--op", "allreduce", "--group", "dp", "--tp", "1", "--granularity", gran}, args...)...)
		first, last, size := collSpansSizes(t, mustRun(t, st, "flowsim-analytical", "--model", "fluid"))
		out := map[int64]float64{}
		for id, f := range first {
			out[size[id]] = float64(last[id] - f)
		}
		return out
	}
	flow, coll := at("flow"), at("collective")
	if len(flow) != want || len(coll) != want {
		t.Fatalf("%d and %d sizes, want %d", len(flow), len(coll), want)
	}
	for _, s := range slices.Sorted(maps.Keys(flow)) {
		f := flow[s]
		t.Logf("%d B: collective %.1f us, flow %.1f us, %.3f", s, coll[s]/1e3, f/1e3, coll[s]/f)
		if r := coll[s] / f; r < 0.95 || r > 1.05 {
			t.Errorf("%d B: collective / flow granularity %.3f, outside [0.95, 1.05]", s, r)
		}
	}
}

// TestTransportOCICollFlow: collective against flow granularity on
// TestTransportOCIA100RoCE's pipelines and sizes (8 B-8 GiB, NCCL's
// model choosing tree LL, LL128 or ring), within the 5% at every
// size: on the two-port server (tree LL, LL128, Simple on 32 channels)
// 0.996-1.012 when the tree steps were fitted there; on the one-NIC one
// 0.991-1.017 under a100-roce when written (1.000-1.006 on the trees,
// whose LL and LL128 steps treePs paces as the flows do; 0.991-1.017 on
// the rings); 0.988-1.032 under a100 before its tree steps.
// NVLink is the busiest link of its trees, and treePs held its bytes in
// series with all the first piece's latencies; the flows' rotated chains
// fill it meanwhile, and it was 1.21 at 8 MiB and 1.04-1.06 at 128 KiB-4
// MiB (linkBusy.bound).
func TestTransportOCICollFlow(t *testing.T) {
	t.Parallel()
	checkCollFlow(t, ociTwoPorts(t), 31, "--sweep", "8:8GiB:2", "--transport", "preset=a100-roce,tree-graph=nccl,tree-lat=legacy")
	one := mustRun(t, mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16", "--gpu-type", "A100", "--nic-bw", "200Gbps"), "ncclpath")
	checkCollFlow(t, one, 31, "--sweep", "8:8GiB:2", "--transport", "preset=a100-roce")
}

// TestTransportP4dePacketFluid: packet and fluid within 5% on the p4de
// calibration sweep's sizes under a100-efa (1.001-1.017 at every size
// from 8 B to 1 GiB when written: the tree's network steps are paced by
// the same step cost in both). -short runs 1, 8 and 64 MiB; the whole
// sweep takes about 4 s of packet CPU.
func TestTransportP4dePacketFluid(t *testing.T) {
	t.Parallel()
	sweep, want := "8:1GiB:2", 28
	if testing.Short() {
		sweep, want = "1MiB:64MiB:8", 3
	}
	topo := mustRun(t, mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16", "--gpu-type", "A100", "--nic-bw", "50Gbps"), "ncclpath")
	st := mustRun(t, topo, "simccl-decompose", "--op", "allreduce", "--group", "dp", "--tp", "1", "--sweep", sweep,
		"--transport", "preset=a100-efa", "--proto", "simple", "--max-channels", "8")
	times := func(backend ...string) map[int64]int64 {
		first, last, size := collSpansSizes(t, mustRun(t, st, backend[0], backend[1:]...))
		out := map[int64]int64{}
		for id, f := range first {
			out[size[id]] = last[id] - f
		}
		return out
	}
	fl, pk := times("flowsim-analytical", "--model", "fluid"), times("flowsim-packet")
	if len(fl) != want || len(pk) != want {
		t.Fatalf("%d and %d sizes, want %d", len(fl), len(pk), want)
	}
	for s, f := range fl {
		if r := float64(pk[s]) / float64(f); r < 0.95 || r > 1.05 {
			t.Errorf("%d B: packet / fluid %.3f, want within 5%%", s, r)
		}
	}
}

// ndmv4Misses are the NDmv4 sizes preset a100 does not bring within
// 20%, keyed "op size", with their ratio when listed:
//   - AllGather 1 KiB (1.32): a 16-rank Ring LL of 15 steps; the run
//     took 33.7 us, 2.2 us a step, under CUDA graphs. It was 1.59 while
//     every NVLink hop also paid the network overhead NCCL's model puts
//     on a multi-server ring's steps (getNetOverhead, "Network post
//     overhead": 2 us on AMD), the proxy's posts the transport prices
//     itself (ring-op's proxy round, the step costs), so hops now keep
//     NVLink's own latency (Tuner.HopLatencyAt). What is left is not
//     traced to a mechanism.
var ndmv4Misses = map[string]float64{
	"allgather 1024": 1.32,
}

// TestTransportNDmv4A100HeldOut: preset a100 across two Azure NDmv4 VMs
// (8 A100 80GB, one 200G HDR InfiniBand NIC a GPU, AMD EPYC 7V12 hosts;
// NCCL 2.17.1, the mscclpp performance page: azure-ndmv4-2x8a100-ib_*),
// NCCL's model choosing, through fluid. The page gives busbw at 1 and 4
// GiB (the measured time here is derived from it: size / busbw x
// nccl-tests' factor) and a latency at 1 KiB. No a100 value was fitted
// on it (though the AllToAll's posting order, a2aPosts, was found on
// its 1 KiB AllToAll miss): its tree steps were fitted on OCI's RoCE sweep
// (TestTransportOCIA100RoCE), and over InfiniBand a100 keeps adaptive
// routing, which moves none of these sizes. AllReduce within 20% at all
// three (1.19, 0.96, 0.98 when written; 1 KiB was 0.77 with h100-ib's
// tree steps, whose pieces each paid only their share of a network
// step; it sits near the band's top: the run launched through CUDA
// graphs, -G 1, and OCI's RoCE run, without, took 42.0 us there against
// NDmv4's 35.9); AllGather 0.94 and 0.97 at 1 and 4 GiB, 1 KiB listed
// (ndmv4Misses, 1.32). AllToAll (nccl-tests' busbw factor 15/16; NCCL runs it
// as grouped sends and receives with PXN, P2PPlan's 2 channels a peer
// and NCCL's 128 KiB NCCL_P2P_NET_CHUNKSIZE, which 2.17.1 also has):
// 1.07 at 1 KiB, where every rail GPU's proxy posts up to 14 of its 16 ops of 1.6 us
// in NCCL's round order before a connection starts (a2aPosts; 0.62
// with every connection starting at once); 0.82 at 1 and 4 GiB, where
// the run moved a GPU's remote half at 20.2 GB/s, 81% of its 200G NIC,
// and the flows go at line rate, the same gap as p5's AllToAll plateau
// (84-91%, p5AllToAllMisses), with no mechanism found for either. Here
// the loss is the AllToAll's own: the same run's AllReduce and AllGather
// rings move 23.5 and 23.3 GB/s a NIC (busbw / 8 at 4 GiB, 94% and 93%).
func TestTransportNDmv4A100HeldOut(t *testing.T) {
	t.Parallel()
	topo := mustRun(t, mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16", "--gpu-type", "A100", "--nic-bw", "200Gbps"), "ncclpath")
	for _, c := range []struct {
		op     string
		factor float64 // nccl-tests' busbw / algbw on 16 ranks
	}{{"allreduce", 2 * 15.0 / 16}, {"allgather", 15.0 / 16}, {"alltoall", 15.0 / 16}} {
		ref := "azure-ndmv4-2x8a100-ib_" + c.op + "_nccl-2.17.csv"
		sim := map[int64]float64{}
		for _, sweep := range []string{"1KiB:1KiB:2", "1GiB:4GiB:4"} {
			st := mustRun(t, topo, "simccl-decompose", "--op", c.op, "--group", "dp", "--tp", "1", "--sweep", sweep, "--transport", "preset=a100")
			first, last, size := collSpansSizes(t, mustRun(t, st, "flowsim-analytical", "--model", "fluid"))
			for id, f := range first {
				sim[size[id]] = float64(last[id]-f) / 1e3
			}
		}
		rows, err := stats.ReadReference(filepath.Join("..", "examples", "reference", ref))
		if err != nil {
			t.Fatal(err)
		}
		if len(rows.Rows) != 3 {
			t.Fatalf("%s: %d rows, want 3", ref, len(rows.Rows))
		}
		for _, r := range rows.Rows {
			us := r.TimeUs
			if us == 0 {
				us = c.factor * float64(r.SizeBytes) / (r.BusbwGBps * 1e3) // derived from busbw
			}
			got, ok := sim[r.SizeBytes]
			if !ok {
				t.Fatalf("%s: %d B not simulated", ref, r.SizeBytes)
			}
			t.Logf("NDmv4 %s %d B: %.3f", c.op, r.SizeBytes, got/us)
			was, listed := ndmv4Misses[fmt.Sprintf("%s %d", c.op, r.SizeBytes)]
			checkRatio(t, fmt.Sprintf("NDmv4 2x8 A100 %s %d B, a100: simulated %.1f us / measured %.1f us", c.op, r.SizeBytes, got, us), got/us, 0.8, 1.2, was, listed)
		}
	}
}
