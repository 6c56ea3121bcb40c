package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// backendRun is one way to run a stream: the program, its flags, and
// whether it takes the collective-granularity stream.
type backendRun struct {
	name       string
	prog       string
	args       []string
	collective bool
}

// The fabric matters in every backend, in the right direction: on a
// 128-GPU k=16 fat-tree whose edge switches keep their eight GPU NICs (one
// server each) while their uplinks thin from 8 to 4 to 2
// (--oversubscribe-by uplinks), a DP ring AllReduce (tp 8: every ring hop
// leaves its server) and an AllToAll (ep 128) never get faster, and at 4:1
// each takes at least twice its NIC bytes' time (2(n-1)/n and 120/128 of
// the size over 400 Gb/s) more than at 1:1: the uplinks carry all the
// cross-server bytes at a quarter of the NICs' rate, which adds three
// times it, less what the transport's per-step costs (the default) hide
// (with NCCL's model latencies alone, preset=none, 4:1 took 2.2x the 1:1
// time; with the transport's fixed costs in series, 1.9x). The AllToAll
// runs without the proxy's per-op cost (p2p-op=0): under h100-ib's 1.6
// us a rail GPU posts its 240 sends and receives over 384 us (a2aPosts),
// five times its NIC bytes: 442, 448 and 481 us at 1:1, 2:1 and 4:1 as
// flows, 442, 448 and 473 at collective granularity under ecmp
// (TestOversubscriptionDefaultAllToAll): the proxy more than the fabric
// sets that collective. Fluid and busbw at
// flow and collective granularity, and the packet backend, each under ecmp
// and adaptive routing (and spray in make test-long). On the 1:1 tree the
// packets take the flows' fluid time within 10%.
func TestOversubscriptionNeverFaster(t *testing.T) {
	t.Parallel() // a heavy end-to-end test: make test runs two at a time
	work := map[string][]string{
		"DP AllReduce": {"--op", "allreduce", "--size", "4MiB", "--group", "dp", "--tp", "8"},
		"AllToAll":     {"--op", "alltoall", "--size", "4MiB", "--group", "ep", "--ep", "128", "--transport", "p2p-op=0"},
	}
	nicNs := map[string]float64{"DP AllReduce": 2 * 15.0 / 16 * (4 << 20) * 8 / 400, "AllToAll": 120.0 / 128 * (4 << 20) * 8 / 400}
	var backends []backendRun
	routings := []string{"ecmp", "adaptive"}
	if !testing.Short() {
		routings = append(routings, "spray")
	}
	for _, routing := range routings {
		for _, m := range []string{"fluid", "busbw"} {
			// With one collective in the stream, busbw's flows share the
			// links among themselves exactly as fluid's do (the same
			// solver): make test-long runs that copy too.
			if m == "fluid" || !testing.Short() {
				backends = append(backends, backendRun{m + " flows " + routing, "flowsim-analytical", []string{"--model", m, "--routing", routing}, false})
			}
			backends = append(backends, backendRun{m + " collective " + routing, "flowsim-analytical", []string{"--model", m, "--routing", routing}, true})
		}
		backends = append(backends, backendRun{"packet " + routing, "flowsim-packet", []string{"--routing", routing}, false})
	}
	ratios := []int{1, 2, 4}
	ends := map[string][]int64{} // by workload and backend, per ratio
	for _, r := range ratios {
		tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "128",
			"--oversubscription", strconv.Itoa(r), "--oversubscribe-by", "uplinks")
		for w, args := range work {
			var st [2][]byte
			for i, g := range []string{"flow", "collective"} {
				st[i] = mustRun(t, tp, "simccl-decompose", append(append([]string{}, args...), "--granularity", g)...)
			}
			for _, b := range backends {
				in := st[0]
				if b.collective {
					in = st[1]
				}
				k := w + ", " + b.name
				ends[k] = append(ends[k], span(t, mustRun(t, in, b.prog, b.args...)))
			}
		}
	}
	for k, e := range ends {
		for i := 1; i < len(e); i++ {
			if e[i] < e[i-1] {
				t.Errorf("%s: %d:1 takes %d ns, %d:1 %d ns: more oversubscription ran faster", k, ratios[i], e[i], ratios[i-1], e[i-1])
			}
		}
		w, _, _ := strings.Cut(k, ", ")
		if float64(e[2]-e[0]) < 2*nicNs[w] {
			t.Errorf("%s: 4:1 takes %d ns, 1:1 %d ns, less than twice the NICs' %.0f ns more: the thin uplinks barely matter", k, e[2], e[0], nicNs[w])
		}
		t.Logf("%s: %s", k, fmt.Sprint(e))
	}
	// Packets against the flows' fluid model on the same routing: within
	// 10% on the non-blocking tree under ecmp and adaptive routing, and
	// never more than 10% faster (fluid shares every link max-min with
	// nothing lost). Sprayed, the 4 MiB AllToAll's packets take 12% more
	// than the even split at 1:1 (a flow ends with its last packet, on
	// whichever path queued most). With thin uplinks these few-MiB
	// collectives run 15-40% slower as packets: the AllToAll by DCQCN's
	// rate cuts (under PFC alone within 7% of fluid), the ring as slow
	// under PFC alone, its steps waiting on hops the pauses slow (README,
	// "flows against packets").
	for w := range work {
		for _, routing := range routings {
			fl, pk := ends[w+", fluid flows "+routing], ends[w+", packet "+routing]
			for i, r := range ratios {
				if float64(pk[i]) < 0.9*float64(fl[i]) || (r == 1 && routing != "spray" && float64(pk[i]) > 1.1*float64(fl[i])) {
					t.Errorf("%s, %s, %d:1: packets %d ns, fluid flows %d ns", w, routing, r, pk[i], fl[i])
				}
			}
		}
	}
}

