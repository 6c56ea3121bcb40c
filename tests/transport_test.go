package tests

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/trace"
)

// measuredUs reads a published reference's size -> time (us) rows.
func measuredUs(t *testing.T, name string) map[int64]float64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "examples", "reference", name))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]float64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		size, err1 := strconv.ParseInt(f[0], 10, 64)
		us, err2 := strconv.ParseFloat(f[1], 64)
		if err1 == nil && err2 == nil && us > 0 {
			out[size] = us
		}
	}
	return out
}

// collSpansSizes is collSpans of a trace read a row at a time (a sweep
// to 4 GiB on 32 GPUs has millions of rows), with each collective's size.
func collSpansSizes(t *testing.T, tr []byte) (first, last, size map[int64]int64) {
	t.Helper()
	first, last, size = map[int64]int64{}, map[int64]int64{}, map[int64]int64{}
	eachRow(t, tr, func(r *trace.Row) {
		id := r.CollectiveID
		if id < 0 {
			return
		}
		if f, ok := first[id]; !ok || r.StartNs < f {
			first[id] = r.StartNs
		}
		last[id] = max(last[id], r.EndNs)
		size[id] = r.CollSizeBytes
	})
	return first, last, size
}

// sweepRatios runs an nccl-tests sweep of op on gpus H100s (8 per server,
// 400G NICs) through fluid and returns simulated / measured per size.
func sweepRatios(t *testing.T, op string, gpus int, ref string, args ...string) map[int64]float64 {
	t.Helper()
	pub := measuredUs(t, ref)
	topo := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", strconv.Itoa(gpus), "--gpu-type", "H100", "--nic-bw", "400Gbps")
	st := mustRun(t, mustRun(t, topo, "ncclpath"), "simccl-decompose", append([]string{"--op", op, "--group", "dp", "--tp", "1", "--sweep", "1MiB:4GiB:2"}, args...)...)
	return fluidOverMeasured(t, st, pub)
}

// fluidOverMeasured runs stream st through fluid and returns, by size,
// each collective's time over the published one (pub, us by size), for
// the sizes pub has.
func fluidOverMeasured(t *testing.T, st []byte, pub map[int64]float64) map[int64]float64 {
	t.Helper()
	first, last, size := collSpansSizes(t, mustRun(t, st, "flowsim-analytical", "--model", "fluid"))
	out := map[int64]float64{}
	for id, f := range first {
		if us, ok := pub[size[id]]; ok {
			out[size[id]] = float64(last[id]-f) / 1e3 / us
		}
	}
	return out
}

// Bad transport parameters exit 1 with one line naming the key.
func TestTransportBadInput(t *testing.T) {
	topo := mustRun(t, nil, "topogen", "--gpus", "8")
	for _, kv := range []string{"preset=h200", "slots=0", "send-proxy=-1", "gpu-step=-0.5", "recv-proxy=x", "slice-ll128=-1", "proxy-op=-2", "p2p-op=-1", "nvls-tree-op=-1", "nvls-tree-bw=-1", "ring-op=-1", "ar-op=x", "ar-threshold=-1", "ll-bw=-1", "nvls-bw=-1", "launch=-2", "gpus-per-process=0", "ll128-tail=-1", "tuner=aws-p6", "host-cpu=arm", "net-latency=-1", "p2p-chunk=0", "tree-op=-1", "tree-bw=x", "tree-ll-bw=-1", "tree-ll-bw=1e-300", "tree-bw=1e-300", "nvls-bw=1e-9", "tree-chunk=x", "tree-graph=x", "tree-lat=x", "tree-ll-first=x", "tree-ll128-send=x", "channel-split=x", "net-shared-buffers=2", "nonsense=1"} {
		key, _, _ := strings.Cut(kv, "=")
		oneLineError(t, run(t, topo, "simccl-decompose", "--op", "allreduce", "--size", "1MiB", "--tp", "8", "--transport", kv), 1, key)
	}
}

// sweepBackend runs a sweep of op on gpus H100s through a backend
// command and returns simulated time (us) per size.
func sweepBackend(t *testing.T, op string, gpus int, sweep string, backend []string, args ...string) map[int64]float64 {
	t.Helper()
	return sweepGPU(t, "H100", op, gpus, sweep, backend, args...)
}

// sweepGPU is sweepBackend on servers of gpuType (topogen --gpu-type).
func sweepGPU(t *testing.T, gpuType, op string, gpus int, sweep string, backend []string, args ...string) map[int64]float64 {
	t.Helper()
	topo := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", strconv.Itoa(gpus), "--gpu-type", gpuType, "--nic-bw", "400Gbps")
	// preset=none first: a test's own --transport keys are on top of NCCL's
	// model latencies unless it names a preset (later keys win).
	st := mustRun(t, mustRun(t, topo, "ncclpath"), "simccl-decompose", append([]string{"--op", op, "--group", "dp", "--tp", "1", "--sweep", sweep, "--transport", "preset=none"}, args...)...)
	first, last, size := collSpansSizes(t, mustRun(t, st, backend[0], backend[1:]...))
	out := map[int64]float64{}
	for id, f := range first {
		out[size[id]] = float64(last[id]-f) / 1e3
	}
	return out
}

