package tests

import (
	"fmt"
	"maps"
	"slices"
	"testing"
)

// A100 across servers over InfiniBand (issue 30): NVIDIA DeepOps' two
// published DGX A100 AllReduce sweeps, 8 A100 SXM4 and 8 ConnectX-6 HDR
// HCAs of 200 Gb/s a server, one a GPU (topogen's 200G NIC a GPU), AMD
// EPYC 7742 hosts; the default transport (preset auto: a100) through
// fluid. The 2 x 8 run (NCCL 2.11.4, NCCL_ALGO=RING, 8 B-4 GiB,
// dgx-a100-2x8-ib_allreduce_ring_nccl-2.11.csv) is the only A100 sweep
// here with rings across servers at every size, LL, LL128 and Simple: it
// fitted a100's ll128-tail (0, the step's copy overlapping its wire
// bytes: 8-64 MiB 1.27, 1.31, 1.24, 1.09 -> 1.21, 1.11, 0.94, 0.92). The
// 4 x 8 run (NCCL 2.7.5, default selection, 1 MiB-4 GiB, four processes
// of 8 GPUs: gpus-per-process=8, dgx-a100-4x8-ib_allreduce_nccl-2.7.csv)
// is held out (32-128 MiB 1.37, 1.25, 0.90 -> 1.15, 0.95, 0.75).
//
// dgxA100Misses are the sizes outside 20%, keyed "sweep size", with their
// ratio when listed:
//   - ring 8 B-32 KiB, LL on one channel (2.13-1.27): the run took 38.6
//     us at 8 B, 1.29 us a step over its 30; NCCL's tuning model alone
//     (preset none) gives 43.6 and the transport 82.4, whose LL hops pay
//     a GPU step (0.5 us), an LL slice's fixed work (1.8 us, fitted on
//     one A100 server, where its -g 8 launch floor hides it below 32 KiB)
//     and a network step's send proxy (4 us) on top of NCCL's hop
//     latencies; with all three 0 it is still 49.9 us (1.29), so the run
//     is below what any value of them gives. NDmv4's ring LL (AllGather 1
//     KiB, 15 steps, 2.2 us a step) is 1.32 with the same costs
//     (ndmv4Misses): the two A100 InfiniBand runs' LL steps differ by 1.7x.
//   - ring 256 KiB-8 MiB (1.69-1.21), LL128 on 16 channels: the LL128
//     slice's fixed work fitted on one A100 server (6 us, 14 steps of
//     24 channels; TestTransportDGXA100Band) sets a 30-step ring's floor
//     at 205 us, where the run's LL128 sizes (1-4 MiB) take 120-166 us,
//     about 3.5 us a step. 3 us fits this sweep (1 MiB 1.08) and takes
//     the one-server LL128 sizes to 0.65-0.76. The run's time drops from
//     135 to 120 us at 1 MiB, its switch from LL to LL128 (NCCL 2.11's
//     ring LL latencies, 3.6 us and 0.47 a hop, are below 2.27's 6.6 and
//     0.6); the model, NCCL 2.27's choice, runs LL128 from 256 KiB.
//     28 of this ring's 30 steps are NVLink hops, as all 14 of the one
//     server's are, so no network-side step cost tells the two apart, nor
//     does a cost growing with a step's bytes (6 us at the one server's
//     21.8 KB steps and at most 7.5 at its 87 KB ones leave at least 5.6
//     at 4 KB). NCCL 2.7-2.19 cut an LL128 ring into chunks of at least
//     19200 bytes laid out chunk-major over the channels (all_reduce.h
//     runRing, minChunkSize: 3.4-13.7 of 16 chunks a channel at 1-4 MiB
//     here, the rest empty), where the model splits evenly as NCCL 2.20
//     and later do: not modelled.
//   - default 8 and 16 MiB (1.25, 1.88), a Tree LL128 on 4 servers: its
//     blocks' LL128 rate (tree-bw 10 GB/s, fitted on OCI's 2 x 8 with two
//     NICs a GPU, 32 blocks) binds on 16 blocks with up to three inputs
//     each; the run took 320 and 381 us (forced to the ring the model
//     gives 430 and 501: the same LL128 slice floor, 62 steps).
//   - default 128 MiB (0.75), a Ring LL128: NCCL 2.7.5's LL128 ring levels
//     off at 111-120 GB/s busbw from 32 to 128 MiB, 7.5 GB/s a channel,
//     the copy at NCCL's Ampere LL128 rate (20 GB/s a channel) in series
//     with the channel's 12 GB/s share of the NICs; NCCL 2.11.4's 2 x 8
//     ring moved a step's added bytes at 10.3 GB/s a channel, and the fit
//     follows the newer run.
var dgxA100Misses = map[string]float64{
	"ring 8":            2.13,
	"ring 16":           2.16,
	"ring 32":           2.17,
	"ring 64":           2.04,
	"ring 128":          2.03,
	"ring 256":          2.06,
	"ring 512":          1.98,
	"ring 1024":         2.01,
	"ring 2048":         1.80,
	"ring 4096":         1.68,
	"ring 8192":         1.27,
	"ring 16384":        1.45,
	"ring 32768":        1.36,
	"ring 262144":       1.69,
	"ring 524288":       1.52,
	"ring 1048576":      1.73,
	"ring 2097152":      1.54,
	"ring 4194304":      1.31,
	"ring 8388608":      1.21,
	"default 8388608":   1.25,
	"default 16777216":  1.88,
	"default 134217728": 0.75,
}