// Under the default transport (ep 128 on the trees of
// TestOversubscriptionNeverFaster, fluid): a 256 MiB AllToAll's bytes
// outlast its proxies' posts, so it never gets faster as the uplinks thin
// and at 4:1 takes at least twice its NIC bytes' time (120/128 of the size
// over 400 Gb/s, 5.03 ms) more than at 1:1, at collective granularity
// (busbw and fluid; 6.57 ms at 1:1, 21.32 at 4:1 under ecmp) and as flows
// (make test-long: 6.71 and 21.41 ms, within 10% of the collective). At 4
// MiB the rail GPUs' posts (240 ops over 384 us) set most of it: each
// rail GPU's 15 connections are posted 16 ops apart, so the AllToAll goes
// as 15 bursts of one connection a GPU, and the last burst's bytes meet
// the uplinks (and, under ecmp, each other's collisions) after 384 us.
// Collective granularity prices each connection from its posting
// (stagger): as flows 442, 448 and 481 us at 1:1, 2:1 and 4:1 under ecmp,
// at collective granularity 442, 448 and 473 (426 at every ratio when
// the stagger was a pace beside every piece); adaptive 427, 432, 442 and
// 426, 431, 442. Every ratio within 10% of the flows, and 4:1 slower
// than 1:1 in every mode.
func TestOversubscriptionDefaultAllToAll(t *testing.T) {
	t.Parallel()
	type key struct {
		size, gran, model, routing string
	}
	sizes := map[string]float64{"4MiB": 0, "256MiB": 120.0 / 128 * (256 << 20) * 8 / 400}
	ends := map[key][]int64{}
	for _, r := range []int{1, 2, 4} {
		tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "128",
			"--oversubscription", strconv.Itoa(r), "--oversubscribe-by", "uplinks")
		for size := range sizes {
			for _, g := range []string{"collective", "flow"} {
				if g == "flow" && size == "256MiB" && testing.Short() {
					continue // 247 k flows: about 8 s a fluid run
				}
				st := mustRun(t, tp, "simccl-decompose", "--op", "alltoall", "--size", size, "--group", "ep", "--ep", "128", "--granularity", g)
				for _, routing := range []string{"ecmp", "adaptive"} {
					for _, m := range []string{"fluid", "busbw"} {
						if g == "flow" && m == "busbw" {
							continue
						}
						k := key{size, g, m, routing}
						ends[k] = append(ends[k], span(t, mustRun(t, st, "flowsim-analytical", "--model", m, "--routing", routing)))
					}
				}
			}
		}
	}
	for k, e := range ends {
		t.Logf("%v: %v", k, e)
		if e[1] < e[0] || e[2] < e[1] {
			t.Errorf("%v: 1:1, 2:1, 4:1 take %v ns: more oversubscription ran faster", k, e)
		}
		if e[2] <= e[0] {
			t.Errorf("%v: 1:1, 2:1, 4:1 take %v ns: the fabric does not show", k, e)
		}
		if nic := sizes[k.size]; nic > 0 && float64(e[2]-e[0]) < 2*nic {
			t.Errorf("%v: 4:1 takes %d ns, 1:1 %d ns, less than twice the NICs' %.0f ns more", k, e[2], e[0], nic)
		}
		if k.gran != "collective" || k.model != "fluid" {
			continue
		}
		fl, ok := ends[key{k.size, "flow", "fluid", k.routing}]
		if !ok {
			continue
		}
		for i, ratio := range []int{1, 2, 4} {
			checkRatio(t, fmt.Sprintf("%v at %d:1, collective / flows", k, ratio), float64(e[i])/float64(fl[i]), 0.9, 1.1, 0, false)
		}
	}
}

// Groups not aligned to servers (default transport, fluid, the trees of
// TestOversubscriptionDefaultAllToAll): a 4 MiB AllToAll with ep 6 packed
// on 8-GPU servers (ranks 0-5 in one server, 6-11 across two: the stage's
// representative's group sends nothing across servers) and with ep 12
// placed from GPU 4 (4 + 8 ranks a group: a server with 4 relays twice the
// connections on a longer proxy round). Collective granularity prices the
// widest group of the stage, each class of proxies on its own
// (collective.a2aClasses) and, under ecmp, the bytes of connections cut
// into K pieces between the draw's loads and the even split's (1/sqrt K):
// within 10% of the flows, and 4:1 slower than 1:1 in every mode.
// c84594d: ep 6 at 1:1 41 us against the flows' 188 under ecmp, 21
// against 183 adaptive; ep 12 at 1:1 adaptive 0.89, at 4:1 ecmp 0.76. Left: ep 12 at 4:1 under ecmp, 0.88
// (each wave of pieces into a server with 8 of the groups' ranks meets
// its own collisions on its edge's two downlinks; pricing the waves'
// collisions in series gives 0.99 there but 1.13-1.15 where they are not
// in series, 1:1 and ep 6).
func TestAllToAllUnalignedGroups(t *testing.T) {
	t.Parallel()
	cases := map[string][]string{"ep 6 packed": {"--ep", "6", "--place", "0-95"}, "ep 12 from GPU 4": {"--ep", "12", "--place", "4-99"}}
	type key struct{ c, gran, routing string }
	ends := map[key][]int64{}
	for _, r := range []int{1, 4} {
		tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "128",
			"--oversubscription", strconv.Itoa(r), "--oversubscribe-by", "uplinks")
		for c, args := range cases {
			for _, g := range []string{"collective", "flow"} {
				st := mustRun(t, tp, "simccl-decompose", append([]string{"--op", "alltoall", "--size", "4MiB", "--group", "ep", "--granularity", g}, args...)...)
				for _, routing := range []string{"ecmp", "adaptive"} {
					k := key{c, g, routing}
					ends[k] = append(ends[k], span(t, mustRun(t, st, "flowsim-analytical", "--model", "fluid", "--routing", routing)))
				}
			}
		}
	}
	for k, e := range ends {
		t.Logf("%v: 1:1 %d ns, 4:1 %d ns", k, e[0], e[1])
		if e[1] <= e[0] {
			t.Errorf("%v: 1:1 %d ns, 4:1 %d ns: the fabric does not show", k, e[0], e[1])
		}
		if k.gran != "collective" {
			continue
		}
		fl := ends[key{k.c, "flow", k.routing}]
		for i, ratio := range []int{1, 4} {
			miss := k.c == "ep 12 from GPU 4" && k.routing == "ecmp" && ratio == 4
			checkRatio(t, fmt.Sprintf("%v at %d:1, collective / flows", k, ratio), float64(e[i])/float64(fl[i]), 0.9, 1.1, 0.88, miss)
		}
	}
}