// With the transport's costs (issue 30), packet and fluid agree within 5%
// at every size of the VP AllReduce and AllGather from 1 to 512 MiB:
// both pay a connection's step costs on the fill and as the same pace
// (stream pace_ps, flowset.Pacer), and an LL128 ring's proxy round on its
// slices' fixed work (ring-op). When every chunk paid them in series on
// its delay_ps, the packet backend, whose last byte leaves the NIC at line
// rate, hid them and ended 10-35% before fluid at 4-64 MiB. AllReduce's
// NVLS-Tree sizes also need the proxy's posting order (proxyPhase): 2 and
// 4 MiB, one loop per channel (16 and 32 KiB tree steps), were 0.939 and
// 0.949 without it. Both backends upload in step (NVLink shared; 0-32.2
// us at 2 MiB). On the leaves' first tree step fluid shared each NIC among
// the channels and ended them all together (60.75 us); packet's NIC,
// serving its queue pairs a 9000-byte packet at a time, ended them from
// 59.7 to 61.0, after which each channel reached the NIC alone: its later
// levels took 23.0, 23.0, 24.5 us a channel (22.8 alone) against fluid's
// 25.1, 25.1, 27.7, and the multicast 0.6 us against 3.35 (fluid 142.5,
// packet 129.9-133.8). Hardware sides with packet, and goes further: a
// GPU's one proxy thread posts its channels' steps in turn (proxy.cc's
// progress loop, the same round that paces them, proxy-op), so they never
// reach the NIC together. A tie-break was no cure: with channel c's first
// leaf send c x eps later, fluid moved with eps with no plateau (2 and 4
// MiB 0.943/0.956 at 0.1 ns, 0.952/0.965 at 1 ns, 0.956/0.974 at 3 ns;
// 16 MiB 0.993 to 1.025). With the round's phase (c x 2 x proxy-op, 3.2
// us) both backends agree within 0.8% at 2-512 MiB, and h100-ib stays in
// TestTransportVPBands without a refit (2, 4, 8 MiB at 1.12, 1.14, 0.89
// of measured, were 0.92, 1.06, 0.97), as does h100-efa in
// TestTransportP5Band (2 x 8 64 MiB 0.81 to 0.83). Smaller phases make it
// worse: the channels then overlap their tree levels without paying the
// posts, and 8 MiB falls to 0.85 (c x 0.18 us, a packet) and 0.78 (c x
// 1.6 us). nvlsTreePs takes the same phase (collective / flow 0.99-1.00
// at 2-128 MiB, was 0.82-0.92 at 2-4 MiB with the phase and the in-step
// chain). Since a loop's GPU work paces NVLS-Tree (nvls-tree-bw) and the
// proxy op is 0.3 us (a phase of 0.6 us a channel), packet / fluid is
// 0.969-1.011 at 2-512 MiB (8 MiB, one loop of 64 KiB shards, 0.969).
// Beyond this test's sizes, 1-4 GiB are within 1.1% (both ops). The Simple ring's sizes (AllGather
// from 128 MiB, AllReduce's ring at 512 MiB) are covered since a ring's
// first-loop steps keep their connection's order (collective ringConns):
// with PXN's relays they had reached a NIC several at once and shared it,
// where a queue pair sends them in order, and packet was 1.10, 1.12 and
// 1.06 of fluid at 128-512 MiB AllGather.
func TestTransportPacketFluidAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("packet sweeps take a minute")
	}
	t.Parallel()
	for _, op := range []string{"allreduce", "allgather"} {
		tr := []string{"--transport", "preset=h100-ib"}
		fl := sweepBackend(t, op, 32, "1MiB:512MiB:2", []string{"flowsim-analytical", "--model", "fluid"}, tr...)
		pk := sweepBackend(t, op, 32, "1MiB:512MiB:2", []string{"flowsim-packet"}, tr...)
		if len(fl) != 10 || len(pk) != 10 {
			t.Fatalf("%s: %d and %d sizes, want 10", op, len(fl), len(pk))
		}
		for size, f := range fl {
			if r := pk[size] / f; r < 0.95 || r > 1.05 {
				t.Errorf("%s %d B: packet %.1f us, fluid %.1f us (%.3f), want within 5%%", op, size, pk[size], f, r)
			}
		}
	}
}

// The h100-ib preset on the Voltage Park 4 x 8 H100 sweeps (NCCL 2.24.3):
// every size from 1 MiB to 4 GiB of AllGather and AllReduce within 20% of
// measured through fluid. The ring slice costs (Transport.SliceUs) are
// chosen on the AllGather sweep, the AllReduce sweep's ring sizes (256
// MiB to 4 GiB, a Simple ring with 1-2 MiB chunks; 256 MiB ran as
// NVLS-Tree, 0.84, until the ring graph was NCCL's 8 x 48 GB/s, 1.04)
// held out for them; its NVLS-Tree sizes (2-128 MiB) are cut as NCCL cuts them (nvlsTreeChunk)
// and paced by a loop's GPU work on the shard a GPU heads (nvls-tree-bw
// 1.3 GB/s a channel) and the proxy thread's round over a GPU's channels
// (proxy-op 0.3 us): 0.95 1.07 1.02 0.95 1.00 0.99 1.04 of measured at 2-128
// MiB when fitted (1.12 1.14 0.89 0.94 0.96 0.97 1.03 with a round of 1.6 us
// a send or receive as a loop's only cost). AllGather's LL128 ring (1-64 MiB) is paced by its own proxy
// round (ring-op): every ring step each GPU's proxy posts and polls 2 x 16
// channels / 8 GPUs network steps, 0.5 us each, 0.7 us more (ar-op) once
// a step's message passes NCCL_IB_AR_THRESHOLD (8 KiB, adaptive routing's
// second write), which a 16-channel ring's 4 MiB step does and its 2 MiB
// step does not: the measured sweep is flat at 110 us to 2 MiB and jumps
// to 193 at 4 MiB. Before (slice costs only, 5.5 us per LL128 slice)
// AllGather was 1.95 1.94 at 1-2 MiB and 0.79 at 64 MiB; without the AR
// surcharge 4 MiB is 0.61, which the test checks too.
func TestTransportVPBands(t *testing.T) {
	t.Parallel()
	for _, op := range []string{"allgather", "allreduce"} {
		r := sweepRatios(t, op, 32, "vp-4x8h100-ib_"+op+"_nccl-2.24.csv", "--transport", "preset=h100-ib")
		if len(r) != 13 {
			t.Fatalf("%s: %d sizes compared, want 13 (1 MiB to 4 GiB)", op, len(r))
		}
		for size, x := range r {
			if x < 0.8 || x > 1.2 {
				t.Errorf("VP %s %d B: simulated / measured %.2f outside [0.80, 1.20]", op, size, x)
			}
		}
	}
	// Only 4 MiB, alone: the sweep's other sizes (a barrier between each)
	// took two thirds of the run.
	noAR := sweepBackend(t, "allgather", 32, "4MiB:4MiB:2", []string{"flowsim-analytical", "--model", "fluid"}, "--transport", "preset=h100-ib", "--transport", "ar-op=0")
	pub := measuredUs(t, "vp-4x8h100-ib_allgather_nccl-2.24.csv")
	if x := noAR[4<<20] / pub[4<<20]; len(noAR) != 1 || x > 0.7 {
		t.Errorf("AllGather 4 MiB without the AR surcharge: %.2f of measured (%d sizes run); the test no longer tells it apart", x, len(noAR))
	} else {
		t.Logf("AllGather 4 MiB without the AR surcharge: %.2f of measured", x)
	}
}

