// Command topogen generates a fabric (SimAI's five datacenter families,
// fat-tree, dragonfly) or imports a SimAI topology file, and writes it as a
// fabricsim stream, as SimAI's text format, or as a readable summary.
package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/internal/cli"
	"github.com/fabricsim/fabricsim/internal/progress"
	"github.com/fabricsim/fabricsim/pkg/topo"
	"github.com/fabricsim/fabricsim/pkg/units"
)

type command struct {
	// Accepted as every program accepts it; this one ends well within
	// the two seconds before progress would be drawn.
	progress.Quiet
	Family              string          `default:"spectrum-x" help:"Fabric family: spectrum-x, hpn-single-plane, hpn-dual-plane, dcn-single-tor, dcn-dual-tor, fat-tree, dragonfly."`
	GPUs                *int            `name:"gpus" help:"Number of GPUs (default: the family's SimAI default: 4096 spectrum-x, 15360 hpn-*, 512 dcn-*; fat-tree fills k=8; dragonfly 72). At most 131072; topogen also refuses fabrics of more than 16384 network switches or 2097152 links."`
	GPUsPerServer       int             `name:"gpus-per-server" default:"8" help:"GPUs per server."`
	NVSwitchesPerServer *int            `name:"nvswitches-per-server" help:"NVSwitches per server (default 1; 0 when a server holds one GPU, the only case where 0 is accepted)."`
	GPUType             string          `name:"gpu-type" default:"H100" help:"GPU type: A100, A800, H100, H800, H20, B200 (sets the default NVLink bandwidth)."`
	NICBW               units.Bandwidth `name:"nic-bw" help:"NIC to leaf bandwidth, e.g. 400Gbps (default per family: 400Gbps spectrum-x and dcn-single-tor, 200Gbps hpn-* and dcn-dual-tor, --switch-bw for fat-tree and dragonfly). Bandwidths: 10Mbps to 1000Tbps."`
	NVLinkBW            units.Bandwidth `name:"nvlink-bw" help:"GPU to NVSwitch bandwidth per direction (default: the GPU type's usable NVLink rate, NVLink links x NCCL's per-link figure: A100 1920Gbps (12x20GB/s), A800 1280Gbps (8x20), H100 and H20 2966.4Gbps (18x20.6), H800 1318.4Gbps (8x20.6), B200 5774.4Gbps (18x40.1); SimAI's generator uses 2400Gbps for A100/A800 and 2880Gbps otherwise); 10Mbps to 1000Tbps."`
	NVLinkLatency       units.Duration  `name:"nvlink-latency" default:"25ns" help:"GPU to NVSwitch link latency, 0 to 1s (0ns is no latency)."`
	NICLatency          units.Duration  `name:"nic-latency" default:"500ns" help:"NIC to leaf link latency, 0 to 1s (0ns is no latency)."`
	SwitchBW            units.Bandwidth `name:"switch-bw" default:"400Gbps" help:"Switch to switch bandwidth (SimAI's ASW-PSW bandwidth), 10Mbps to 1000Tbps."`
	SwitchLatency       units.Duration  `name:"switch-latency" default:"500ns" help:"Switch to switch latency, 0 to 1s (0ns is no latency)."`
	ErrorRate           float64         `name:"error-rate" default:"0" help:"Packet error rate of every link, in [0,1)."`
	NICNetwork          *string         `name:"nic-network" placeholder:"ib|roce|efa" help:"The NICs' network: ib (InfiniBand), roce (RoCE Ethernet) or efa (AWS EFA). simccl-decompose's default transport takes the preset calibrated for it (A100: a100, a100-roce, a100-efa; H100 and later: h100-ib, h100-roce, h100-efa); left out, the InfiniBand presets. Recorded in the topology's params as nic_network (not in SimAI's format). On AWS p4d/p4de add simccl-decompose --proto simple --max-channels 8, as aws-ofi-nccl runs them and a100-efa was fitted."`

	NICsPerASW     *int `name:"nics-per-asw" group:"SimAI families" help:"NICs per leaf (ASW, SimAI -npa); default 64, 128 for hpn-* and dcn-dual-tor. A segment holds nics-per-asw servers (rail-optimized) or nics-per-asw GPUs (DCN+)."`
	GPUsPerSegment *int `name:"gpus-per-segment" group:"SimAI families" help:"GPUs sharing one segment's leaves, instead of --nics-per-asw (rail-optimized: nics-per-asw x gpus-per-server; DCN+: nics-per-asw). The ASWs per segment follow from the family: one per rail and ToR side (rail-optimized) or one per ToR side (DCN+)."`
	PSW            *int `name:"psw" group:"SimAI families" help:"Number of spine (PSW) switches; default 64 spectrum-x, 120 hpn-*, 8 dcn-*."`
	ASWPerPSW      *int `name:"asw-per-psw" group:"SimAI families" help:"Leaf-facing ports per PSW; default 64 spectrum-x, 240 hpn-single-plane, 120 hpn-dual-plane, 8 dcn-*. Raised with a note when the GPUs need more."`

	K         *int    `name:"fat-tree-k" group:"fat-tree" help:"Switch radix k (even); default the smallest that holds --gpus."`
	Oversub   float64 `name:"oversubscription" group:"fat-tree" default:"1" help:"Edge switch downlink:uplink ratio, at least 1 (1 = non-blocking)."`
	OversubBy *string `name:"oversubscribe-by" group:"fat-tree" placeholder:"hosts|uplinks" help:"How --oversubscription is made. hosts (default): each edge switch gets ratio x k/2 GPU NICs and keeps k/2 uplinks, so a higher ratio puts more servers under each edge. uplinks: each edge switch keeps k/2 GPU NICs and gets round((k/2)/ratio) uplinks (at least 1; a note gives the real ratio when rounding changes it), to aggregation switches 0..uplinks-1 of its pod, so 1:1 and 4:1 compare like for like; a k-ary tree then holds k x (k/2)^2 GPUs whatever the ratio."`

	RoutersPerGroup    *int `name:"routers-per-group" group:"dragonfly" help:"Routers per group (a); give a, p and h together, or none for a balanced dragonfly."`
	TerminalsPerRouter *int `name:"terminals-per-router" group:"dragonfly" help:"GPU NICs per router (p)."`
	GlobalPerRouter    *int `name:"global-per-router" group:"dragonfly" help:"Global channels per router (h)."`
	Groups             *int `name:"groups" group:"dragonfly" help:"Groups (default a*h+1, one global link per group pair)."`

	Format    string `default:"stream" enum:"stream,simai" help:"Output: the fabricsim stream (binary, for pipes) or SimAI's text topology."`
	FromSimAI string `name:"from-simai" type:"existingfile" help:"Import a SimAI topology file instead of generating one."`
	Summary   bool   `help:"Print a readable summary instead of the topology: nodes, links, per tier the switches with GPUs below them (empty ones are counted apart), their links per switch and downlink:uplink ratio, a fat-tree's oversubscription mode, bisection bandwidth, diameter."`
	Out       string `short:"o" help:"Write to FILE instead of stdout."`
}