// Every collective's COLL node on groups not aligned to servers is
// planned and priced on its stage's slowest group, as an AllToAll's is:
// with --tp 6 on 96 GPUs of 8-GPU servers, the representative group 0-5
// sits in one server, but 6-11 (2 + 4) and 12-17 (4 + 2) cross the network,
// and the stage ends with them. A 16 MiB ring AllReduce on the 1:1 k=16
// fat-tree: 118.4 us priced on 0-5 (a one-server ring) against 450.9 us
// as flows (0.26); an AllGather 126.1 against 241.4 (0.52). Priced on
// 6-11 both are within 1% of the flows (busbw and fluid alike).
func TestUnalignedGroupsPricedOnWidest(t *testing.T) {
	t.Parallel()
	tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "128")
	checkStageAgainstFlows(t, tp, []string{"--size", "16MiB", "--group", "tp", "--tp", "6", "--place", "0-95"},
		[]string{"--op", "allreduce", "--algo", "ring"}, []string{"--op", "allgather"})
}

// A stage's groups spanning as many servers but split differently are
// priced each and the slowest taken: --tp 10 from GPU 2 on 8-GPU servers
// splits its groups 6 + 4 (the representative's, 2-11), 4 + 6, 2 + 8 and
// 8 + 2, and a 2 + 8 group's ring crosses out of its 2-GPU server on that
// server's two NICs only. A 16 MiB ring AllReduce on the 1:1 k=16
// fat-tree: 357.2 us priced on 2-11 against 517.8 us as flows (0.69);
// priced on its slowest shape, 518.3 (1.00), busbw and fluid alike.
func TestUnalignedGroupsPricedOnSlowestShape(t *testing.T) {
	t.Parallel()
	tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "128")
	checkStageAgainstFlows(t, tp, []string{"--size", "16MiB", "--group", "tp", "--tp", "10", "--place", "2-121"},
		[]string{"--op", "allreduce", "--algo", "ring"})
}

// A tree's pieces cross the fabric beside their pace, so an oversubscribed
// uplink bounds a tree AllReduce as its NIC does (its bytes after the
// first piece's latencies), not in series with the pace. A100 (its tree
// LL128 steps paced by the GPUs), --tp 6 from GPU 0 on the 4:1 k=16
// fat-tree (one 8-GPU server an edge switch, two 400 Gb/s uplinks): a
// 16 MiB AllReduce puts 16 MiB x 128/120 each way on a crossing group's
// tree, server 1 carries two groups' (6-11 and 12-17), 358 us on its
// uplinks, under the 593.8 us its pace takes. The flows took 621.3 us
// (603.0 at 1:1); the pace plus the uplinks' extra took 790.0 (1.27).
// Aligned groups did the same (--tp 16: 499.6 against 384.2). Those
// figures predate topogen's cap of an A100's NIC links at what its PCIe
// carries (226.4 Gb/s): since, the flows take 1118.7 us and the COLL node
// 1154.1 (1.03; --tp 16 480.1 against 477.2).
func TestTreeUplinksBesidePace(t *testing.T) {
	t.Parallel()
	tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "128", "--gpu-type", "A100",
		"--oversubscription", "4", "--oversubscribe-by", "uplinks")
	checkStageAgainstFlows(t, tp, []string{"--size", "16MiB", "--group", "tp", "--tp", "6", "--place", "0-95"},
		[]string{"--op", "allreduce", "--algo", "tree"})
}

// The bytes a stage puts on an uplink bound its COLL node under ecmp as
// under an even split: no draw of the hashes loads the busiest uplink
// less. --tp 12 from GPU 4 on the 4:1 k=16 fat-tree (one 8-GPU server an
// edge switch, two 400 Gb/s uplinks): server 3 holds 4 ranks of 16-27 and
// 4 of 28-39, each group's ring crossing out of it 2 x 11/12 x 64 MiB in
// a 64 MiB ring AllReduce, 246.1 MB over 100 GB/s: 2460.7 us at least.
// Priced by the hashed connections' class means it took 2224 us (0.84 of
// the flows' 2642); now the bound (0.93).
func TestRingUplinksBoundUnderECMP(t *testing.T) {
	t.Parallel()
	tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "128",
		"--oversubscription", "4", "--oversubscribe-by", "uplinks")
	layout := []string{"--size", "64MiB", "--group", "tp", "--tp", "12", "--place", "4-99"}
	op := []string{"--op", "allreduce", "--algo", "ring"}
	st := mustRun(t, tp, "simccl-decompose", append(append(slices.Clone(layout), "--granularity", "collective"), op...)...)
	const uplinkNs = 2 * 2 * 11 * (64 << 20) / 12 / 100 // bytes over 100 bytes a ns
	if e := span(t, mustRun(t, st, "flowsim-analytical", "--model", "fluid")); e < uplinkNs {
		t.Errorf("collective %d ns, below its busiest uplink's %d ns", e, uplinkNs)
	}
	checkStageAgainstFlows(t, tp, layout, op)
}

// checkStageAgainstFlows decomposes each op on layout at both
// granularities and checks collective granularity (busbw and fluid)
// within 10% of the flows (fluid).
func checkStageAgainstFlows(t *testing.T, tp []byte, layout []string, ops ...[]string) {
	t.Helper()
	for _, op := range ops {
		var coll [2]int64
		var flow int64
		for _, g := range []string{"collective", "flow"} {
			st := mustRun(t, tp, "simccl-decompose", append(append(slices.Clone(layout), "--granularity", g), op...)...)
			if g == "flow" {
				flow = span(t, mustRun(t, st, "flowsim-analytical", "--model", "fluid"))
				continue
			}
			for i, m := range []string{"busbw", "fluid"} {
				coll[i] = span(t, mustRun(t, st, "flowsim-analytical", "--model", m))
			}
		}
		for i, m := range []string{"busbw", "fluid"} {
			checkRatio(t, fmt.Sprintf("%s, collective (%s) / flows", op[1], m), float64(coll[i])/float64(flow), 0.9, 1.1, 0, false)
		}
	}
}