// dgxA100Jumps are the adjacent sizes (keyed "sweep size", the larger)
// whose simulated time grows by more than 1.2 x the measured growth, with
// simulated growth / measured growth when listed: ring 256 KiB (1.91),
// the LL-to-LL128 switch onto the LL128 slice floor above (the run, still
// LL there, grew 1.20x, the model 2.30x); default 16 MiB (1.51), the Tree
// LL128's block rate on 4 servers (measured 1.19x, simulated 1.79x);
// default 256 MiB (1.30), the LL128-to-Simple switch after the 128 MiB
// LL128 plateau miss above (measured 1.35x, simulated 1.75x; 2 x 8's
// ring, NCCL 2.11.4, grew 1.75x at its own switch, 64 to 128 MiB, and the
// model 1.76x).
var dgxA100Jumps = map[string]float64{
	"ring 262144":       1.91,
	"default 16777216":  1.51,
	"default 268435456": 1.30,
}

// dgxA100Sweep is one DeepOps sweep through fluid under the default
// transport on gpus A100s (8 a server, one 200G NIC a GPU): simulated /
// measured by size.
func dgxA100Sweep(t *testing.T, ref string, gpus int, args ...string) map[int64]float64 {
	t.Helper()
	return fluidOverMeasured(t, mustRun(t, dgxA100Topo(t, gpus), "simccl-decompose", append([]string{"--op", "allreduce", "--group", "dp", "--tp", "1"}, args...)...), measuredUs(t, ref))
}