// h100-efa (issue 30): the AWS p5 2 x 8 H100 AllReduce (EFA), on whose
// NVLS-Tree sizes its fill (send and receive proxies, 18 us each) and
// a loop's GPU work (nvls-tree-op 15 us plus the shard a GPU heads at
// nvls-tree-bw, 2 GB/s a channel; the proxy's op IB's 0.3 us) are
// fitted, with aws-ofi-nccl's AWS settings (8 MiB buffers, 512 KiB NVLS
// chunks), and on whose Tree LL128 sizes (1-16 MiB, under the 75 us the
// plugin reports to NCCL, net-latency) the tree step (tree-op 4 us,
// tree-bw 30 GB/s, tree-ll128-send=whole: 1.02 1.00 0.99 1.00 1.01 at 1-16
// MiB, 1.00 1.05 0.99 0.94 0.99 with tree-op 7 us at NCCL's 36.7 GB/s).
// Every size from 1 MiB to 4 GiB must stay within 20% of
// measured through fluid (1.00 1.05 0.99 0.94 0.99 1.04 0.81 0.93 0.99
// 1.03 1.08 1.04 1.06 when the loop's work was fitted; 0.83 0.93 0.97
// 0.83 0.88 0.89 0.91 from 64 MiB with a proxy round of 2.4 us a send
// or receive as a loop's only cost); with h100-ib's IB costs it is 0.59-0.67 at
// 1-64 MiB, which the test checks too, so that it tells the presets
// apart. The 4 x 8 p5 AllReduce (NCCL 2.28.7, 32 MiB-8 GiB) is held out
// of the fit: its 32-256 MiB must stay within 20% as well. They were
// NVLS-Tree (it did choose a round per channel over one per tree edge,
// which put them at 1.2-2.7x); h100-efa now selects as aws-ofi-nccl's p5
// tuner does (tuner=aws-p5: Tree LL128 at 32 MiB, Ring LL128 above,
// 0.95-1.07), and TestTransportP5HeldOut checks every size. A Simple
// ring slice's fixed work (slice-simple) is fitted on the 16 x 8 p5
// AllReduce's one Ring Simple size, 8 GiB (aws-p5-16x8h100-efa_
// allreduce.csv), within 2% of measured.
func TestTransportP5Band(t *testing.T) {
	t.Parallel()
	ratios := func(preset string, gpus int, sweep, ref string, want int) map[int64]float64 {
		pub := measuredUs(t, ref)
		got := sweepBackend(t, "allreduce", gpus, sweep, []string{"flowsim-analytical", "--model", "fluid"}, "--transport", "preset="+preset)
		out := map[int64]float64{}
		for size, us := range got {
			if m, ok := pub[size]; ok {
				out[size] = us / m
			}
		}
		if len(out) != want {
			t.Fatalf("%s %s: %d sizes compared, want %d", ref, preset, len(out), want)
		}
		return out
	}
	for _, c := range []struct {
		gpus       int
		sweep, ref string
		want       int
	}{
		{16, "1MiB:4GiB:2", "aws-p5-2x8h100-efa_allreduce.csv", 13},
		{32, "32MiB:256MiB:2", "aws-p5-4x8h100-efa_allreduce.csv", 4},
	} {
		for size, x := range ratios("h100-efa", c.gpus, c.sweep, c.ref, c.want) {
			if x < 0.8 || x > 1.2 {
				t.Errorf("%s %d B, h100-efa: simulated / measured %.2f outside [0.80, 1.20]", c.ref, size, x)
			}
		}
	}
	// The Simple ring slice (slice-simple 10.5 us) is fitted on the 16 x
	// 8 AllReduce at 8 GiB, Ring Simple under the tuner's regions: within
	// 2% of measured (1.000 when written, collective granularity 1.004;
	// IB's 8 us 0.973). -short checks the closed form (flow granularity
	// is 1.1 M flows, 2 s of fluid CPU).
	gran := "flow"
	if testing.Short() {
		gran = "collective"
	}
	pub := measuredUs(t, "aws-p5-16x8h100-efa_allreduce.csv")
	got := sweepBackend(t, "allreduce", 128, "8GiB:8GiB:2", []string{"flowsim-analytical", "--model", "fluid"}, "--transport", "preset=h100-efa", "--granularity", gran)
	if x := got[8<<30] / pub[8<<30]; len(got) != 1 || x < 0.98 || x > 1.02 {
		t.Errorf("p5 16x8 allreduce 8 GiB (%s granularity, %d sizes): %.3f of measured, want within 2%% (the Simple slice's fit)", gran, len(got), x)
	}
	if x := ratios("h100-ib", 16, "16MiB:16MiB:2", "aws-p5-2x8h100-efa_allreduce.csv", 1)[16<<20]; x > 0.7 {
		t.Errorf("p5 allreduce 16 MiB with h100-ib: %.2f of measured; the test no longer tells the presets apart", x)
	}
}

// h100-efa's tree LL step on the GPUs (tree-ll-bw: h100-ib's 3 GB/s a
// thread block, not fitted on EFA; its network step leaving whole, as
// NCCL's send proxy posts an LL step once all its lines' flags are set)
// held out on the 2 x 8 p5 AllReduce's Tree LL sizes: 8 B-8 KiB within
// 10% of measured (0.93-1.06 when written; 0.41-0.62 without the step).
// The run's NCCL is the 2.20.3 its repository's Dockerfile built when the
// results were added (awsome-distributed-training 88c2e71b, 2024-04-19,
// with aws-ofi-nccl 1.8.1), which splits a collective evenly over the
// thread threshold's channels (channel-split=even): 8-64 KiB are 4 KiB a
// channel on 2-16 channels. 16-64 KiB are not within 20% (0.82, 0.69,
// 0.57; 0.86, 0.73, 0.60 at 2 GB/s): measured, they climb from 81 to 135
// us at the same 4 KiB a channel, and no mechanism found fits:
//   - a cost growing with a step's bytes (the GPU's write of the whole
//     step before the proxy posts it, net.cc) is the same at 8 KiB (0.95)
//     as at 64 KiB;
//   - a head GPU's one proxy thread: channels take the rails in turn, one
//     channel's network connections a GPU up to 8 channels, two at 16,
//     where the rise is already 13 and 30 us at 4 and 8 channels;
//   - NCCL 2.23's cells (channel-split=cells: 1-8 channels of 8 KiB) give
//     1.05, 0.90, 0.76, 0.63, but not this run's NCCL;
//   - and 128 KiB (16 channels of 8 KiB) measures 109 us, under 64 KiB's
//     135, where the model's time cannot fall. The run's in-place column
//     reads 82, 90 and 104 us at 16-64 KiB (0.94, 0.86, 0.74 of the
//     model), its 8-256 B rows up to 9.5 us apart from the out-of-place
//     ones: half the rise at 64 KiB is the run's own spread.
func TestTransportP5TreeLL(t *testing.T) {
	t.Parallel()
	pub := measuredUs(t, "aws-p5-2x8h100-efa_allreduce.csv")
	got := sweepBackend(t, "allreduce", 16, "8:8KiB:2", []string{"flowsim-analytical", "--model", "fluid"}, "--transport", "preset=h100-efa", "--transport", "channel-split=even")
	if len(got) != 11 {
		t.Fatalf("%d sizes simulated, want 11 (8 B to 8 KiB)", len(got))
	}
	for size, us := range got {
		if x := us / pub[size]; pub[size] == 0 || x < 0.9 || x > 1.1 {
			t.Errorf("p5 2x8 AllReduce %d B, h100-efa: %.1f us, measured %.1f (%.2f), want within 10%%", size, us, pub[size], x)
		}
	}
}