// A ring on servers holding different numbers of its ranks is bound by
// the busiest NIC, not by NCCL's bandwidth (which takes the group's NICs
// evenly over its servers). --tp 6 --place 6-11 on 8-GPU servers: 2 + 4
// ranks, 12 channels, each crossing out of the 2-GPU server once, 6 on
// each of its two NICs (ringOrder). A 256 MiB AllReduce puts
// 2 x 5/6 x 256 MiB / 2 = 223.7 MB on each of those NICs: at 400 Gbps,
// 4474 us at least. Priced at NCCL's bandwidth it took 3131 us against
// the flows' 4780 (0.655).
func TestRingUnevenServersBoundByNIC(t *testing.T) {
	t.Parallel()
	tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "128")
	var e [2]int64
	for i, g := range []string{"collective", "flow"} {
		st := mustRun(t, tp, "simccl-decompose", "--op", "allreduce", "--algo", "ring", "--size", "256MiB", "--group", "tp", "--tp", "6", "--place", "6-11", "--granularity", g)
		e[i] = span(t, mustRun(t, st, "flowsim-analytical", "--model", "fluid"))
	}
	const nicNs = 2 * 5 * (256 << 20) / 6 / 2 / 50 // bytes over 50 bytes a ns
	if e[0] < nicNs {
		t.Errorf("collective %d ns, below its busiest NIC's %d ns", e[0], nicNs)
	}
	checkRatio(t, "collective / flows", float64(e[0])/float64(e[1]), 0.9, 1.1, 0, false)
}

// Under ecmp a ring's chunks are hashed anew and drift out of phase, so
// the fabric's extra (its connections' busiest links beyond the NICs)
// slows its bytes at processor sharing's rate rather than adding in
// series with its fixed work (analytical outOfPhasePs). Rings aligned to
// the k=16 fat-tree's servers, collective granularity (busbw and fluid)
// within 5% of the flows (fluid): --tp 16 (8 + 8 ranks) AllReduce of
// 16 MiB (Ring LL128) at 1:1, 1.018 (1.116 in series); one rank a server
// (--group dp --tp 8 --place 0-95, 12 servers) AllReduce of 1 MiB (Ring
// LL) at 4:1, 1.017 (1.340 in series).
func TestRingFabricExtraOutOfPhase(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		over, size string
		group      []string
	}{
		{"1", "16MiB", []string{"--group", "tp", "--tp", "16"}},
		{"4", "1MiB", []string{"--group", "dp", "--tp", "8", "--place", "0-95"}},
	} {
		tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "128",
			"--oversubscription", c.over, "--oversubscribe-by", "uplinks")
		args := func(g string) []string {
			return append([]string{"--op", "allreduce", "--algo", "ring", "--size", c.size, "--granularity", g}, c.group...)
		}
		flow := span(t, mustRun(t, mustRun(t, tp, "simccl-decompose", args("flow")...), "flowsim-analytical", "--model", "fluid"))
		st := mustRun(t, tp, "simccl-decompose", args("collective")...)
		for _, m := range []string{"busbw", "fluid"} {
			coll := span(t, mustRun(t, st, "flowsim-analytical", "--model", m))
			checkRatio(t, fmt.Sprintf("%s:1, %s %v, collective (%s) / flows", c.over, c.size, c.group, m), float64(coll)/float64(flow), 0.95, 1.05, 0, false)
		}
	}
}

// Where hashing has no path to choose (one uplink an edge switch: the
// k=16 fat-tree 8:1 by uplinks) ecmp's flows are spray's, and so must its
// price be: a --tp 16 (8 + 8) ring ReduceScatter of 4 MiB, collective
// granularity (busbw and fluid) under ecmp within 2% of the flows (fluid,
// ecmp), 151.93 against 151.98 us, where pricing it out of phase gave
// 121.86 (0.802).
func TestRingECMPWithoutChoiceIsSpray(t *testing.T) {
	t.Parallel()
	tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "128",
		"--oversubscription", "8", "--oversubscribe-by", "uplinks")
	args := func(g string) []string {
		return []string{"--op", "reducescatter", "--algo", "ring", "--size", "4MiB", "--group", "tp", "--tp", "16", "--granularity", g}
	}
	flow := span(t, mustRun(t, mustRun(t, tp, "simccl-decompose", args("flow")...), "flowsim-analytical", "--model", "fluid", "--routing", "ecmp"))
	st := mustRun(t, tp, "simccl-decompose", args("collective")...)
	for _, m := range []string{"busbw", "fluid"} {
		coll := span(t, mustRun(t, st, "flowsim-analytical", "--model", m, "--routing", "ecmp"))
		checkRatio(t, fmt.Sprintf("ecmp, collective (%s) / flows", m), float64(coll)/float64(flow), 0.98, 1.02, 0, false)
	}
}

// Under spray an oversubscribed uplink slows each network step's bytes
// of a multi-server LL or LL128 ring: its network connections run their
// steps one after another and pay the extra on every one, the datum's
// path only on its network hops (analytical evenRingPs, the record's
// ring_conn_ps). H100s on the 4:1 k=16 fat-tree, collective granularity
// (busbw and fluid) within 2% of the flows (fluid), both under spray:
// --tp 16 (8 + 8) AllGather of 16 MiB, 254.85 against 254.90 us (269.53,
// 1.057, with the extra after the whole delay); 4 ranks a server on 4
// servers (--group dp --tp 2 --place 0-31, PXN) AllReduce of 1 MiB,
// 186.96 against 187.83 (210.03, 1.118).
func TestRingEvenExtraOnNetworkSteps(t *testing.T) {
	t.Parallel()
	tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "128",
		"--oversubscription", "4", "--oversubscribe-by", "uplinks")
	for _, c := range []struct {
		op, size string
		group    []string
	}{
		{"allgather", "16MiB", []string{"--group", "tp", "--tp", "16"}},
		{"allreduce", "1MiB", []string{"--group", "dp", "--tp", "2", "--place", "0-31"}},
	} {
		args := func(g string) []string {
			return append([]string{"--op", c.op, "--algo", "ring", "--size", c.size, "--granularity", g}, c.group...)
		}
		flow := span(t, mustRun(t, mustRun(t, tp, "simccl-decompose", args("flow")...), "flowsim-analytical", "--model", "fluid", "--routing", "spray"))
		st := mustRun(t, tp, "simccl-decompose", args("collective")...)
		for _, m := range []string{"busbw", "fluid"} {
			coll := span(t, mustRun(t, st, "flowsim-analytical", "--model", m, "--routing", "spray"))
			checkRatio(t, fmt.Sprintf("%s %s %v, spray, collective (%s) / flows", c.op, c.size, c.group, m), float64(coll)/float64(flow), 0.98, 1.02, 0, false)
		}
	}
}

