package tests

import (
	"fmt"
	"strconv"
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
// each takes at least twice its 1:1 time: the uplinks carry all the
// cross-server bytes at a quarter of the NICs' rate. Fluid and busbw at
// flow and collective granularity, and the packet backend, each under ecmp
// and adaptive routing.
func TestOversubscriptionNeverFaster(t *testing.T) {
	work := map[string][]string{
		"DP AllReduce": {"--op", "allreduce", "--size", "8MiB", "--group", "dp", "--tp", "8"},
		"AllToAll":     {"--op", "alltoall", "--size", "4MiB", "--group", "ep", "--ep", "128"},
	}
	var backends []backendRun
	for _, routing := range []string{"ecmp", "adaptive"} {
		for _, m := range []string{"fluid", "busbw"} {
			backends = append(backends,
				backendRun{m + " flows " + routing, "flowsim-analytical", []string{"--model", m, "--routing", routing}, false},
				backendRun{m + " collective " + routing, "flowsim-analytical", []string{"--model", m, "--routing", routing}, true})
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
		if e[2] < 2*e[0] {
			t.Errorf("%s: 4:1 takes %d ns, 1:1 %d ns: the thin uplinks barely matter", k, e[2], e[0])
		}
		t.Logf("%s: %s", k, fmt.Sprint(e))
	}
}
