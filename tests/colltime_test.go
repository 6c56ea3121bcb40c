package tests

import "testing"

// simccl-decompose --coll-time links times a COLL node by the flows'
// mechanism: NCCL's latency terms plus the bytes the decomposition puts
// on each GPU's NVLink and NIC over their rates (collective.linkBwPs), in
// place of NCCL's model bandwidth. On the Voltage Park shape (4 x 8 H100,
// 400G) its time meets flow granularity's through fluid within 5% where
// the latency and the bytes do not overlap across channels: AllReduce at
// 4 MiB (NVLS-Tree, latency-bound), 128 MiB (NVLS-Tree) and 2 GiB (ring,
// bytes-bound); AllGather at 1 MiB and 4 MiB (LL128 ring, latency-bound)
// and 1 GiB (Simple ring). Between them (AllReduce 8-64 MiB and the
// Simple ring's 256-512 MiB, AllGather 8-512 MiB) flow granularity's
// channels hide up to 40% of a ring's or tree's hop latencies behind
// each other's bytes, which this sum does not: collective granularity is
// up to 1.3x slower there (README; AllReduce 256 MiB 1.235, since the
// ring graph's 8 x 48 GB/s moved it from NVLS-Tree to the ring). NCCL's
// model time failed it at four sizes when written (AllReduce 256 MiB,
// then NVLS-Tree, and 2 GiB, AllGather 4 MiB and 1 GiB: 1.06-1.24x).
func TestCollTimeLinksAgree(t *testing.T) {
	t.Parallel()
	fl := []string{"flowsim-analytical", "--model", "fluid"}
	for _, c := range []struct{ op, sweep string }{
		{"allreduce", "4MiB:128MiB:32"}, {"allreduce", "2GiB:2GiB:2"},
		{"allgather", "1MiB:4MiB:4"}, {"allgather", "1GiB:1GiB:2"},
	} {
		flow := sweepBackend(t, c.op, 32, c.sweep, fl, "--granularity", "flow")
		coll := sweepBackend(t, c.op, 32, c.sweep, fl, "--granularity", "collective", "--coll-time", "links")
		if len(flow) == 0 || len(coll) != len(flow) {
			t.Fatalf("%s %s: %d flow sizes, %d collective sizes", c.op, c.sweep, len(flow), len(coll))
		}
		for size, f := range flow {
			if r := coll[size] / f; r < 0.95 || r > 1.05 {
				t.Errorf("%s %d B: collective %.1f us, flow %.1f us (%.3f), want within 5%%", c.op, size, coll[size], f, r)
			}
		}
	}
}