// A multi-server LL128 ring whose hops' bytes in phase take longer on
// the NVLink than on the NIC keeps its channels in step (collective
// ringPathPs' lock, the record's nvlink_lock_ps), less what the lag of
// its network-fed channels leaves unshared (lockBytes): 4 x 8 A800s (8
// NVLinks, 160 GB/s; 16 channels) on 400G NICs, which their PCIe Gen4
// caps at 226.4G, ring AllReduce of 16, 32 and 64 MiB, collective
// granularity (busbw and fluid) within 5% of the flows (fluid): 0.978,
// 0.983 and 0.979, where the whole in-phase lock gives 1.120, 1.079 and
// 1.032; each record carries the lock. (A100s, with 12 NVLinks, no longer lock behind the capped NIC:
// 0.998-1.000 with or without lockBytes; uncapped they gave 0.978, 0.985
// and 0.987, 1.120, 1.080 and 1.027 with the whole lock.)
func TestRingNVLinkLock(t *testing.T) {
	t.Parallel()
	tp := mustRun(t, mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "32", "--gpu-type", "A800", "--nic-bw", "400Gbps"), "ncclpath")
	for _, size := range []string{"16MiB", "32MiB", "64MiB"} {
		args := func(g string) []string {
			return []string{"--op", "allreduce", "--algo", "ring", "--size", size, "--group", "dp", "--tp", "1", "--granularity", g}
		}
		flow := span(t, mustRun(t, mustRun(t, tp, "simccl-decompose", args("flow")...), "flowsim-analytical", "--model", "fluid"))
		st := mustRun(t, tp, "simccl-decompose", args("collective")...)
		if !bytes.Contains(st, []byte("nvlink_lock_ps")) { // else a change dissolved the lock this tests
			t.Errorf("%s: the collective record has no nvlink_lock_ps", size)
		}
		for _, m := range []string{"busbw", "fluid"} {
			coll := span(t, mustRun(t, st, "flowsim-analytical", "--model", m))
			checkRatio(t, fmt.Sprintf("%s, collective (%s) / flows", size, m), float64(coll)/float64(flow), 0.95, 1.05, 0, false)
		}
	}
}

// A direct AllToAll's connections under the transport's costs go in
// NCCL's steps, each piece hashed anew under ecmp, as PXN's do
// (collective.NetPieces): 16 MiB with ep 16 --algo direct (1 MiB a peer,
// several pieces a connection) on the trees of
// TestOversubscriptionDefaultAllToAll, collective granularity within 10%
// of the flows (fluid): 281.9 / 307.0 us at 1:1, 799.0 / 806.8 at 4:1.
// Priced as one flow a pair, ending with its slowest connection's draw,
// it took 346.1 and 887.5 (1.13, 1.10; at 64 MiB 1.37 and 1.20, now 0.95
// and 1.00).
func TestAllToAllDirectPieces(t *testing.T) {
	t.Parallel()
	for _, r := range []string{"1", "4"} {
		tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "128",
			"--oversubscription", r, "--oversubscribe-by", "uplinks")
		var e [2]int64
		for i, g := range []string{"collective", "flow"} {
			st := mustRun(t, tp, "simccl-decompose", "--op", "alltoall", "--size", "16MiB", "--group", "ep", "--ep", "16", "--algo", "direct", "--granularity", g)
			e[i] = span(t, mustRun(t, st, "flowsim-analytical", "--model", "fluid", "--routing", "ecmp"))
		}
		checkRatio(t, fmt.Sprintf("%s:1, collective / flows", r), float64(e[0])/float64(e[1]), 0.9, 1.1, 0, false)
	}
}

// Collective granularity prices an AllToAll by its own size, whichever ran
// before it on its group: on the 4:1 tree of
// TestOversubscriptionDefaultAllToAll (default transport, ecmp) a 16 MiB
// AllToAll takes the same after a 4 MiB one as alone (1353.8 us; 1542.8
// while the price cache kept the first size's pieces: a 4 MiB AllToAll's
// connections move one piece, a 16 MiB one's four).
func TestAllToAllPricedBySize(t *testing.T) {
	t.Parallel()
	tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "128",
		"--oversubscription", "4", "--oversubscribe-by", "uplinks")
	took := func(sweep string) map[int64]int64 {
		st := mustRun(t, tp, "simccl-decompose", "--op", "alltoall", "--group", "ep", "--ep", "128", "--granularity", "collective", "--sweep", sweep)
		first, last, size := collSpansSizes(t, mustRun(t, st, "flowsim-analytical", "--model", "fluid"))
		ns := map[int64]int64{}
		for id, f := range first {
			ns[size[id]] = last[id] - f
		}
		return ns
	}
	alone, after := took("16MiB:16MiB:2")[16<<20], took("4MiB:16MiB:4")[16<<20]
	if alone == 0 || after != alone {
		t.Errorf("16 MiB AllToAll: %d ns alone, %d ns after a 4 MiB one", alone, after)
	}
}