// dgxA100Topo is gpus DGX A100s' GPUs through ncclpath: 8 a server, one
// 200G NIC a GPU.
func dgxA100Topo(t *testing.T, gpus int) []byte {
	t.Helper()
	return mustRun(t, mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", fmt.Sprint(gpus), "--gpu-type", "A100", "--nic-bw", "200Gbps"), "ncclpath")
}

// dgxA100Runs are the two sweeps: name, reference, GPUs and the
// decompose arguments that reproduce the run.
var dgxA100Runs = []struct {
	name, ref string
	gpus, n   int
	args      []string
}{
	{"ring", "dgx-a100-2x8-ib_allreduce_ring_nccl-2.11.csv", 16, 30, []string{"--sweep", "8:4GiB:2", "--algo", "ring"}},
	{"default", "dgx-a100-4x8-ib_allreduce_nccl-2.7.csv", 32, 13, []string{"--sweep", "1MiB:4GiB:2", "--transport", "gpus-per-process=8"}},
}

// TestTransportDGXA100IB: every size of both DeepOps sweeps within 20% of
// measured but dgxA100Misses, and no jump between adjacent sizes the
// measurement lacks (simulated growth within 1.2 x measured) but
// dgxA100Jumps. When written: ring 64-128 KiB 1.12, 0.88, 16 MiB-4 GiB
// 0.92-1.11; default 1-4 MiB 0.89-1.05, 32-64 MiB 1.15, 0.95, 256 MiB-4
// GiB 0.94-0.99.
func TestTransportDGXA100IB(t *testing.T) {
	t.Parallel()
	for _, run := range dgxA100Runs {
		got := dgxA100Sweep(t, run.ref, run.gpus, run.args...)
		if len(got) != run.n {
			t.Fatalf("%s: %d sizes compared, want %d", run.ref, len(got), run.n)
		}
		checkBand(t, got, dgxA100Misses, run.name, "DGX A100 IB "+run.name, "a100")
		pub := measuredUs(t, run.ref)
		sizes := slices.Sorted(maps.Keys(got))
		for i := 1; i < len(sizes); i++ {
			a, b := sizes[i-1], sizes[i]
			grew := got[b] / got[a] // (sim b / sim a) / (pub b / pub a)
			was, listed := dgxA100Jumps[fmt.Sprintf("%s %d", run.name, b)]
			checkRatio(t, fmt.Sprintf("DGX A100 IB %s %d -> %d B: simulated growth %.2fx / measured %.2fx", run.name, a, b, grew*pub[b]/pub[a], pub[b]/pub[a]), grew, 0, 1.2, was, listed)
		}
	}
}

// TestTransportDGXA100IBPacketFluid: packet within 5% of fluid on both
// DeepOps sweeps' pipelines (-short: 1, 8 and 64 MiB of each). The ring's
// 8 MiB is 0.94 (16 MiB 0.96): its LL128 ring's network steps pay the send
// proxy's 4 us, which packet's ports hide further behind the channels'
// drifting steps than fluid's (with send-proxy 0 it is 1.016); 0.944 at
// 6d0bb73, before ll128-tail. Elsewhere 1.00-1.03 to 256 MiB when written.
func TestTransportDGXA100IBPacketFluid(t *testing.T) {
	t.Parallel()
	short := map[string]string{"ring": "1MiB:64MiB:8", "default": "1MiB:64MiB:8"}
	for _, run := range dgxA100Runs {
		sweep, want := run.args[1], run.n
		if testing.Short() {
			sweep, want = short[run.name], 3
		}
		args := append([]string{"--op", "allreduce", "--group", "dp", "--tp", "1", "--sweep", sweep}, run.args[2:]...)
		st := mustRun(t, dgxA100Topo(t, run.gpus), "simccl-decompose", args...)
		fl, pk := spanTimes(t, st, "flowsim-analytical", "--model", "fluid"), spanTimes(t, st, "flowsim-packet")
		if run.name == "ring" {
			// The listed miss (see above), held to its value.
			if r := pk[8<<20] / fl[8<<20]; fl[8<<20] > 0 && (r < 0.92 || r > 0.96) {
				t.Errorf("DGX A100 IB ring 8 MiB: packet / fluid %.3f, listed at 0.94: moved, update the list", r)
			}
			delete(pk, 8<<20)
			want--
		}
		checkPacketFluid(t, "DGX A100 IB "+run.name, fl, pk, want)
	}
}

// TestTransportDGXA100IBCollFlow: collective against flow granularity on
// both DeepOps sweeps' pipelines and sizes, within the 5% (0.984-
// 1.019 when written).
// -short runs every fourth size of each.
func TestTransportDGXA100IBCollFlow(t *testing.T) {
	t.Parallel()
	short := map[string]struct {
		sweep string
		n     int
	}{"ring": {"8:4GiB:16", 8}, "default": {"1MiB:4GiB:16", 4}}
	for _, run := range dgxA100Runs {
		args, want := run.args, run.n
		if s := short[run.name]; testing.Short() {
			args, want = append([]string{"--sweep", s.sweep}, run.args[2:]...), s.n
		}
		checkCollFlow(t, dgxA100Topo(t, run.gpus), want, args...)
	}
}

// spanTimes runs a stream st through a backend command and returns each
// collective's time (first start to last end, ps) by its size.
func spanTimes(t *testing.T, st []byte, backend ...string) map[int64]float64 {
	t.Helper()
	first, last, size := collSpansSizes(t, mustRun(t, st, backend[0], backend[1:]...))
	out := map[int64]float64{}
	for id, f := range first {
		out[size[id]] = float64(last[id] - f)
	}
	return out
}