// One HGX H100 (8 GPUs, NVSwitch), AllReduce against the Voltage Park
// single-node sweep (NCCL 2.24.3, examples/reference/vp-1x8h100_*): with
// h100-ib every size from 8 B to 8 GiB within 15% of measured through
// fluid. That run drove its 8 GPUs from one process (-g 8), so the test
// says so (gpus-per-process=8): one host thread launches each
// collective on the 8 GPUs in turn, and nccl-tests' back-to-back loop
// goes no faster than those launches (launch, 4.1 us each), which sets
// its flat 33 us below 128 KiB; one process per GPU (the multi-node VP
// sweeps) hides the launch behind the GPU's work. Without the floor the
// small sizes are 0.82-0.88 of measured, which the test checks too, so
// that it tells the floor apart. NVLS from 2 MiB, on the 16-64 KiB
// chunks enqueue.cc cuts below 1 GiB, goes no faster than a channel's
// GPU work per chunk beyond what nvlsEfficiency carries at NCCL's 128 KiB
// chunk (nvls-op 0.2 us plus the chunk at nvls-bw, 20 GB/s a channel,
// fitted on this sweep), which paces the channel's chunks; without the
// rate 8 MiB is 0.69, which the test checks too, and 2 MiB-1 GiB are
// 0.87-1.06 (0.87-1.11 with the work a gap in series, nvls-op 1.6 us x
// (1 - chunk / 128 KiB), 1.08 and 1.10 at 256 and 512 MiB). The plateau
// is the default's (1 GiB-8 GiB, checked against preset none within
// 1%). -short runs every fourth size.
func TestTransportDGXH100Band(t *testing.T) {
	t.Parallel()
	pub := measuredUs(t, "vp-1x8h100_allreduce_nccl-2.24.csv")
	fl := []string{"flowsim-analytical", "--model", "fluid"}
	sweep, want := "8:8GiB:2", 31
	if testing.Short() {
		sweep, want = "8:8GiB:16", 8
	}
	got := sweepBackend(t, "allreduce", 8, sweep, fl, "--transport", "preset=h100-ib", "--transport", "gpus-per-process=8")
	def := sweepBackend(t, "allreduce", 8, "1GiB:8GiB:8", fl)
	if len(got) != want || len(def) != 2 {
		t.Fatalf("%d and %d sizes, want %d and 2", len(got), len(def), want)
	}
	for size, us := range got {
		if x := us / pub[size]; x < 0.85 || x > 1.15 {
			t.Errorf("DGX H100 allreduce %d B, h100-ib -g 8: simulated / measured %.2f outside [0.85, 1.15]", size, x)
		}
		if d, ok := def[size]; ok && (us/d < 0.99 || us/d > 1.01) {
			t.Errorf("DGX H100 allreduce %d B: h100-ib %.1f us, default %.1f us: the plateau moved", size, us, d)
		}
	}
	noRate := sweepBackend(t, "allreduce", 8, "8MiB:8MiB:2", fl, "--transport", "preset=h100-ib", "--transport", "gpus-per-process=8", "--transport", "nvls-bw=0")
	if x := noRate[8<<20] / pub[8<<20]; len(noRate) != 1 || x > 0.8 {
		t.Errorf("DGX H100 allreduce 8 MiB without nvls-bw: %.2f of measured (%d sizes run); the test no longer tells the channel's rate apart", x, len(noRate))
	}
	for size, us := range sweepBackend(t, "allreduce", 8, "8:32KiB:64", fl, "--transport", "preset=h100-ib") {
		if x := us / pub[size]; x > 0.9 {
			t.Errorf("DGX H100 allreduce %d B, one process per GPU: %.2f of the -g 8 run; the test no longer tells the launch floor apart", size, x)
		}
	}
}

// One 8 x A100 SXM4 server (NVSwitch), AllReduce against the OCI
// BM.GPU4.8 sweep (examples/reference/oci-1x8a100_*, one process driving
// 8 GPUs, 64 B-8 GiB): with preset a100 and gpus-per-process=8 every
// published size within 15% of measured through fluid, and the plateau
// (1 and 8 GiB) within 5% of the default's. The preset's NVLink costs
// are fitted on this sweep: flat at 32 us to 32 KiB, which the launch
// floor (8 x 4.0 us) and the LL ring's own time with the preset's costs
// (31.7 us) both give, so this sweep does not tell them apart (the H100
// one does); LL (to 2 MiB) grows with size at LL's bus bandwidth
// (ll-bw, 62 GB/s in series with each slice: the sweep goes from 35 to
// 112 us between 64 KiB and 2 MiB, where the flows alone, at NVLink
// rate, add 30 us), which the test checks is needed (without it 2 MiB
// is below 0.85); LL128 (4-16 MiB) pays 6 us per slice and Simple 3.5.
// -short runs every eighth size.
func TestTransportDGXA100Band(t *testing.T) {
	t.Parallel()
	pub := measuredUs(t, "oci-1x8a100_allreduce_nccl-tests.csv")
	fl := []string{"flowsim-analytical", "--model", "fluid"}
	sweep, want := "64:8GiB:2", 28
	if testing.Short() {
		sweep, want = "64:8GiB:8", 10
	}
	a100 := []string{"--transport", "preset=a100", "--transport", "gpus-per-process=8"}
	got := sweepGPU(t, "A100", "allreduce", 8, sweep, fl, a100...)
	def := sweepGPU(t, "A100", "allreduce", 8, "1GiB:8GiB:8", fl)
	if len(got) != want || len(def) != 2 || len(pub) != 28 {
		t.Fatalf("%d, %d and %d sizes, want %d, 2 and 28", len(got), len(def), len(pub), want)
	}
	for size, us := range got {
		m, ok := pub[size]
		if !ok {
			t.Fatalf("%d B: no published row", size)
		}
		if x := us / m; x < 0.85 || x > 1.15 {
			t.Errorf("DGX A100 allreduce %d B, a100 -g 8: simulated / measured %.2f outside [0.85, 1.15]", size, x)
		}
		if d, ok := def[size]; ok && (us/d < 0.95 || us/d > 1.05) {
			t.Errorf("DGX A100 allreduce %d B: a100 %.1f us, default %.1f us: the plateau moved by more than 5%%", size, us, d)
		}
	}
	noLL := sweepGPU(t, "A100", "allreduce", 8, "2MiB:2MiB:2", fl, append(a100, "--transport", "ll-bw=0")...)
	if x := noLL[2<<20] / pub[2<<20]; x > 0.85 {
		t.Errorf("DGX A100 allreduce 2 MiB without ll-bw: %.2f of measured; the test no longer tells LL's bus bandwidth apart", x)
	}
}