const description = `Generate a GPU cluster fabric and write it as a fabricsim stream.

Examples:
  topogen --family spectrum-x --gpus 128 --gpu-type A100 --nic-bw 100Gbps | ncclpath | ...
  topogen --family hpn-dual-plane --gpus 1024 --summary
  topogen --family fat-tree --fat-tree-k 16 --oversubscription 4 --oversubscribe-by uplinks --summary
  topogen --family dragonfly --gpus 72 --gpus-per-server 1 --routers-per-group 4 --terminals-per-router 2 --global-per-router 2 --summary
  topogen --family spectrum-x --gpus 16 --nvlink-bw 2880Gbps --format simai > Spectrum-X_16g_8gps_400Gbps_H100
      (SimAI's NVLink rate: byte-identical to SimAI's generator)
  topogen --from-simai Spectrum-X_16g_8gps_400Gbps_H100 | ncclpath | ...`

func main() {
	var c command
	cli.Main("topogen", description, &c, c.run)
}

// count reads a count flag: left out, 0 (the family's default); given, it
// must be positive, so that 0 never silently means "default".
func count(name string, v *int) (int, error) {
	if v == nil {
		return 0, nil
	}
	if *v <= 0 {
		return 0, fmt.Errorf("--%s %d must be positive (leave it out for the default)", name, *v)
	}
	return *v, nil
}

