package tests

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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

// sweepRatios runs an nccl-tests sweep of op on gpus H100s (8 per server,
// 400G NICs) through fluid and returns simulated / measured per size.
func sweepRatios(t *testing.T, op string, gpus int, ref string, args ...string) map[int64]float64 {
	t.Helper()
	pub := measuredUs(t, ref)
	topo := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", strconv.Itoa(gpus), "--gpu-type", "H100", "--nic-bw", "400Gbps")
	st := mustRun(t, mustRun(t, topo, "ncclpath"), "simccl-decompose", append([]string{"--op", op, "--group", "dp", "--tp", "1", "--sweep", "1MiB:4GiB:2"}, args...)...)
	rows, _ := readTrace(t, mustRun(t, st, "flowsim-analytical", "--model", "fluid"))
	first, last := collSpans(rows)
	size := map[int64]int64{}
	for _, r := range rows {
		if r.CollectiveID >= 0 {
			size[r.CollectiveID] = r.CollSizeBytes
		}
	}
	out := map[int64]float64{}
	for id, f := range first {
		if us, ok := pub[size[id]]; ok {
			out[size[id]] = float64(last[id]-f) / 1e3 / us
		}
	}
	return out
}

// The NCCL transport's per-step costs calibrated for H100 over 400G
// InfiniBand (--transport preset=h100-ib, issue 30) bring the 32-GPU
// AllReduce sweep of Voltage Park, which they are calibrated on, within
// [0.65, 1.25] of the measured time at every size from 1 MiB to 4 GiB;
// without them (the default) fluid is 0.50x at 8-16 MiB. Sizes beyond 20%
// are logged: the target, not yet met there (256 MiB stays at
// 0.66, as without the costs: paid on the fill and as a pace, not in
// series with every chunk, they do not reach the bandwidth-bound sizes).
func TestTransportVPAllReduce(t *testing.T) {
	t.Parallel()
	check := func(r map[int64]float64, lo, hi float64, what string) (bad int) {
		for size, x := range r {
			if x < lo || x > hi {
				bad++
				t.Logf("%s %d B: simulated / measured %.2f outside [%.2f, %.2f]", what, size, x, lo, hi)
			}
		}
		return bad
	}
	r := sweepRatios(t, "allreduce", 32, "vp-4x8h100-ib_allreduce_nccl-2.24.csv", "--transport", "preset=h100-ib")
	if len(r) != 13 {
		t.Fatalf("%d sizes compared, want 13 (1 MiB to 4 GiB)", len(r))
	}
	if check(r, 0.65, 1.25, "transport") > 0 {
		t.Errorf("VP AllReduce: some sizes outside [0.65, 1.25] of measured")
	}
	check(r, 0.8, 1.2, "target (issue 30, logged)")
	free := sweepRatios(t, "allreduce", 32, "vp-4x8h100-ib_allreduce_nccl-2.24.csv")
	if check(free, 0.70, 1.25, "no transport costs") == 0 {
		t.Errorf("without the transport's costs the sweep also fits: the test no longer tells them apart")
	}
}

// Bad transport parameters exit 1 with one line naming the key.
func TestTransportBadInput(t *testing.T) {
	topo := mustRun(t, nil, "topogen", "--gpus", "8")
	for _, kv := range []string{"preset=h200", "slots=0", "send-proxy=-1", "gpu-step=-0.5", "recv-proxy=x", "nonsense=1"} {
		key, _, _ := strings.Cut(kv, "=")
		oneLineError(t, run(t, topo, "simccl-decompose", "--op", "allreduce", "--size", "1MiB", "--tp", "8", "--transport", kv), 1, key)
	}
}

// sweepBackend runs a sweep of op on gpus H100s through a backend
// command and returns simulated time (us) per size.
func sweepBackend(t *testing.T, op string, gpus int, sweep string, backend []string, args ...string) map[int64]float64 {
	t.Helper()
	topo := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", strconv.Itoa(gpus), "--gpu-type", "H100", "--nic-bw", "400Gbps")
	st := mustRun(t, mustRun(t, topo, "ncclpath"), "simccl-decompose", append([]string{"--op", op, "--group", "dp", "--tp", "1", "--sweep", sweep}, args...)...)
	rows, _ := readTrace(t, mustRun(t, st, backend[0], backend[1:]...))
	first, last := collSpans(rows)
	size := map[int64]int64{}
	for _, r := range rows {
		if r.CollectiveID >= 0 {
			size[r.CollectiveID] = r.CollSizeBytes
		}
	}
	out := map[int64]float64{}
	for id, f := range first {
		out[size[id]] = float64(last[id]-f) / 1e3
	}
	return out
}

// With the transport's costs (issue 30), packet and fluid agree within 5%
// at every size of the VP AllReduce and AllGather mid range: both pay a
// connection's step costs on the fill and as the same pace (stream
// pace_ps, flowset.Pacer). When every chunk paid them in series on its
// delay_ps, the packet backend, whose last byte leaves the NIC at line
// rate, hid them and ended 10-35% before fluid at 4-64 MiB.
func TestTransportPacketFluidAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("packet sweeps take a minute")
	}
	t.Parallel()
	for _, op := range []string{"allreduce", "allgather"} {
		tr := []string{"--transport", "preset=h100-ib"}
		fl := sweepBackend(t, op, 32, "4MiB:32MiB:2", []string{"flowsim-analytical", "--model", "fluid"}, tr...)
		pk := sweepBackend(t, op, 32, "4MiB:32MiB:2", []string{"flowsim-packet"}, tr...)
		if len(fl) != 4 || len(pk) != 4 {
			t.Fatalf("%s: %d and %d sizes, want 4", op, len(fl), len(pk))
		}
		for size, f := range fl {
			if r := pk[size] / f; r < 0.95 || r > 1.05 {
				t.Errorf("%s %d B: packet %.1f us, fluid %.1f us (%.3f), want within 5%%", op, size, pk[size], f, r)
			}
		}
	}
}

// The calibrated preset keeps the held-out VP AllGather sweep between
// 0.53x and 1.25x of measured through fluid at every size from 1 MiB to
// 4 GiB (0.55-0.67 at 4-64 MiB; the 20% is not met there), and the
// plateaus of the calibration sweep where the transport-free model puts
// them (0.85-0.95 from 1 GiB up).
func TestTransportHeldOutAllGather(t *testing.T) {
	t.Parallel()
	r := sweepRatios(t, "allgather", 32, "vp-4x8h100-ib_allgather_nccl-2.24.csv", "--transport", "preset=h100-ib")
	if len(r) != 13 {
		t.Fatalf("%d sizes compared, want 13", len(r))
	}
	for size, x := range r {
		if x < 0.53 || x > 1.25 {
			t.Errorf("AllGather %d B: simulated / measured %.2f outside [0.53, 1.25]", size, x)
		}
	}
	ar := sweepRatios(t, "allreduce", 32, "vp-4x8h100-ib_allreduce_nccl-2.24.csv", "--transport", "preset=h100-ib")
	for size, x := range ar {
		if size >= 1<<30 && (x < 0.85 || x > 0.95) {
			t.Errorf("AllReduce plateau %d B: %.2f of measured, want 0.85-0.95 (the model's bandwidth, as without the transport)", size, x)
		}
	}
}