// A process driving 8 GPUs (gpus-per-process=8, launch=4 us) takes at
// least 8 x 4 = 32 us per collective: exactly that for an 8-byte
// AllReduce on 8 A100s, which takes 15 us without it, at flow and at
// collective granularity. An LL ring's slices at LL's bus bandwidth
// (ll-bw, with no other per-step cost): a 2 MiB AllReduce forced to LL
// on 8 A100s runs one loop of 2 x 7 ring steps per channel, each slice
// carrying 2 MiB / (8 x channels) payload bytes and waiting that times
// the channels over ll-bw in place of its hop's latency (the slice's work
// is the longer), so it takes 14 x (2 MiB / 8 / 50 GB/s - 0.6 us) longer
// than without: 2(n-1)/n x 2 MiB at 50 GB/s, less the hops' latencies.
func TestTransportLaunchFloorAndLLBus(t *testing.T) {
	t.Parallel()
	fl := []string{"flowsim-analytical", "--model", "fluid"}
	for _, gran := range []string{"flow", "collective"} {
		us := sweepGPU(t, "A100", "allreduce", 8, "8:8:2", fl, "--granularity", gran, "--transport", "launch=4", "--transport", "gpus-per-process=8")[8]
		if us != 32 {
			t.Errorf("%s granularity: 8 B on 8 GPUs from one process: %.3f us, want 8 x 4 = 32", gran, us)
		}
		if one := sweepGPU(t, "A100", "allreduce", 8, "8:8:2", fl, "--granularity", gran, "--transport", "launch=4")[8]; one >= 32 {
			t.Errorf("%s granularity: one GPU per process: %.3f us, want the model's time, below 32", gran, one)
		}
	}
	ll := []string{"--proto", "ll"}
	base := sweepGPU(t, "A100", "allreduce", 8, "2MiB:2MiB:2", fl, ll...)[2<<20]
	with := sweepGPU(t, "A100", "allreduce", 8, "2MiB:2MiB:2", fl, append(ll, "--transport", "ll-bw=50")...)[2<<20]
	want := 14 * (float64(2<<20)/8/50e3 - 0.6)
	if d := with - base; d < 0.98*want || d > 1.02*want {
		t.Errorf("LL 2 MiB: ll-bw=50 adds %.2f us, want 14 x (2 MiB / 8 / 50 GB/s - 0.6 us) = %.2f", d, want)
	}
}

// A COLL node with a launch floor is not expanded into flows: the
// backend says so on one line naming the cut's field.
func TestExpandRefusesLaunchFloor(t *testing.T) {
	topo := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "8", "--gpu-type", "A100")
	st := mustRun(t, mustRun(t, topo, "ncclpath"), "simccl-decompose", "--op", "allreduce", "--size", "1MiB", "--tp", "8", "--group", "tp",
		"--granularity", "collective", "--transport", "preset=a100", "--transport", "gpus-per-process=8")
	oneLineError(t, run(t, st, "flowsim-analytical", "--expand"), 1, "launch_floor_ps")
}

