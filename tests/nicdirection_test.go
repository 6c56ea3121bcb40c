package tests

import (
	"strconv"
	"testing"
)

// nicSweep is a size sweep's times (us, by size) of op on the data-parallel
// group of gpus GPUs of gpuType on a Spectrum-X fabric with NICs of nicGbps,
// under the default (calibrated) transport unless args say otherwise,
// through fluid.
func nicSweep(t *testing.T, gpuType string, gpus, nicGbps int, op, sweep, granularity string, args ...string) map[int64]float64 {
	t.Helper()
	topo := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", strconv.Itoa(gpus), "--gpu-type", gpuType, "--nic-bw", strconv.Itoa(nicGbps)+"Gbps")
	st := mustRun(t, mustRun(t, topo, "ncclpath"), "simccl-decompose", append([]string{"--op", op, "--group", "dp", "--sweep", sweep, "--granularity", granularity}, args...)...)
	first, last, size := collSpansSizes(t, mustRun(t, st, "flowsim-analytical", "--model", "fluid"))
	out := map[int64]float64{}
	for id, f := range first {
		out[size[id]] = float64(last[id]-f) / 1e3
	}
	return out
}

// A faster NIC never makes a collective more than 2% slower where NCCL
// runs it the same way (issue 30: test the direction of an effect, over
// every size of the curve). Written for 2 x 8 A100s whose 4-128 MiB
// AllGather and 16-128 MiB AllReduce NCCL's model ran as LL128 rings on 22
// channels at 400G and 800G, the bytes paced by the NVLink: an LL128
// step's copy set against the NICs' share alone put 3.9-12 us in series
// with every step at 800G (1.16-1.19x 400G's time; 4 x 8 64 MiB AllReduce
// 985.8 against 1107.9 us), against the slower link (ringWireGBps) it
// hides. Now NCCL's search counts the A100's PCIe Gen4 link (16 channels)
// and topogen caps an A100's NIC link at what Gen4 x16 carries (226.4
// Gb/s), so 400G and 800G build the same fabric and must take the same
// time: these cases guard the cap. The copy rule itself is checked by
// TestLL128CopyBehindTheSlowerLink (hand-computed); H100 at 400 against
// 800G does not reach it here (the same times with the NICs' share alone)
// and its 32 MiB AllGather is 1.04x slower at 800G, the network-fed
// channels' sooner lag the NVLink lock does not model (README), so it is
// left out.
func TestFasterNICNotSlowerSamePlan(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		op, sweep   string
		gpus, sizes int
	}{
		{"allreduce", "16MiB:128MiB:2", 16, 4},
		{"allgather", "4MiB:64MiB:2", 16, 5},
		{"allreduce", "64MiB:64MiB:2", 32, 1},
	} {
		slow := nicSweep(t, "A100", c.gpus, 400, c.op, c.sweep, "collective")
		fast := nicSweep(t, "A100", c.gpus, 800, c.op, c.sweep, "collective")
		if len(slow) != c.sizes || len(fast) != len(slow) {
			t.Fatalf("%s on %d GPUs: %d and %d sizes, want %d", c.op, c.gpus, len(slow), len(fast), c.sizes)
		}
		for size, ts := range slow {
			if tf, ok := fast[size]; !ok || tf != ts {
				t.Errorf("A100 %d x 8 %s %d B: 800G %.1f us against 400G %.1f (x%.3f)", c.gpus/8, c.op, size, tf, ts, tf/ts)
			}
		}
	}
	// The flows: the same fabric, the same time.
	if testing.Short() {
		return
	}
	slow := nicSweep(t, "A100", 16, 400, "allreduce", "64MiB:64MiB:2", "flow")
	fast := nicSweep(t, "A100", 16, 800, "allreduce", "64MiB:64MiB:2", "flow")
	if ts, tf := slow[64<<20], fast[64<<20]; ts == 0 || tf != ts {
		t.Errorf("A100 2 x 8 allreduce 64 MiB, flows: 800G %.1f us against 400G %.1f", tf, ts)
	}
}

// NCCL's channel search takes each channel's bandwidth off every link of
// a GPU's path to its NIC, the GPU's PCIe link included (search.cc
// followPath), and an A100 reaches its NIC over PCIe Gen4 x16 (24 GB/s):
// from 200G up a NIC faster than that path carries no more channels, and
// 2 x 8 A100s get 8 x 24 GB/s (16 at run time) at 200, 275, 300, 400 and
// 800G alike, so under NCCL's own model (preset=none) a ring takes the
// same time at every rate. Counting the port alone gave 32, 28, 22 and 22
// channels above 200G and a faster NIC up to 4.7% slower (ring AllReduce
// 64 MiB: 617.9 us at 300G, 647.1 at 400 and 800G; AllGather 8-32 MiB
// 1.023-1.041x from 300 to 400G). It fails on bf501e1, but topogen now
// also caps an A100's NIC link at what its PCIe carries (226.4G), and
// that link alone gives the same channels as the search's floor (28.3
// GB/s against 24): so it guards the cap as much as the search, which
// pkg/nccl's TestSearchWorkedExamples guards alone (the port set as NCCL
// reads it).
func TestA100NICRatesNCCLModel(t *testing.T) {
	t.Parallel()
	rates := []int{200, 275, 300, 400, 800}
	for _, op := range []string{"allreduce", "allgather"} {
		times := make([]map[int64]float64, len(rates))
		for i, r := range rates {
			times[i] = nicSweep(t, "A100", 16, r, op, "8MiB:64MiB:2", "collective", "--algo", "ring", "--transport", "preset=none")
			if len(times[i]) != 4 {
				t.Fatalf("%s at %dG: %d sizes, want 4", op, r, len(times[i]))
			}
		}
		for size := range times[0] {
			for i := range rates {
				for j := i + 1; j < len(rates); j++ {
					if slow, fast := times[i][size], times[j][size]; fast > 1.02*slow {
						t.Errorf("A100 2 x 8 ring %s %d B, preset=none: %dG %.1f us against %dG %.1f (x%.3f)", op, size, rates[j], fast, rates[i], slow, fast/slow)
					}
				}
			}
		}
	}
}
