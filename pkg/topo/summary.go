package topo

import (
	"fmt"
	"io"
	"sort"
	"strconv"
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
	NICNetwork   string // "" when the topology does not say
	NICLinkCap   string // a GPU's NIC link rate where its PCIe link caps it (ParamNICLinkBW), else ""
	NICBW        string // the NICs' rate as asked (nic_bw)
	Tiers        []TierStat
	BisectionBps float64
	Diameter     int

	// Fat-trees generated here: radix, the oversubscription asked for and
	// how it was made (OversubHosts or OversubUplinks), and what each edge
	// switch got. K is 0 for other fabrics.
	K              int
	OversubAsked   float64
	OversubBy      string
	GPUsPerEdge    int
	UplinksPerEdge int
}

// Summarize computes the summary; it fails if some GPU cannot reach another.
func Summarize(t *Topology) (*Summary, error) {
	s := &Summary{Family: t.Family, GPUType: t.GPUType, GPUs: t.GPUs, GPUsPerSrv: t.GPUsPerServer,
		NVSPerSrv: t.NVSwitchesPerServer, NodesByRole: map[string]int{}, LinksByKind: map[string]int{}, NICNetwork: t.Params[ParamNICNetwork],
		NICLinkCap: t.Params[ParamNICLinkBW], NICBW: t.Params["nic_bw"]}
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
	if t.Family == FatTree {
		s.fatTree(t.Params)
	}
	return s, nil
}

// fatTree reads a generated fat-tree's parameters; a stream without them
// (written by hand, say) leaves K 0 and the summary without its line.
func (s *Summary) fatTree(p map[string]string) {
	k, err1 := strconv.Atoi(p["k"])
	asked, err2 := strconv.ParseFloat(p["oversubscription"], 64)
	perEdge, err3 := strconv.Atoi(p["gpus_per_edge"])
	if err1 != nil || err2 != nil || err3 != nil {
		return
	}
	// Streams of hosts-made trees predate the mode and carry neither it
	// nor the uplinks: hosts, with k/2 uplinks per edge switch.
	by, up := p["oversubscribe_by"], k/2
	if by == "" {
		by = OversubHosts
	}
	if v, err := strconv.Atoi(p["uplinks_per_edge"]); err == nil {
		up = v
	}
	s.K, s.OversubAsked, s.OversubBy, s.GPUsPerEdge, s.UplinksPerEdge = k, asked, by, perEdge, up
}

// Write prints the summary as an aligned table.
func (s *Summary) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "fabric\t%s, %s\n", s.Family, s.GPUType)
	fmt.Fprintf(tw, "GPUs\t%d = %d servers x %d, %d NVSwitch per server\n", s.GPUs, s.Servers, s.GPUsPerSrv, s.NVSPerSrv)
	fmt.Fprintf(tw, "nodes\t%s\n", counts(s.NodesByRole, []string{RoleGPU, RoleNVSwitch, RoleASW, RoleEdge, RoleRouter, RolePSW, RoleAgg, RoleDSW, RoleCore}))
	fmt.Fprintf(tw, "links\t%s\n", counts(s.LinksByKind, []string{stream.LinkNVLink, stream.LinkPCIe, stream.LinkNIC, stream.LinkFabric}))
	net := map[string]string{NetIB: " (InfiniBand)", NetRoCE: " (RoCE)", NetEFA: " (AWS EFA)", "": " (network not said: InfiniBand's transport costs)"}[s.NICNetwork]
	fmt.Fprintf(tw, "NICs per GPU\t%g%s\n", s.NICsPerGPU, net)
	if s.NICLinkCap != "" {
		fmt.Fprintf(tw, "NIC links\t%s each, not the NICs' %s: the GPU's PCIe link carries no more\n", s.NICLinkCap, s.NICBW)
	}
	if s.K > 0 {
		fmt.Fprintf(tw, "fat-tree\tk=%d, %g:1 asked, oversubscribed by %s: %s and %s per edge switch\n",
			s.K, s.OversubAsked, s.OversubBy, plural(s.GPUsPerEdge, "GPU NIC"), plural(s.UplinksPerEdge, "uplink"))
	}
	for _, ts := range s.Tiers {
		switches := fmt.Sprintf("%d switches", ts.Switches)
		if ts.Populated < ts.Switches {
			switches += fmt.Sprintf(" (%d with GPUs)", ts.Populated)
		}
		if ts.Populated == 0 {
			fmt.Fprintf(tw, "tier %s\t%s\n", ts.Role, switches)
			continue
		}
		up := units.HumanBandwidth(ts.UpBps) + " up"
		if ts.UpBps == 0 && ts.LevelBps > 0 {
			up = units.HumanBandwidth(ts.LevelBps) + " lateral"
		}
		ratio := "top tier"
		if o := ts.Oversubscription(); o >= 1 {
			ratio = fmt.Sprintf("oversub %.3g:1", o)
		} else if o > 0 {
			// More bandwidth above than below (a small cluster on a
			// fabric built for more): "0.0625:1" read as a typo.
			dir := "up"
			if ts.UpBps == 0 {
				dir = "lateral"
			}
			ratio = fmt.Sprintf("not oversubscribed (down:%s 1:%.3g)", dir, 1/o)
		}
		if ts.UpBps == 0 && ts.LevelBps == 0 {
			up = "-"
		}
		fmt.Fprintf(tw, "tier %s\t%s, %s down, %s, %s\n", ts.Role, switches, units.HumanBandwidth(ts.DownBps), up, ratio)
		fmt.Fprintf(tw, "  per switch\t%s\n", ts.perSwitch())
	}
	if s.Servers >= 2 {
		fmt.Fprintf(tw, "bisection\t%s (%s to %s)\n", units.HumanBandwidth(s.BisectionBps), servers(0, s.Servers/2-1), servers(s.Servers/2, s.Servers-1))
	}
	fmt.Fprintf(tw, "diameter\t%d hops GPU to GPU\n", s.Diameter)
	return tw.Flush()
}

// servers names a range of servers: "server 0", "servers 0-7".
func servers(a, b int) string {
	if a == b {
		return "server " + strconv.Itoa(a)
	}
	return "servers " + strconv.Itoa(a) + "-" + strconv.Itoa(b)
}

// perSwitch describes the links of a populated switch of the tier, as a
// range when they differ: "8 GPU NICs, 2 up", "2 down, 8 up".
func (ts TierStat) perSwitch() string {
	n := func(r [2]int) string {
		if r[0] == r[1] {
			return strconv.Itoa(r[0])
		}
		return fmt.Sprintf("%d-%d", r[0], r[1])
	}
	var parts []string
	if ts.GPUNICs[1] > 0 {
		parts = append(parts, n(ts.GPUNICs)+" GPU NICs")
	}
	if ts.GPUNICs != ts.Down {
		parts = append(parts, n(ts.Down)+" down")
	}
	if ts.Up[1] > 0 {
		parts = append(parts, n(ts.Up)+" up")
	}
	if ts.Level[1] > 0 {
		parts = append(parts, n(ts.Level)+" lateral")
	}
	return strings.Join(parts, ", ")
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
