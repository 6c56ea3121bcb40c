package tests

import (
	"bytes"
	"math"
	"testing"
)

// On servers of one GPU without NVLink (an htsim-style fabric of hosts)
// collective granularity's closed forms of the flows' mechanism do not
// apply (they read the server model's NVLink rate): a COLL node falls back
// to NCCL's model time, which under the calibrated transport strays from
// the flows (an AllToAll of 64 KiB on 16 such ranks: about a fifth of
// their time). The run must say so, on stderr and in every report of its
// trace, and only where it applies: with NCCL's model latencies alone
// (preset=none) both granularities agree, and on servers with NVLink no
// warning is printed.
func TestCollectiveGranularityWithoutNVLinkSaysSo(t *testing.T) {
	t.Parallel()
	const warn = "cross servers without NVLink"
	hosts := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "4", "--gpus", "16", "--gpus-per-server", "1")
	a2a := []string{"--op", "alltoall", "--size", "64KiB", "--group", "dp"}
	times := func(preset string) (flow, coll float64, warned bool) {
		var ends [2]float64
		for i, g := range []string{"flow", "collective"} {
			r := run(t, hosts, "simccl-decompose", append(a2a, "--granularity", g, "--transport", "preset="+preset)...)
			if r.code != 0 {
				t.Fatalf("simccl-decompose --granularity %s: exit %d: %s", g, r.code, r.stderr)
			}
			tr := mustRun(t, r.stdout, "flowsim-analytical")
			ends[i] = float64(span(t, tr))
			if g == "collective" {
				warned = bytes.Contains(r.stderr, []byte(warn))
				if rep := mustRun(t, tr, "fctstats"); warned != bytes.Contains(rep, []byte("NOTE (from the stream): simccl-decompose: 1 of 1 collectives "+warn)) {
					t.Errorf("preset=%s: stderr warns %v, fctstats' report differs:\n%s", preset, warned, rep)
				}
			} else if bytes.Contains(r.stderr, []byte(warn)) {
				t.Errorf("flow granularity warns: %s", r.stderr)
			}
		}
		return ends[0], ends[1], warned
	}
	flow, coll, warned := times("auto")
	if !warned {
		t.Errorf("default transport, one GPU a server: no warning (collective %.0f ns, flows %.0f ns)", coll, flow)
	}
	// The warning's reason: if the granularities agree here, the closed
	// forms cover servers without NVLink and the warning should go.
	if r := coll / flow; r > 0.9 && r < 1.1 {
		t.Errorf("default transport: collective granularity %.0f ns is %.3f of the flows' %.0f: the warning is stale", coll, r, flow)
	}
	flow, coll, warned = times("none")
	if warned || math.Abs(coll-flow) > 0.05*flow {
		t.Errorf("preset=none: warned %v, collective %.0f ns against flows %.0f ns (want no warning, within 5%%)", warned, coll, flow)
	}
	sx := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16")
	if r := run(t, sx, "simccl-decompose", append(a2a, "--granularity", "collective")...); r.code != 0 || bytes.Contains(r.stderr, []byte(warn)) {
		t.Errorf("2 x 8 H100 (NVLink): exit %d, stderr %s", r.code, r.stderr)
	}
}