// latency passes a latency flag on: 0ns is no latency, not the default.
func latency(d units.Duration) int64 {
	if d == 0 {
		return topo.ZeroLatency
	}
	return int64(d)
}

// checkFamilyFlags refuses a flag of another family than --family's: it
// would be ignored, and the fabric would not be the one asked for.
func (c *command) checkFamilyFlags() error {
	simai := topo.SimAIFamily(c.Family)
	for _, f := range []struct {
		name   string
		given  bool
		ok     bool
		family string
	}{
		{"--nics-per-asw", c.NICsPerASW != nil, simai, "the SimAI families"},
		{"--gpus-per-segment", c.GPUsPerSegment != nil, simai, "the SimAI families"},
		{"--psw", c.PSW != nil, simai, "the SimAI families"},
		{"--asw-per-psw", c.ASWPerPSW != nil, simai, "the SimAI families"},
		{"--fat-tree-k", c.K != nil, c.Family == topo.FatTree, "fat-tree"},
		{"--oversubscription", c.Oversub != 1, c.Family == topo.FatTree, "fat-tree"},
		{"--oversubscribe-by", c.OversubBy != nil, c.Family == topo.FatTree, "fat-tree"},
		{"--routers-per-group", c.RoutersPerGroup != nil, c.Family == topo.Dragonfly, "dragonfly"},
		{"--terminals-per-router", c.TerminalsPerRouter != nil, c.Family == topo.Dragonfly, "dragonfly"},
		{"--global-per-router", c.GlobalPerRouter != nil, c.Family == topo.Dragonfly, "dragonfly"},
		{"--groups", c.Groups != nil, c.Family == topo.Dragonfly, "dragonfly"},
	} {
		if f.given && !f.ok {
			return cli.Usagef("%s applies to %s, not --family %s", f.name, f.family, c.Family)
		}
	}
	return nil
}

// network is --nic-network's value, "" when left out.
func (c *command) network() (string, error) {
	if c.NICNetwork == nil {
		return "", nil
	}
	if err := topo.CheckNICNetwork(*c.NICNetwork); err != nil {
		return "", fmt.Errorf("--nic-network %w", err)
	}
	return *c.NICNetwork, nil
}