// Under the calibrated transport (issue 30) collective granularity times
// a COLL node by the transport's mechanism in closed form (collective
// ringCyclePs, ringPathPs, nvlsTreePs, treePs), so that it agrees with
// flow granularity through fluid within 5% on the Voltage Park shape (4 x
// 8 H100, 400G), at every size of the VP sweeps from 1 MiB to 4 GiB:
// AllReduce (tree LL128 at 1 MiB, NVLS-Tree to 128 MiB, Simple ring from
// 256 MiB) and AllGather (LL128 ring to 64 MiB, Simple ring from 128
// MiB). Before, the Simple rings were 1.10 of flow granularity (every
// hop's fixed work on top of NCCL's bandwidth, where fluid hides it
// behind the bytes of channels out of phase), NVLS-Tree 0.75-0.91 at 2-8
// MiB (one chunk per channel, whose stages run in series), the tree 1.24
// at 1 MiB, and the LL128 ring 1.07-1.31 at 8-64 MiB: it took NCCL's
// model time plus the fill, where its one loop is a datum's diagonal
// through the ring, every network hop paying its latency and step cost
// beyond the slice's work and making its channel lag the rings that have
// not crossed yet (ringPathPs). The LL128 ring of AllGather on 2 x 8 and
// 8 x 8 (1-64 MiB) is held to the same (8 x 8 at 32 MiB was 1.061 while a
// GPU's NVLink steps after the datum's first server crossing took a
// lagging half's share; the flows' take their own group's). NVLS-Tree
// sizes whose last loop is short (2 x 8 at 14, 18, 21, 25 and 65 MiB, 4
// x 8 at 28 MiB) are held too: the closed form started the last loop a
// loop's work minus its own short work early, where the flows hold each
// loop's reduced shard by the loop before's work (21 MiB was 0.926, 18
// MiB 0.954, 25 MiB 0.972; 1.005, 0.998 and 0.996 now; every size of 2 x
// 8 9-33 MiB and 4 x 8 20-40 MiB is inside, the lowest 2 x 8 14 MiB at
// 0.952). -short runs seven sizes, one of them the LL128 ring's 16 MiB,
// and of the NVLS-Tree ones 2 x 8 21 MiB and 4 x 8 28 MiB.
func TestTransportCollFlowAgree(t *testing.T) {
	t.Parallel()
	fl := []string{"flowsim-analytical", "--model", "fluid"}
	tr := []string{"--transport", "preset=h100-ib"}
	type sweep struct {
		op, sweep  string
		gpus, want int
	}
	cases := []sweep{{"allreduce", "1MiB:4GiB:2", 32, 13}, {"allgather", "1MiB:4GiB:2", 32, 13}, {"allgather", "1MiB:64MiB:2", 16, 7}, {"allgather", "1MiB:64MiB:2", 64, 7}}
	if testing.Short() {
		cases = []sweep{{"allreduce", "1MiB:8MiB:8", 32, 0}, {"allreduce", "1GiB:1GiB:2", 32, 0}, {"allgather", "16MiB:16MiB:2", 32, 0}, {"allgather", "256MiB:256MiB:2", 32, 0}}
	}
	// NVLS-Tree with a short last loop.
	cases = append(cases, sweep{"allreduce", "21MiB:21MiB:2", 16, 1}, sweep{"allreduce", "28MiB:28MiB:2", 32, 1})
	if !testing.Short() {
		cases = append(cases, sweep{"allreduce", "14MiB:14MiB:2", 16, 1}, sweep{"allreduce", "18MiB:18MiB:2", 16, 1}, sweep{"allreduce", "25MiB:25MiB:2", 16, 1}, sweep{"allreduce", "65MiB:65MiB:2", 16, 1})
	}
	n := 0
	for _, c := range cases {
		flow := sweepBackend(t, c.op, c.gpus, c.sweep, fl, append(tr, "--granularity", "flow")...)
		coll := sweepBackend(t, c.op, c.gpus, c.sweep, fl, append(tr, "--granularity", "collective")...)
		if len(flow) == 0 || len(coll) != len(flow) {
			t.Fatalf("%s %s: %d flow sizes, %d collective sizes", c.op, c.sweep, len(flow), len(coll))
		}
		if c.want > 0 && len(flow) != c.want {
			t.Fatalf("%s %s on %d GPUs: %d sizes, want %d", c.op, c.sweep, c.gpus, len(flow), c.want)
		}
		for size, f := range flow {
			n++
			if r := coll[size] / f; r < 0.95 || r > 1.05 {
				t.Errorf("%s %d B on %d GPUs: collective %.1f us, flow %.1f us (%.3f), want within 5%%", c.op, size, c.gpus, coll[size], f, r)
			}
		}
	}
	if n < 5 {
		t.Fatalf("%d sizes compared", n)
	}
}

