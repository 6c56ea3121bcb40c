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
// [0.70, 1.25] of the measured time at every size from 1 MiB to 4 GiB;
// without them (the default) fluid is 0.50x at 8-16 MiB. Sizes beyond 20%
// are logged: the target, not yet met there.
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
	if check(r, 0.70, 1.25, "transport") > 0 {
		t.Errorf("VP AllReduce: some sizes outside [0.70, 1.25] of measured")
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