// Issue 30: simccl-decompose prices transfers with the calibrated
// transport by default, the preset of the topology's GPU generation: its
// stream is byte for byte the one the preset gives (so every preset test
// covers the default), and preset=none gives NCCL's model latencies
// alone. The issue's own table, `topogen --family spectrum-x --gpus 32
// --gpu-type H100 --nic-bw 400Gbps` and the default selection (it read
// 102-138 us at 4-16 MiB against 160-272 measured): every size from 1
// MiB to 4 GiB of the Voltage Park AllReduce is within 20% through fluid.
// topogen --nic-network roce or efa chooses that network's preset.
func TestTransportDefaultIsCalibrated(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		gpu, nic, preset string
		gpus             int
	}{{"H100", "400Gbps", "h100-ib", 32}, {"H800", "400Gbps", "h100-ib", 16}, {"B200", "400Gbps", "h100-ib", 16}, {"A100", "200Gbps", "a100", 16}, {"A800", "200Gbps", "a100", 8}} {
		topo := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", strconv.Itoa(c.gpus), "--gpu-type", c.gpu, "--nic-bw", c.nic)
		args := []string{"--op", "allreduce", "--group", "dp", "--tp", "1", "--sweep", "8:1GiB:16"}
		def := mustRun(t, topo, "simccl-decompose", args...)
		preset := mustRun(t, topo, "simccl-decompose", append(args, "--transport", "preset="+c.preset)...)
		none := mustRun(t, topo, "simccl-decompose", append(args, "--transport", "preset=none")...)
		auto := mustRun(t, topo, "simccl-decompose", append(args, "--transport", "preset=none", "--transport", "preset=auto")...)
		if !bytes.Equal(def, preset) || !bytes.Equal(def, auto) {
			t.Errorf("%s: the default stream differs from preset=%s's (or preset=auto's)", c.gpu, c.preset)
		}
		if bytes.Equal(def, none) {
			t.Errorf("%s: the default stream is preset=none's: no transport costs", c.gpu)
		}
	}
	// The NICs' network (topogen --nic-network) chooses among a
	// generation's presets: the stream is the named preset's, and not the
	// InfiniBand one's (RoCE drops adaptive routing's message on every
	// multi-server LL128 ring step above 8 KiB; EFA's proxies cost more).
	//
	// On 2 x 8 A100s NCCL's search gives 16 channels (it counts their
	// PCIe Gen4 link), and topogen caps their NIC links at what that link
	// carries (226.4 Gb/s): an LL128 ring's proxy round, with adaptive
	// routing's 0.7 us an op or without it, then stays under a100's 6 us
	// slice wherever the ranks fill the servers (the 1-64 MiB AllGather
	// and --tp 4 AllReduce streams of a100 and a100-roce are equal), so
	// the A100 RoCE case runs the data-parallel pairs of --tp 8, one rank
	// a server, whose proxies post every channel's ops: the 64 KiB-64 MiB
	// AllReduce streams differ.
	llRings := []string{"--op", "allgather", "--group", "dp", "--tp", "1", "--sweep", "1MiB:64MiB:4"} // LL128 rings
	for _, c := range []struct {
		gpu, net, preset, ib string
		args                 []string
	}{
		{"H100", "roce", "h100-roce", "h100-ib", llRings}, {"H100", "efa", "h100-efa", "h100-ib", llRings}, {"H100", "ib", "h100-ib", "h100-ib", llRings},
		{"A100", "roce", "a100-roce", "a100", []string{"--op", "allreduce", "--group", "dp", "--tp", "8", "--sweep", "64KiB:64MiB:4"}}, {"A100", "efa", "a100-efa", "a100", llRings},
	} {
		topo := mustRun(t, nil, "topogen", "--gpus", "16", "--gpu-type", c.gpu, "--nic-network", c.net)
		args := c.args
		def := mustRun(t, topo, "simccl-decompose", args...)
		if preset := mustRun(t, topo, "simccl-decompose", append(args, "--transport", "preset="+c.preset)...); !bytes.Equal(def, preset) {
			t.Errorf("%s on %s: the default stream differs from preset=%s's", c.gpu, c.net, c.preset)
		}
		if ib := mustRun(t, topo, "simccl-decompose", append(args, "--transport", "preset="+c.ib)...); bytes.Equal(def, ib) != (c.preset == c.ib) {
			t.Errorf("%s on %s: the default stream equal to preset=%s's: %v", c.gpu, c.net, c.ib, bytes.Equal(def, ib))
		}
		label := fmt.Sprintf("transport: %s (auto: %s, %s)\n", c.preset, c.gpu, c.net)
		if sum := mustRun(t, topo, "simccl-decompose", append(args, "--summary")...); !bytes.Contains(sum, []byte(label)) {
			t.Errorf("%s on %s: the summary does not say %q:\n%s", c.gpu, c.net, label, sum)
		}
	}
	pub := measuredUs(t, "vp-4x8h100-ib_allreduce_nccl-2.24.csv")
	topo := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "32", "--gpu-type", "H100", "--nic-bw", "400Gbps")
	st := mustRun(t, topo, "simccl-decompose", "--op", "allreduce", "--group", "dp", "--tp", "1", "--sweep", "1MiB:4GiB:2")
	first, last, size := collSpansSizes(t, mustRun(t, st, "flowsim-analytical", "--model", "fluid"))
	if len(first) != 13 {
		t.Fatalf("%d sizes simulated, want 13 (1 MiB to 4 GiB)", len(first))
	}
	for id, f := range first {
		us, ref := float64(last[id]-f)/1e3, pub[size[id]]
		if x := us / ref; ref == 0 || x < 0.8 || x > 1.2 {
			t.Errorf("VP AllReduce %d B by default: %.1f us, measured %.1f (%.2f)", size[id], us, ref, x)
		}
	}
}

// A tree LL AllReduce's first line is forwarded after an eighth of its
// step's cost whatever the step's size (Coll.treeChunk): on 4 x 8 H100s
// by default, from 8 B to 1 KiB, every size is within 10% of Voltage
// Park's (37.2-39.8 us). With a piece a step below 512 B a channel, 8-64
// B took 60.2 us and 512 B 38.8, at both granularities. Up to 1 MiB
// (Tree LL to 128 KiB, then Tree LL128) every size is within 10% too
// (0.91-1.03 when written) and the time never falls as the size grows.
// VP ran NCCL 2.24.3, which spreads a collective over its channels in
// cells of 16 KiB of traffic (channel-split=cells, h100-ib's): 8 KiB runs
// on one channel of 8 KiB and 16-128 KiB on 2-16 channels of 8 KiB, where
// the thread threshold alone gives 2-16 channels of 4 KiB. A tree LL step
// on the GPUs at 3 GB/s a thread block (tree-ll-bw; 8.1 us more for a
// channel's 4 more KiB, 4 to 8 KiB on one channel: VP measures 8.2) then
// brings 4-128 KiB to 0.91-1.03; with the even split the same rate leaves
// 8-64 KiB at 0.77-0.87 (flat at 46.5 us), which the test checks too, so
// that it tells the spread apart. What is left is VP's rise with the
// channel count at 8 KiB a channel (53 us on 1 channel, 60 on 8: 0.91).
func TestTransportTinyTreeFlat(t *testing.T) {
	pub := measuredUs(t, "vp-4x8h100-ib_allreduce_nccl-2.24.csv")
	topo := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "32", "--gpu-type", "H100", "--nic-bw", "400Gbps")
	for _, gran := range []string{"flow", "collective"} {
		st := mustRun(t, topo, "simccl-decompose", "--op", "allreduce", "--group", "dp", "--tp", "1", "--sweep", "8:1MiB:2", "--granularity", gran)
		first, last, size := collSpansSizes(t, mustRun(t, st, "flowsim-analytical", "--model", "fluid"))
		if len(first) != 18 {
			t.Fatalf("%s: %d sizes simulated, want 18 (8 B to 1 MiB)", gran, len(first))
		}
		bySize := map[int64]float64{}
		for id, f := range first {
			us, ref := float64(last[id]-f)/1e3, pub[size[id]]
			bySize[size[id]] = us
			if x := us / ref; ref == 0 || x < 0.9 || x > 1.1 {
				t.Errorf("%s: VP AllReduce %d B: %.1f us, measured %.1f (%.2f), want within 10%%", gran, size[id], us, ref, x)
			}
		}
		for s := int64(16); s <= 1<<20; s *= 2 {
			// 16-128 KiB are the same 8 KiB a channel on 2-16 channels:
			// picoseconds apart, either way
			slack := 0.0
			if s > 1024 {
				slack = 0.01
			}
			if bySize[s] < bySize[s/2]-slack {
				t.Errorf("%s: %d B takes %.2f us, %d B %.2f: a larger AllReduce is faster", gran, s, bySize[s], s/2, bySize[s/2])
			}
		}
	}
	st := mustRun(t, topo, "simccl-decompose", "--op", "allreduce", "--group", "dp", "--tp", "1", "--sweep", "8KiB:64KiB:2", "--transport", "channel-split=even")
	even := spanTimes(t, st, "flowsim-analytical", "--model", "fluid")
	if len(even) != 4 {
		t.Fatalf("channel-split=even: %d sizes run, want 4 (8-64 KiB)", len(even))
	}
	for s, ps := range even {
		if x := ps / 1e3 / pub[s]; x > 0.9 {
			t.Errorf("VP AllReduce %d B with channel-split=even: %.2f of measured; the test no longer tells the cells apart", s, x)
		}
	}
}

