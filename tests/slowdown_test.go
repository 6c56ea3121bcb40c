package tests

import (
	"regexp"
	"strings"
	"testing"
)

// slowdownFabrics is a small fabric of every family topogen makes.
var slowdownFabrics = map[string][]string{
	"spectrum-x":       {"--gpus", "16"},
	"hpn-single-plane": {"--gpus", "16"},
	"hpn-dual-plane":   {"--gpus", "16"},
	"dcn-single-tor":   {"--gpus", "16"},
	"dcn-dual-tor":     {"--gpus", "16"},
	"fat-tree":         {"--gpus", "16", "--gpus-per-server", "1", "--fat-tree-k", "4"},
	// README's dragonfly, where 4 KiB transfers read slowdown 0.75 in
	// flowsim-packet (issue 32).
	"dragonfly": {"--gpus", "72", "--gpus-per-server", "1", "--routers-per-group", "4",
		"--terminals-per-router", "2", "--global-per-router", "2", "--switch-bw", "16Gbps"},
}

// The ideal FCT is a lower bound: no transfer finishes faster than alone
// on an idle fabric, so slowdown >= 1 on every row, for every topology
// family, in both backends, for messages under a packet, of one and a bit
// packets, and split over queue pairs.
func TestSlowdownAtLeastOne(t *testing.T) {
	t.Parallel()
	help := string(run(t, nil, "topogen", "--help").stdout)
	m := regexp.MustCompile(`Fabric family: ([^.]*)\.`).FindStringSubmatch(strings.Join(strings.Fields(help), " "))
	if m == nil {
		t.Fatalf("topogen --help names no families:\n%s", help)
	}
	patterns := [][]string{
		{"--pattern", "uniform", "--msg-size", "4KiB", "--rate", "50%", "--duration", "20us"},
		{"--pattern", "permutation", "--msg-size", "10000", "--rate", "50%", "--duration", "10us"},
	}
	backends := [][]string{{"flowsim-packet"}, {"flowsim-analytical"}, {"flowsim-packet", "--set", "QPS_PER_CONNECTION=3"}}
	for _, fam := range strings.Split(m[1], ", ") {
		args, ok := slowdownFabrics[fam]
		if !ok {
			t.Errorf("family %s: no small fabric in slowdownFabrics", fam)
			continue
		}
		topo := mustRun(t, nil, "topogen", append([]string{"--family", fam}, args...)...)
		for _, p := range patterns {
			in := mustRun(t, topo, "simccl-decompose", p...)
			for _, b := range backends {
				rows, _ := readTrace(t, mustRun(t, in, b[0], b[1:]...))
				n := 0
				for _, r := range rows {
					if r.ConnType == "DELAY" {
						continue
					}
					n++
					if r.IdealFctNs <= 0 || r.FctNs < r.IdealFctNs {
						t.Errorf("%s, %s, %s: flow %d (%d -> %d, %d B): fct %d ns, ideal %d ns: slowdown %.3f",
							fam, p[1], strings.Join(b, " "), r.FlowID, r.Src, r.Dst, r.SizeBytes, r.FctNs, r.IdealFctNs,
							float64(r.FctNs)/float64(r.IdealFctNs))
						break
					}
				}
				if n == 0 {
					t.Errorf("%s, %s, %s: no transfers", fam, p[1], b[0])
				}
			}
		}
	}
}
