package topo

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/units"
)

// Summary is what topogen --summary prints.
type Summary struct {
	Family       string
	GPUType      string
	GPUs         int
	Servers      int
	GPUsPerSrv   int
	NVSPerSrv    int
	NodesByRole  map[string]int
	LinksByKind  map[string]int
	NICsPerGPU   float64
	Tiers        []TierStat
	BisectionBps float64
	Diameter     int
}

// Summarize computes the summary; it fails if some GPU cannot reach another.
func Summarize(t *Topology) (*Summary, error) {
	s := &Summary{Family: t.Family, GPUType: t.GPUType, GPUs: t.GPUs, GPUsPerSrv: t.GPUsPerServer,
		NVSPerSrv: t.NVSwitchesPerServer, NodesByRole: map[string]int{}, LinksByKind: map[string]int{}}
	s.Servers = t.GPUs / t.GPUsPerServer
	for i := range t.Nodes {
		s.NodesByRole[t.Nodes[i].Role]++
	}
	nic := 0
	for i := range t.Links {
		s.LinksByKind[t.Links[i].Kind]++
		if t.Links[i].Kind == stream.LinkNIC {
			nic++
		}
	}
	s.NICsPerGPU = float64(nic) / float64(t.GPUs)
	s.Tiers = Tiers(t)
	s.BisectionBps = Bisection(t)
	d, err := Diameter(t)
	if err != nil {
		return nil, err
	}
	s.Diameter = d
	return s, nil
}

// Write prints the summary as an aligned table.
func (s *Summary) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "fabric\t%s, %s\n", s.Family, s.GPUType)
	fmt.Fprintf(tw, "GPUs\t%d = %d servers x %d, %d NVSwitch per server\n", s.GPUs, s.Servers, s.GPUsPerSrv, s.NVSPerSrv)
	fmt.Fprintf(tw, "nodes\t%s\n", counts(s.NodesByRole, []string{RoleGPU, RoleNVSwitch, RoleASW, RoleEdge, RoleRouter, RolePSW, RoleAgg, RoleDSW, RoleCore}))
	fmt.Fprintf(tw, "links\t%s\n", counts(s.LinksByKind, []string{stream.LinkNVLink, stream.LinkPCIe, stream.LinkNIC, stream.LinkFabric}))
	fmt.Fprintf(tw, "NICs per GPU\t%g\n", s.NICsPerGPU)
	for _, ts := range s.Tiers {
		up := units.HumanBandwidth(ts.UpBps) + " up"
		if ts.UpBps == 0 && ts.LevelBps > 0 {
			up = units.HumanBandwidth(ts.LevelBps) + " lateral"
		}
		ratio := "top tier"
		if o := ts.Oversubscription(); o > 0 {
			ratio = fmt.Sprintf("oversub %.3g:1", o)
		}
		if ts.UpBps == 0 && ts.LevelBps == 0 {
			up = "-"
		}
		fmt.Fprintf(tw, "tier %s\t%d switches, %s down, %s, %s\n", ts.Role, ts.Switches, units.HumanBandwidth(ts.DownBps), up, ratio)
	}
	if s.Servers >= 2 {
		fmt.Fprintf(tw, "bisection\t%s (servers 0-%d to %d-%d)\n", units.HumanBandwidth(s.BisectionBps), s.Servers/2-1, s.Servers/2, s.Servers-1)
	}
	fmt.Fprintf(tw, "diameter\t%d hops GPU to GPU\n", s.Diameter)
	return tw.Flush()
}

func counts(m map[string]int, order []string) string {
	var parts []string
	seen := map[string]bool{}
	for _, k := range order {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
			seen[k] = true
		}
	}
	var rest []string
	for k := range m {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	return strings.Join(parts, ", ")
}