// A group whose servers hold different numbers of its ranks (tp 6 from
// GPU 0 on 8-GPU H100 servers: ranks 6-11 are 2 + 4) is not given
// NVLS-Tree, whose intra-server reduction needs the same GPUs on every
// server: it takes NCCL's next choice and runs, where the run stopped
// ("NVLS-Tree needs the same number of ranks on every server"). The group
// inside one server keeps NVLS; a COLL node is planned on the 2 + 4 group.
func TestUnevenServersNoNVLSTree(t *testing.T) {
	topo := mustRun(t, mustRun(t, nil, "topogen", "--gpus", "16", "--gpu-type", "H100"), "ncclpath")
	args := []string{"--op", "allreduce", "--size", "16MiB", "--group", "tp", "--tp", "6", "--place", "0-11"}
	for _, gran := range []string{"flow", "collective"} {
		r := run(t, topo, "simccl-decompose", append(args, "--granularity", gran, "--summary")...)
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", gran, r.code, r.stderr)
		}
		var algos []string
		for _, l := range strings.Split(string(r.stdout), "\n") {
			if f := strings.Fields(l); len(f) > 7 && f[0] == "allreduce" {
				algos = append(algos, f[7])
			}
		}
		// At collective granularity one COLL node, planned on the stage's
		// widest group (the 2 + 4 one).
		want := map[string]int{"flow": 2, "collective": 1}[gran]
		if len(algos) != want || want == 2 && algos[0] != "nvls" || strings.HasPrefix(algos[len(algos)-1], "nvls") {
			t.Errorf("%s: algorithms %v, want nvls inside the server and no NVLS for the 2 + 4 group:\n%s", gran, algos, r.stdout)
		}
		st := mustRun(t, topo, "simccl-decompose", append(args, "--granularity", gran)...)
		if span(t, mustRun(t, st, "flowsim-analytical")) <= 0 {
			t.Errorf("%s: no time", gran)
		}
	}
	// NVLS forced on the 2 + 4 group is refused, saying why.
	oneLineError(t, run(t, topo, "simccl-decompose", append(args, "--algo", "nvls")...), 1, "servers hold different numbers of its ranks: no NVLS")
	// Two groups on two servers each, 4 + 4 and 2 + 6, in either order: a
	// plan is kept by shape, which must say uneven (the 4 + 4 group's
	// NVLS-Tree stopped the 2 + 6 one, or the 2 + 6 group's ring stood for
	// the 4 + 4 one); a COLL node standing for both is planned without
	// NVLS on the uneven one (NVLS-Tree's plan priced it at 0.55 of the
	// flows, and --expand stopped), within 5% of the flows.
	t24 := mustRun(t, mustRun(t, nil, "topogen", "--gpus", "24", "--gpu-type", "H100"), "ncclpath")
	for _, place := range []string{"4-11,0-1,16-21", "0-1,16-21,4-11"} {
		args := []string{"--op", "allreduce", "--size", "16MiB", "--group", "tp", "--tp", "8", "--place", place}
		flows := mustRun(t, t24, "simccl-decompose", append(args, "--granularity", "flow", "--summary")...)
		var algos []string
		for _, l := range strings.Split(string(flows), "\n") {
			if f := strings.Fields(l); len(f) > 7 && f[0] == "allreduce" {
				algos = append(algos, f[7])
			}
		}
		even := map[bool]int{true: 0, false: 1}[place == "4-11,0-1,16-21"] // the 4 + 4 group's index
		if len(algos) != 2 || algos[even] != "nvls-tree" || strings.HasPrefix(algos[1-even], "nvls") {
			t.Errorf("--place %s: algorithms %v, want nvls-tree on 4 + 4 and no NVLS on 2 + 6", place, algos)
		}
		want := span(t, mustRun(t, mustRun(t, t24, "simccl-decompose", append(args, "--granularity", "flow")...), "flowsim-analytical"))
		coll := mustRun(t, t24, "simccl-decompose", append(args, "--granularity", "collective")...)
		for _, exp := range [][]string{nil, {"--expand"}} {
			got := span(t, mustRun(t, coll, "flowsim-analytical", exp...))
			if r := float64(got) / float64(want); r < 0.95 || r > 1.05 {
				t.Errorf("--place %s %v: collective granularity %d ns, flows %d ns (%.3f)", place, exp, got, want, r)
			}
		}
	}
}

// An NVLS-Tree AllReduce does not get faster as it grows (issue 30):
// under h100-ib and h100-efa, on 2 x 8 H100 (1-20 MiB in 1 MiB steps,
// 24, 25, 32, 33, 48-72 MiB in 8 MiB steps and 65 MiB) and 4 x 8 (4-8,
// 24, 25, 27 and 28 MiB), each size takes at
// least 98% of the longest time of the sizes below it, as NCCL's own
// model (preset=none) has it. NCCL's chunk per head doubles at 8 MiB (2 x
// 8: 32 to 64 KiB; 4 x 8: 32 to 64 KiB) and at 64 MiB (64 to 128 KiB),
// which halves a channel's loops; while a loop cost a proxy round
// whatever its chunk (proxy-op 1.6 us on IB, 2.4 on EFA, 51.2 and 76.8
// us a loop) the time fell there, by 13-28% at 10ce912 (collective
// granularity, fluid): 2 x 8 h100-ib 5 MiB 186.9 us, 8 MiB 152.9; 56 MiB
// 460.1, 64 MiB 367.0; h100-efa 5 MiB 292.5, 8 MiB 232.9; 56 MiB 693.7,
// 64 MiB 497.8; 4 x 8 h100-ib 5 MiB 234.5, 8 MiB 203.2; h100-efa 396.1,
// 339.2. A loop's cost now grows with its shard (the GPU's reduce work,
// nvls-tree-op, nvls-tree-bw) and the proxy's op is 0.3 us. Sizes whose
// last loop is short (25, 33, 65 MiB; 4 x 8 25, 28 MiB) fell 8-14% while
// the closed form took that loop as ending its own bytes after its work
// (2 x 8 h100-ib 24 MiB 250.5 us, 25 MiB 229.5; 64 MiB 576.3, 65 MiB
// 494.2), where the flows' short loop queues behind the full one before
// it on every tree connection.
func TestNVLSTreeMonotone(t *testing.T) {
	t.Parallel()
	var small []int64
	for m := int64(1); m <= 20; m++ {
		small = append(small, m<<20)
	}
	small = append(small, 24<<20, 25<<20, 32<<20, 33<<20)
	for m := int64(48); m <= 72; m += 8 {
		small = append(small, m<<20)
		if m == 64 {
			small = append(small, 65<<20)
		}
	}
	cases := []struct {
		gpus  int
		sizes []int64
	}{{16, small}, {32, []int64{4 << 20, 5 << 20, 6 << 20, 7 << 20, 8 << 20, 24 << 20, 25 << 20, 27 << 20, 28 << 20}}}
	for _, c := range cases {
		for _, preset := range []string{"h100-ib", "h100-efa"} {
			checkMonotone(t, fmt.Sprintf("%d x 8 %s NVLS-Tree AllReduce", c.gpus/8, preset), c.gpus, c.sizes, "--algo", "nvls-tree", "--transport", "preset="+preset)
		}
	}
}