// exposedByGroup is an iteration report's exposed time per group type of
// its critical rank (one rank per stage at collective granularity).
func exposedByGroup(t *testing.T, tr []byte) (map[string]float64, float64) {
	t.Helper()
	var it struct {
		IterationNs  int64 `json:"iteration_ns"`
		CriticalRank int32 `json:"critical_rank"`
		Ranks        []struct {
			Rank int32 `json:"rank"`
			DP   int64 `json:"exposed_dp_ns"`
			DPEP int64 `json:"exposed_dp_ep_ns"`
			TP   int64 `json:"exposed_tp_ns"`
			EP   int64 `json:"exposed_ep_ns"`
			PP   int64 `json:"exposed_pp_ns"`
		} `json:"ranks"`
	}
	if err := json.Unmarshal(mustRun(t, tr, "fctstats", "--iteration", "--format", "json"), &it); err != nil {
		t.Fatal(err)
	}
	for _, r := range it.Ranks {
		if r.Rank == it.CriticalRank {
			return map[string]float64{"DP": float64(r.DP), "DP_EP": float64(r.DPEP), "TP": float64(r.TP), "EP": float64(r.EP), "PP": float64(r.PP)}, float64(it.IterationNs)
		}
	}
	t.Fatalf("no critical rank %d in the report", it.CriticalRank)
	return nil, 0
}