func (c *command) params() (topo.Params, error) {
	p := topo.Params{
		Family: c.Family, GPUsPerServer: c.GPUsPerServer,
		GPUType: c.GPUType, NICBW: float64(c.NICBW), NVLinkBW: float64(c.NVLinkBW),
		NVLinkLatencyPs: latency(c.NVLinkLatency), NICLatencyPs: latency(c.NICLatency),
		SwitchBW: float64(c.SwitchBW), SwitchLatencyPs: latency(c.SwitchLatency), ErrorRate: c.ErrorRate,
		Oversub: c.Oversub,
	}
	if c.Oversub < 1 {
		return p, fmt.Errorf("--oversubscription %g must be at least 1 (1 = non-blocking)", c.Oversub)
	}
	if err := c.checkFamilyFlags(); err != nil {
		return p, err
	}
	net, err := c.network()
	if err != nil {
		return p, err
	}
	p.NICNetwork = net
	if c.OversubBy != nil {
		if !slices.Contains(topo.OversubModes, *c.OversubBy) {
			return p, fmt.Errorf("--oversubscribe-by %q must be %s", *c.OversubBy, strings.Join(topo.OversubModes, " or "))
		}
		p.OversubBy = *c.OversubBy
	}
	if v := c.NVSwitchesPerServer; v != nil {
		switch {
		case *v < 0:
			return p, fmt.Errorf("--nvswitches-per-server %d must not be negative", *v)
		case *v == 0 && c.GPUsPerServer > 1:
			return p, fmt.Errorf("--nvswitches-per-server 0: the %d GPUs of a server reach each other through an NVSwitch; 0 is for servers of one GPU", c.GPUsPerServer)
		}
		p.NVSwitchesPerServer = *v
	}
	for _, f := range []struct {
		name string
		v    *int
		to   *int
	}{
		{"gpus", c.GPUs, &p.GPUs}, {"nics-per-asw", c.NICsPerASW, &p.NICsPerASW}, {"psw", c.PSW, &p.PSWs},
		{"asw-per-psw", c.ASWPerPSW, &p.ASWPerPSW}, {"fat-tree-k", c.K, &p.K},
		{"routers-per-group", c.RoutersPerGroup, &p.RoutersPerGroup}, {"terminals-per-router", c.TerminalsPerRouter, &p.TerminalsPerRouter},
		{"global-per-router", c.GlobalPerRouter, &p.GlobalPerRouter}, {"groups", c.Groups, &p.Groups},
	} {
		if *f.to, err = count(f.name, f.v); err != nil {
			return p, err
		}
	}
	segment, err := count("gpus-per-segment", c.GPUsPerSegment)
	if err != nil {
		return p, err
	}
	if segment > 0 {
		if p.NICsPerASW > 0 {
			return p, cli.Usagef("give --gpus-per-segment or --nics-per-asw, not both")
		}
		per := 1
		if topo.RailOptimized(c.Family) {
			per = c.GPUsPerServer
		}
		if per <= 0 || segment%per != 0 {
			return p, fmt.Errorf("--gpus-per-segment %d is not a whole number of servers of %d GPUs", segment, per)
		}
		p.NICsPerASW = segment / per
	}
	return p, nil
}

func (c *command) run() (err error) {
	if c.NICNetwork != nil && c.Format == "simai" {
		return cli.Usagef("--nic-network: SimAI's text topology cannot carry it (the stream's params do)")
	}
	var t *topo.Topology
	if c.FromSimAI != "" {
		f, err := os.Open(c.FromSimAI)
		if err != nil {
			return err
		}
		defer f.Close()
		if t, err = topo.ReadSimAI(f, c.FromSimAI); err != nil {
			return err
		}
		// SimAI's file does not say; the flag names it as for a generated fabric.
		if net, err := c.network(); err != nil {
			return err
		} else if net != "" {
			t.Params[topo.ParamNICNetwork] = net
		}
	} else {
		var notes []string
		var err error
		if c.GPUsPerServer <= 0 {
			return fmt.Errorf("--gpus-per-server %d must be positive", c.GPUsPerServer)
		}
		p, err := c.params()
		if err != nil {
			return err
		}
		if t, notes, err = topo.Generate(p); err != nil {
			return err
		}
		for _, n := range notes {
			fmt.Fprintf(os.Stderr, "topogen: note: %s\n", n)
		}
	}
	binary := "stream"
	if c.Summary || c.Format == "simai" {
		binary = "" // text
	}
	out, done, err := cli.CreateOutput(c.Out, binary)
	if err != nil {
		return err
	}
	defer func() { err = done(err) }()
	switch {
	case c.Summary:
		s, err := topo.Summarize(t)
		if err != nil {
			return err
		}
		return s.Write(out)
	case c.Format == "simai":
		return topo.WriteSimAI(out, t)
	}
	if env := cli.SimAIEnv(); env != "" {
		// For simccl-decompose, which reads them, to tell when they
		// reached this program only (a VAR=value prefix on topogen).
		if t.Params == nil {
			t.Params = map[string]string{}
		}
		t.Params[topo.ParamSimAIEnv] = env
	}
	w, err := stream.NewWriter(out, cli.Producer("topogen"))
	if err != nil {
		return err
	}
	if err := w.Topology(t); err != nil {
		return err
	}
	return w.Close()
}