// A tree LL128 AllReduce under h100-efa does not get faster as it grows
// (issue 30): on 2 x 8 and 4 x 8 H100 at 1-20 MiB in 1 MiB steps (NCCL's
// choice there on p5), each size takes at least 98% of the longest time
// of the sizes below it (collective granularity, fluid). NCCL doubles a
// tree LL128 chunk as the size grows (enqueue.cc calcCollChunking: 18000,
// 36000 and 72000 bytes from 1, 4 and 7 MiB on 2 x 8), so a channel runs
// fewer, larger steps there. With h100-efa's tree step at 7 us of fixed
// work plus its inputs at NCCL's 36.7 GB/s a channel, the fixed work
// outweighed the bytes and the time fell at bf501e1: 2 x 8 3 MiB 182.2
// us, 4 MiB 167.9; 6 MiB 201.9, 7 MiB 187.7; 4 x 8 4 MiB 272, 5 MiB 247;
// 8 MiB 299, 9 MiB 271. The p5 2 x 8 sweep's own sizes put a step at
// about 3-4 us plus its bytes at 7-8 GB/s a channel, under which 3 to 4
// MiB and 6 to 7 MiB are flat within 2% although NCCL's step count drops
// by a third; refitted there (tree-op 4 us, tree-bw 30 GB/s, each network
// step leaving whole after its sender's work: tree-ll128-send=whole) the
// falls are under 1%. Between whole MiB the curve still steps where the
// count drops most: 2.83 to 3.36 MiB (11 steps of 18000 bytes to 7 of
// 36000) falls 4.3%, which the sweep's own law puts at 5-6%: NCCL's
// mechanism, not asserted. h100-ib has no tree step (its tree LL128 steps are
// paced by their step cost whatever their bytes) and, forced to Tree
// LL128, falls 11% at 3 to 4 MiB on 2 x 8 and 12% at 4 to 5 MiB on 4 x 8;
// NCCL's model runs NVLS-Tree there on InfiniBand, and no InfiniBand sweep
// here runs Tree LL128 at these sizes to fit a step on: not asserted.
func TestTreeLL128Monotone(t *testing.T) {
	t.Parallel()
	var sizes []int64
	for m := int64(1); m <= 20; m++ {
		sizes = append(sizes, m<<20)
	}
	for _, gpus := range []int{16, 32} {
		checkMonotone(t, fmt.Sprintf("%d x 8 h100-efa Tree LL128 AllReduce", gpus/8), gpus, sizes, "--algo", "tree", "--proto", "ll128", "--transport", "preset=h100-efa")
	}
}

// A single-server NVLS AllReduce does not get faster as it grows from 8
// to 256 MiB (issue 30): on one H100 server under h100-ib, four sizes
// an octave, each at least 98% of the longest time below it (collective
// granularity, fluid). The DAG's chunk is raised to a channel's bytes /
// 64 (--max-chunks 16, four times for NVLS), and a transfer that was not
// a whole number of NCCL's chunks paid its last chunk's GPU work whole
// (nvlsChunkPs): at bf501e1 32 MiB took 206.7 us, 38-54 MiB 324.3 and 64
// MiB 311.5; 64 MiB-128 MiB likewise (534.0 from 76 to 108 MiB). Below 8
// MiB the curve still falls where NCCL's chunk doubles (6.73 MiB 79.5 us,
// 8 MiB 70.4: a 16 KiB chunk pays the GPU's 0.5 us step beside its 0.2 us
// of work), where Voltage Park's 8 MiB measures 84.5 us (the model 0.83):
// the step's split between fixed work and bytes is not fitted there.
func TestNVLSMonotone(t *testing.T) {
	t.Parallel()
	var sizes []int64
	for e := 0; e <= 20; e++ {
		sizes = append(sizes, int64(math.Round(math.Exp2(23+float64(e)/4)/256))*256)
	}
	checkMonotone(t, "1 x 8 h100-ib NVLS AllReduce", 8, sizes, "--algo", "nvls", "--transport", "preset=h100-ib")
}

// checkMonotone asserts that an AllReduce of each of sizes (ascending) on
// gpus H100s (spectrum-x, 400G NICs) over data parallelism, decomposed
// with args at collective granularity and run through fluid, takes at
// least 98% of the longest time of the sizes below it (what: the case).
func checkMonotone(t *testing.T, what string, gpus int, sizes []int64, args ...string) {
	t.Helper()
	var wl strings.Builder
	for _, s := range sizes {
		fmt.Fprintf(&wl, "1 ALLREDUCE %d DP\n", s)
	}
	path := filepath.Join(t.TempDir(), "w.txt")
	if err := os.WriteFile(path, []byte(wl.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	topo := mustRun(t, mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", strconv.Itoa(gpus), "--gpu-type", "H100", "--nic-bw", "400Gbps"), "ncclpath")
	st := mustRun(t, topo, "simccl-decompose", append([]string{"--workload", path, "--group", "dp", "--tp", "1", "--granularity", "collective"}, args...)...)
	first, last, size := collSpansSizes(t, mustRun(t, st, "flowsim-analytical", "--model", "fluid"))
	us := map[int64]float64{}
	for id, f := range first {
		us[size[id]] = float64(last[id]-f) / 1e3
	}
	if len(us) != len(sizes) {
		t.Fatalf("%s: %d sizes timed, want %d", what, len(us), len(sizes))
	}
	var most float64 // the longest time below this size
	var at int64
	for _, s := range sizes {
		if us[s] < 0.98*most {
			t.Errorf("%s: %d MiB takes %.1f us, %d MiB %.1f: falls %.1f%% as the size grows", what, s>>20, us[s], at>>20, most, 100*(1-us[s]/most))
		}
		if us[s] > most {
			most, at = us[s], s
		}
	}
}
