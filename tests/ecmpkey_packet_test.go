package tests

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// Under --ecmp-key connection flowsim-packet and flowsim-analytical hash a
// connection alike (route.HashKey.ID, one draw for the GPU pair and
// channel), so the same seed puts its transfers on the same path in both.
// Two connections from the two GPUs of one edge switch of a k=4 fat-tree
// to two other pods, each 8 back-to-back 1 MiB transfers, share a link
// exactly when they hash to the same uplink of that edge: each chain then
// takes about twice as long. Over seeds both outcomes occur (in fluid),
// and for every seed the packet chains end within 5% of the fluid ones;
// had packet drawn per transfer (or another connection), its chains would
// end between the two outcomes. The threads run is the single loop's,
// byte for byte, under the key.
func TestECMPKeyConnectionPacketFluid(t *testing.T) {
	t.Parallel()
	tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "4", "--gpus", "16", "--gpus-per-server", "1")
	const n, size = 8, 1 << 20
	chains := [][2]int32{{0, 8}, {1, 12}} // GPUs 0 and 1 share an edge switch; 8 and 12 are in pods 2 and 3
	in := streamWithFlows(t, tp, nil, nil, func(emit func(*stream.Flow)) {
		for c, ends := range chains {
			for k := range int64(n) {
				f := stream.Flow{ID: int64(100*c) + k, Collective: -1, Src: ends[0], Dst: ends[1], Size: size, ConnType: stream.ConnP2P}
				if k > 0 {
					f.Deps = []int64{f.ID - 1}
				}
				emit(&f)
			}
		}
	})
	chainEnds := func(out []byte) [2]int64 {
		rows, meta := readTrace(t, out)
		if fmt.Sprint(meta.Params["ecmp_key"]) != "connection" {
			t.Fatalf("params %v do not name the key", meta.Params)
		}
		var e [2]int64
		for _, r := range rows {
			if c := r.FlowID / 100; r.FlowID%100 == n-1 {
				e[c] = r.EndNs
			}
		}
		return e
	}
	lo, hi := int64(1<<62), int64(0)
	for seed := 1; seed <= 6; seed++ {
		args := []string{"--ecmp-key", "connection", "--seed", fmt.Sprint(seed)}
		fluid := chainEnds(mustRun(t, in, "flowsim-analytical", args...))
		pkt := chainEnds(mustRun(t, in, "flowsim-packet", args...))
		for c := range chains {
			if d := float64(pkt[c]-fluid[c]) / float64(fluid[c]); d < -0.05 || d > 0.05 {
				t.Errorf("seed %d, GPU %d to %d: packet ends at %d ns, fluid at %d ns (%+.1f%%)", seed, chains[c][0], chains[c][1], pkt[c], fluid[c], 100*d)
			}
			lo, hi = min(lo, fluid[c]), max(hi, fluid[c])
		}
	}
	if float64(hi) < 1.8*float64(lo) {
		t.Errorf("fluid's chains end between %d and %d ns over the seeds: no seed made them share an uplink, or every one did", lo, hi)
	}

	ar := mustRun(t, tp, "simccl-decompose", "--op", "allreduce", "--size", "4MiB", "--group", "dp", "--algo", "ring")
	single := mustRun(t, ar, "flowsim-packet", "--ecmp-key", "connection")
	if par := mustRun(t, ar, "flowsim-packet", "--ecmp-key", "connection", "--threads", "2"); !bytes.Equal(par, single) {
		t.Error("--threads 2 under --ecmp-key connection differs from the single loop")
	}
	if dflt := mustRun(t, ar, "flowsim-packet"); bytes.Equal(dflt, single) {
		t.Error("the ring AllReduce's trace is the same under either key") // its params at least differ
	}
}