// Collective granularity sees the fabric as flows do: on 128 GPUs (a k=16
// fat-tree at 1:1 and, by uplinks, at 4:1 (and 2:1 in make test-long), a
// dual-plane HPN and Spectrum-X), one MoE layer of SimAI's example (tp 2,
// ep 16) on every fabric and AICB's GPT-13B (make test: on the 4:1 tree
// and HPN only; make test-long: on every fabric) give each group type's
// exposed time within 10% of the expanded flows' (fluid),
// under ecmp and adaptive routing, busbw and fluid alike; the iterations
// within 5%. Group types exposed under 2% of the iteration are left out
// (a few hundred µs of latency terms). Under the transport's costs (the
// default) a paced AllToAll's pieces are hashed anew, each paced or
// slowed on its own, and so is the COLL node's price, up to its slowest
// connection (pacedExtra, pieceDraw.tailCost): the MoE layer's EP
// AllToAll on the 1:1 fat-tree under ecmp is 1.05 of the flows' exposed
// time (12.14 against 11.56 ms; 4:1 1.06, 2:1 in make test-long 1.06),
// where the class mean alone gave 0.94 (4:1 0.97, 2:1 0.92) and pricing
// the node paced or slowed as a whole 0.85 (2:1: 0.91). With grouped
// receives (max-recvs=8, NCCL's InfiniBand plugin: a 96 us proxy round,
// not 153.6) the 1:1 tree's is 1.04 (11.17 against 10.78 ms; 0.885 with
// the class mean alone, outside the band). The tail pricing errs high,
// 1.04-1.09 on the fat-trees (2:1 with max-recvs=8 1.089), inside the
// band but not within 5% where the class mean was (4:1 0.97): it takes a
// draw's worst connection, already the most of many, and shrinks its
// excess by sqrt(pieces) even where an uplink class caps that excess.
func TestGranularitiesAgreeOnFabrics(t *testing.T) {
	t.Parallel() // a heavy end-to-end test: make test runs two at a time
	layer := moeLayer(t)
	works := map[string]string{"GPT-13B": "examples/workloads/aicb_G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt", "MoE layer": layer}
	fabrics := map[string][]string{
		"fat-tree 1:1":   {"--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "128"},
		"fat-tree 4:1":   {"--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "128", "--oversubscription", "4", "--oversubscribe-by", "uplinks"},
		"HPN dual plane": {"--family", "hpn-dual-plane", "--gpus", "128"},
		"Spectrum-X":     {"--family", "spectrum-x", "--gpus", "128"},
	}
	// GPT-13B's expanded runs are 4-7 s of CPU a fabric, the MoE layer's
	// under 1: make test leaves GPT-13B out on Spectrum-X (rail-local DP
	// rings, as on the 16 GPUs of TestCollectiveGranularityAgrees) and on
	// the 1:1 fat-tree (its DP rings' ECMP collisions are the 4:1 tree's,
	// which adds the thin uplinks).
	shortSkip := map[string]bool{"fat-tree 1:1": true, "Spectrum-X": true}
	if !testing.Short() {
		fabrics["fat-tree 2:1"] = []string{"--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "128", "--oversubscription", "2", "--oversubscribe-by", "uplinks"}
	}
	for fname, fargs := range fabrics {
		tp := mustRun(t, mustRun(t, nil, "topogen", fargs...), "ncclpath")
		if fname == "fat-tree 1:1" {
			st := mustRun(t, tp, "simccl-decompose", "--workload", layer, "--granularity", "collective", "--transport", "max-recvs=8")
			want, _ := exposedByGroup(t, mustRun(t, st, "flowsim-analytical", "--expand", "--routing", "ecmp"))
			got, _ := exposedByGroup(t, mustRun(t, st, "flowsim-analytical", "--model", "fluid", "--routing", "ecmp"))
			if math.Abs(got["EP"]-want["EP"]) > 0.1*want["EP"] {
				t.Errorf("MoE layer on %s, ecmp, fluid, max-recvs=8: EP exposed %.3f ms, expanded %.3f ms", fname, got["EP"]/1e6, want["EP"]/1e6)
			}
		}
		for wname, wl := range works {
			if testing.Short() && wname == "GPT-13B" && shortSkip[fname] {
				continue
			}
			st := mustRun(t, tp, "simccl-decompose", "--workload", wl, "--granularity", "collective")
			for _, routing := range []string{"ecmp", "adaptive"} {
				want, wantIt := exposedByGroup(t, mustRun(t, st, "flowsim-analytical", "--expand", "--routing", routing))
				for _, m := range []string{"busbw", "fluid"} {
					got, gotIt := exposedByGroup(t, mustRun(t, st, "flowsim-analytical", "--model", m, "--routing", routing))
					what := fmt.Sprintf("%s on %s, %s, %s", wname, fname, routing, m)
					if math.Abs(gotIt-wantIt) > 0.05*wantIt {
						t.Errorf("%s: iteration %.3f ms, expanded %.3f ms", what, gotIt/1e6, wantIt/1e6)
					}
					for g, w := range want {
						if w < 0.02*wantIt {
							continue
						}
						if math.Abs(got[g]-w) > 0.1*w {
							t.Errorf("%s: %s exposed %.3f ms, expanded %.3f ms", what, g, got[g]/1e6, w/1e6)
						}
					}
				}
			}
		}
	}
}

// Issue 29's routing target: with the same routing, the three models of one
// 64 MiB AllToAll (ep 128) on a 128-GPU k=16 fat-tree (1:1, one server per
// edge switch) agree. Under spray and adaptive routing collective-
// granularity busbw, flow-level fluid and packets (DCQCN) are within 10% of
// each other, and all near the NICs' closed form (each GPU sends 120/128 of
// the size out of its 400 Gbps NIC; nothing in a non-blocking fabric with
// the bytes spread over its paths is slower). Under ecmp busbw and fluid
// agree, and so do packets under PFC alone (CC_MODE 0), on the same hashed
// paths; packets under DCQCN take about 1.8x fluid's time (README: DCQCN
// cuts the rates of the queue pairs that collide on an uplink and
// recovers over many timer periods, which no fluid model sees), so that
// figure is only logged. About 40 s of CPU: make test-long.
func TestAllToAllRoutingAgrees(t *testing.T) {
	if testing.Short() {
		t.Skip("about 40 s of CPU (four packet runs of 1.8 M packets): make test-long")
	}
	t.Parallel() // a heavy end-to-end test: make test runs two at a time
	tp := mustRun(t, mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "128"), "ncclpath")
	// NCCL's model latencies: the NICs' closed form is the bytes alone. Under
	// the calibrated transport (the default) busbw and fluid agree as well
	// (spray: busbw 3.129, fluid flows 3.130 ms; ecmp: 3.162, 3.161; busbw
	// under ecmp 3.129 at stop 49), at 2.5x the NICs' closed form (1.258
	// ms: the transport's paced steps and proxy posts; rerun at stop 54,
	// not asserted here).
	a2a := []string{"--op", "alltoall", "--size", "64MiB", "--group", "ep", "--ep", "128", "--transport", "preset=none"}
	flows := mustRun(t, tp, "simccl-decompose", append(a2a, "--granularity", "flow")...)
	coll := mustRun(t, tp, "simccl-decompose", append(a2a, "--granularity", "collective")...)
	nic := 120.0 / 128 * (64 << 20) * 8 / 400e9 * 1e9 // ns
	agree := func(what string, tol float64, a, b int64) {
		t.Helper()
		if r := float64(max(a, b)) / float64(min(a, b)); r > 1+tol {
			t.Errorf("%s: %d ns against %d ns (%.3fx)", what, a, b, r)
		}
	}
	for _, routing := range []string{"ecmp", "spray", "adaptive"} {
		busbw := span(t, mustRun(t, coll, "flowsim-analytical", "--model", "busbw", "--routing", routing))
		fluid := span(t, mustRun(t, flows, "flowsim-analytical", "--routing", routing))
		packet := span(t, mustRun(t, flows, "flowsim-packet", "--routing", routing))
		t.Logf("%s: busbw %d ns, fluid %d ns, packet %d ns (NICs' closed form %.0f ns)", routing, busbw, fluid, packet, nic)
		agree(routing+", busbw against fluid", 0.1, busbw, fluid)
		if routing == "ecmp" {
			pfc := span(t, mustRun(t, flows, "flowsim-packet", "--routing", routing, "--set", "CC_MODE=0"))
			t.Logf("ecmp: packet under PFC alone %d ns", pfc)
			agree("ecmp, packet (PFC alone) against fluid", 0.1, pfc, fluid)
			continue
		}
		agree(routing+", packet against fluid", 0.1, packet, fluid)
		agree(routing+", packet against busbw", 0.1, packet, busbw)
		for _, c := range []struct {
			name string
			ns   int64
		}{{"busbw", busbw}, {"fluid", fluid}, {"packet", packet}} {
			if float64(c.ns) < nic || float64(c.ns) > 1.1*nic {
				t.Errorf("%s, %s: %d ns, the NICs' closed form %.0f ns", routing, c.name, c.ns, nic)
			}
		}
	}
}

// moeLayer writes one layer of the 128-GPU MoE example (tp 2, ep 16: its
// embedding, attention and MoE lines, without the gradient sync) to a
// workload file and returns its path.
func moeLayer(t *testing.T) string {
	t.Helper()
	moe, err := os.ReadFile("../examples/workloads/simai_moe_128gpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(moe), "\n")
	layer := filepath.Join(t.TempDir(), "moe_layer.txt")
	if err := os.WriteFile(layer, []byte(strings.Join(append([]string{lines[0], "10"}, lines[8:18]...), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return layer
}

// Why packets under DCQCN take longer than fluid flows for a paced
// AllToAll under ecmp, the reason TestFlowsAgreeWithPackets pins
// preset=none: the MoE layer's EP AllToAll (96 MiB, ep 16, tp 2, PXN) on
// a 1:1 k=16 fat-tree cuts each connection into 16 pieces of 1.5 MiB,
// one every 153.6 µs (the proxy's round), each a new queue pair on a
// freshly hashed path, as SimAI makes every transfer. A piece that meets a
// collision is cut by DCQCN (alpha 1 on its first CNP, halved at every
// 4 µs check while marks come) and recovers only RP_TIMER after its last
// cut, 900 µs by SimAI's default, longer than the piece lasts, so it ends
// at its cut rate after the collision is gone (worst piece 907 µs against
// fluid's 356), where a fluid flow takes the freed rate at once. The same
// flows as packets agree with fluid once that recovery is fast (RP_TIMER
// 55 µs) or without DCQCN (PFC alone): the backends do not differ
// elsewhere. With SimAI's timer packets take 1.13x fluid's span (3.357
// against 2.975 ms; 2.889 at 55 us, 2.817 under PFC alone). About 15 s of CPU: make test-long.
func TestPacedAllToAllDCQCNRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("about 15 s of CPU (three packet runs): make test-long")
	}
	t.Parallel() // a heavy end-to-end test: make test runs two at a time
	tp := mustRun(t, mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "128"), "ncclpath")
	flows := mustRun(t, tp, "simccl-decompose", "--op", "alltoall", "--size", "96MiB", "--group", "ep", "--ep", "16", "--tp", "2", "--granularity", "flow")
	fluid := span(t, mustRun(t, flows, "flowsim-analytical"))
	simai := span(t, mustRun(t, flows, "flowsim-packet"))
	fast := span(t, mustRun(t, flows, "flowsim-packet", "--set", "RP_TIMER=55"))
	pfc := span(t, mustRun(t, flows, "flowsim-packet", "--set", "CC_MODE=0"))
	t.Logf("fluid %d ns; packets: DCQCN %d ns (%.3fx), RP_TIMER 55 µs %d ns (%.3fx), PFC alone %d ns (%.3fx)",
		fluid, simai, float64(simai)/float64(fluid), fast, float64(fast)/float64(fluid), pfc, float64(pfc)/float64(fluid))
	for _, c := range []struct {
		what string
		ns   int64
	}{{"DCQCN recovering in 55 µs", fast}, {"PFC alone", pfc}} {
		if r := float64(c.ns) / float64(fluid); r < 0.9 || r > 1.1 {
			t.Errorf("%s: %d ns as packets, %d ns as fluid flows (%.3fx)", c.what, c.ns, fluid, r)
		}
	}
	if simai <= fast {
		t.Errorf("DCQCN recovering in 900 µs: %d ns, not slower than in 55 µs (%d ns): the gap to fluid is not its recovery", simai, fast)
	}
	// The gap the test explains (1.13x at stop 49): gone, the comments and
	// TestFlowsAgreeWithPackets' preset=none pin are stale.
	if float64(simai) < 1.05*float64(fluid) {
		t.Errorf("DCQCN recovering in 900 µs: %d ns, within 5%% of fluid's %d ns: no gap left to explain", simai, fluid)
	}
}

// Issue 29's flows-against-packets bound at 128 GPUs: one MoE layer of
// SimAI's example (EP AllToAlls of 96 MiB that cross the fabric, TP
// collectives inside servers) expanded into flow granularity's flows, run
// through the fluid model and packet by packet (DCQCN, PFC) on the same
// ECMP paths, gives every group type's exposed time within 10% and the
// iteration within 5%, on k=16 fat-trees at 1:1, 2:1 and 4:1 (thinned by
// uplinks), Spectrum-X and a dual-plane HPN; so does AICB's GPT-13B on
// Spectrum-X (exposed DP). About 140 s of CPU (packet runs of 13-20 s, and
// 50 s for GPT-13B): make test-long. The bounds hold with NCCL's model
// latencies (preset=none). Under the calibrated transport, the default, the
// EP AllToAll's packets took 1.14x and 1.12x the fluid flows' exposed time
// on the 1:1 and 2:1 fat-trees (1.12x on the 1:1 since stop 49's posting
// order: 12.94 against 11.56 ms) (ecmp, DCQCN: a paced piece cut on a
// collision recovers only RP_TIMER, SimAI's 900 µs, after its last cut,
// which fluid flows do not see; TestPacedAllToAllDCQCNRecovery), 1.08x at
// 4:1, 1.01x on HPN and Spectrum-X, GPT-13B's DP 0.92x (stop 48). On the
// 1:1 fat-tree the EP's packets take 1.07x fluid's exposed time with
// RP_TIMER 300 µs and 1.01x with 55 µs.
func TestFlowsAgreeWithPackets(t *testing.T) {
	if testing.Short() {
		t.Skip("about 140 s of CPU: make test-long")
	}
	t.Parallel() // a heavy end-to-end test: make test runs two at a time
	layer := moeLayer(t)
	fabrics := map[string][]string{
		"fat-tree 1:1":   {"--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "128"},
		"fat-tree 2:1":   {"--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "128", "--oversubscription", "2", "--oversubscribe-by", "uplinks"},
		"fat-tree 4:1":   {"--family", "fat-tree", "--fat-tree-k", "16", "--gpus", "128", "--oversubscription", "4", "--oversubscribe-by", "uplinks"},
		"Spectrum-X":     {"--family", "spectrum-x", "--gpus", "128"},
		"HPN dual plane": {"--family", "hpn-dual-plane", "--gpus", "128"},
	}
	type fcase struct{ fabric, work string }
	var runs []fcase
	for fname := range fabrics {
		runs = append(runs, fcase{fname, layer})
	}
	// GPT-13B's DP rings stay on their rails on Spectrum-X: 50 s of CPU as
	// packets there, 4-5 minutes on the fat-trees.
	runs = append(runs, fcase{"Spectrum-X", "examples/workloads/aicb_G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt"})
	for _, r := range runs {
		fname := r.fabric + ", " + filepath.Base(r.work)
		st := mustRun(t, mustRun(t, mustRun(t, nil, "topogen", fabrics[r.fabric]...), "ncclpath"), "simccl-decompose", "--workload", r.work, "--granularity", "collective", "--transport", "preset=none")
		fluid, fluidIt := exposedByGroup(t, mustRun(t, st, "flowsim-analytical", "--expand"))
		packet, packetIt := exposedByGroup(t, mustRun(t, st, "flowsim-packet", "--expand"))
		t.Logf("%s: fluid %v, packet %v (ns)", fname, fluid, packet)
		if math.Abs(packetIt-fluidIt) > 0.05*fluidIt {
			t.Errorf("%s: iteration %.3f ms as packets, %.3f ms as fluid flows", fname, packetIt/1e6, fluidIt/1e6)
		}
		for g, f := range fluid {
			if f < 0.02*fluidIt {
				continue
			}
			if math.Abs(packet[g]-f) > 0.1*f {
				t.Errorf("%s: %s exposed %.3f ms as packets, %.3f ms as fluid flows", fname, g, packet[g]/1e6, f/1e6)
			}
		}
		if fluid["EP"]+fluid["DP"] < 0.02*fluidIt {
			t.Errorf("%s: EP and DP exposed %.3f ms of a %.3f ms iteration: the case checks nothing", fname, (fluid["EP"]+fluid["DP"])/1e6, fluidIt/1e6)
		}
	}
}