// Under h100-efa (AWS p5: aws-ofi-nccl's p5 tuner regions, Tree LL128,
// Ring LL128 to 1.3 GiB on 32 ranks and 2 GiB on 64, then Ring Simple)
// collective granularity agrees with flow granularity through fluid
// within 5% at every size of the 4 x 8 and, without -short, 8 x 8
// AllReduce (32 MiB-4 GiB) and AllGather (32 MiB-2 GiB) sweeps (0.98-1.02
// when written). The Ring LL128 AllReduce (4 x 8 128 MiB-1 GiB, 8 x 8 256
// MiB-2 GiB) was 0.80-0.86: the ring's diagonal alone, where a network
// connection's own 62 (126) steps in order, each its fixed work and its
// bytes at the NIC share, take longer (ringPathPs' conn); 1.03 with that
// but without the path latency a flow adds after its last byte has left,
// when its connection's next step starts. AllGather's LL128 ring at 32
// MiB on 4 x 8 (64 MiB on 8 x 8) was 1.056 (1.076): EFA's first-loop
// network latency drifts the rings apart by more than a step's cycle, and
// after the datum's first server crossing a GPU's NVLink steps go at
// their own group's share, not the lagging half's. -short runs the 4 x 8
// AllReduce at 256 MiB and 1 GiB and AllGather at 32 MiB.
func TestTransportP5CollFlowAgree(t *testing.T) {
	t.Parallel()
	fl := []string{"flowsim-analytical", "--model", "fluid"}
	tr := []string{"--transport", "preset=h100-efa"}
	type sweep struct {
		op, sweep  string
		gpus, want int
	}
	cases := []sweep{{"allreduce", "32MiB:4GiB:2", 32, 8}, {"allgather", "32MiB:2GiB:2", 32, 7}, {"allreduce", "32MiB:4GiB:2", 64, 8}, {"allgather", "32MiB:2GiB:2", 64, 7}}
	if testing.Short() {
		cases = []sweep{{"allreduce", "256MiB:1GiB:4", 32, 2}, {"allgather", "32MiB:32MiB:2", 32, 1}}
	}
	for _, c := range cases {
		flow := sweepBackend(t, c.op, c.gpus, c.sweep, fl, append(tr, "--granularity", "flow")...)
		coll := sweepBackend(t, c.op, c.gpus, c.sweep, fl, append(tr, "--granularity", "collective")...)
		if len(flow) != c.want || len(coll) != len(flow) {
			t.Fatalf("%s %s on %d GPUs: %d flow sizes, %d collective sizes, want %d", c.op, c.sweep, c.gpus, len(flow), len(coll), c.want)
		}
		for size, f := range flow {
			if r := coll[size] / f; r < 0.95 || r > 1.05 {
				t.Errorf("%s %d B on %d GPUs: collective %.1f us, flow %.1f us (%.3f), want within 5%%", c.op, size, c.gpus, coll[size], f, r)
			}
		}
	}
}

// NVLS-Tree under a user-set small proxy-op (VP 4 x 8 H100, h100-ib; the
// preset's 0.3 us is held by TestTransportCollFlowAgree, 0.985-1.016 at
// 1-128 MiB): collective against flow granularity within 5% at 1-128
// MiB, 0.980-1.041 when written (op 0.2: 0.983-1.028, op 0.1:
// 0.980-1.041) with the preset's proxy op at 1.6 us and no loop work;
// with a loop's work (nvls-tree-bw) 0.983-1.009 and 0.982-0.999. nvlsTreePs took the
// last channel as alone on each stage's NIC, 0.4 (0.2) us after the one
// before, where a stage's shard takes 1.3 us there and the channels
// share it: 0.85-0.95 (0.81-0.95) at 4-16 MiB. Then the steady cycle, all
// stages' bytes on the busiest NIC per chunk, took 1.03-1.12 from 16 MiB,
// and the busiest NIC's bytes in series from the first stage 0.91-0.95 at
// 64-128 MiB (nvlsStage.dirs). With op 0 it is 1.00-1.036 but 1.055 at
// 32 MiB (the stages' pipeline bound; 1.09-1.18 at 16-128 MiB before).
func TestTransportNVLSTreeProxyOpCollFlow(t *testing.T) {
	t.Parallel()
	topo := mustRun(t, mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "32", "--gpu-type", "H100", "--nic-bw", "400Gbps"), "ncclpath")
	for _, op := range []string{"0.2", "0.1"} {
		t.Run("proxy-op="+op, func(t *testing.T) {
			checkCollFlow(t, topo, 8, "--sweep", "1MiB:128MiB:2", "--transport", "preset=h100-ib,proxy-op="+op)
		})
	}
}
