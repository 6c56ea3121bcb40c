package topo

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/units"
)

// fatTree builds a 3-tier k-ary fat-tree (Al-Fares et al.): k pods of k/2
// edge and k/2 aggregation switches, (k/2)^2 cores; aggregation switch j of
// every pod connects to cores j*k/2 .. j*k/2+k/2-1. GPUs fill edge switches
// in id order, so a server's GPUs share an edge switch.
//
// Oversubscription R is made one of two ways (Params.OversubBy):
//   - hosts (the default): each edge switch holds round(R*k/2) GPU NICs and
//     keeps k/2 uplinks, one to each aggregation switch of its pod; a higher
//     ratio puts more servers under each edge switch.
//   - uplinks: each edge switch keeps k/2 GPU NICs and gets
//     u = round((k/2)/R) uplinks (at least 1), so the tree holds k*(k/2)^2
//     GPUs whatever R, and 1:1 and R:1 differ only in the uplinks. Every
//     edge switch of a pod connects to the pod's aggregation switches
//     0..u-1; the aggregation and core tiers (and every node id) stay those
//     of the k-ary tree, so aggregation switches u..k/2-1 of each pod and
//     the cores above them carry no traffic (--summary counts them empty).
//     Spreading the uplinks evenly instead (edge e to aggs (e*u+j) mod k/2)
//     would cut the fabric apart: aggregation switch j reaches only core
//     group j, so two edge switches with no aggregation index in common
//     could reach each other only through a third edge switch, and with one
//     uplink not at all. When the rounding changes the ratio, a note gives
//     the real one.
//
// At 1:1 both ways build the same fabric.
func (b *builder) fatTree() ([]string, error) {
	p := &b.p
	var notes []string
	if p.Oversub == 0 {
		p.Oversub = 1
	}
	if p.Oversub < 1 || math.IsInf(p.Oversub, 0) || math.IsNaN(p.Oversub) {
		return nil, fmt.Errorf("--oversubscription %g must be at least 1", p.Oversub)
	}
	byUplinks := false
	switch p.OversubBy {
	case "", OversubHosts:
	case OversubUplinks:
		byUplinks = true
	default:
		return nil, fmt.Errorf("--oversubscribe-by %q must be %s", p.OversubBy, strings.Join(OversubModes, " or "))
	}
	if p.NICBW == 0 {
		p.NICBW = p.SwitchBW
	}
	// GPU NICs and uplinks of each edge switch of a k-ary tree. perEdgeF is
	// perEdge in float64, for size checks before the count is known to fit.
	perEdgeF := func(k int) float64 {
		if byUplinks {
			return float64(k / 2)
		}
		return math.Round(p.Oversub * float64(k/2))
	}
	perEdge := func(k int) int { return int(perEdgeF(k)) }
	uplinks := func(k int) int {
		if byUplinks {
			return max(1, int(math.Round(float64(k/2)/p.Oversub)))
		}
		return k / 2
	}
	how := fmt.Sprintf("%g:1", p.Oversub)
	if byUplinks {
		how += " by uplinks"
	}
	// A k-ary fat-tree has 5k²/4 switches, k³/2 fabric links (fewer when
	// the uplinks are thinned) and k³/4 edge ports down, times the
	// oversubscription when it is made by hosts: refuse absurd k and
	// oversubscription before they overflow anything.
	sizeOf := func(k int, gpus float64) error {
		fk := float64(k)
		fabric := fk * fk * fk / 2
		if byUplinks {
			fabric = fk*(fk/2)*float64(uplinks(k)) + fk*fk*fk/4
		}
		return b.checkSize(fmt.Sprintf("a k=%d fat-tree at %s", k, how), gpus, 5*fk*fk/4, 1, fabric)
	}
	if p.K != 0 {
		if p.K < 2 || p.K%2 != 0 {
			return nil, fmt.Errorf("--fat-tree-k %d must be even and at least 2", p.K)
		}
		gpus := float64(p.GPUs)
		if p.GPUs == 0 {
			gpus = float64(p.K) * float64(p.K/2) * perEdgeF(p.K)
		}
		if err := sizeOf(p.K, gpus); err != nil {
			return nil, err
		}
	} else if !byUplinks && math.Round(p.Oversub*2) > MaxGPUs {
		return nil, sizeOf(4, float64(4*2)*math.Round(p.Oversub*2))
	}
	if p.GPUs == 0 {
		if p.K == 0 {
			p.K = 8
		}
		p.GPUs = p.K * p.K / 2 * perEdge(p.K)
		p.GPUs -= p.GPUs % p.GPUsPerServer
	}
	if p.K == 0 {
		for p.K = 4; p.K*(p.K/2)*perEdge(p.K) < p.GPUs; p.K += 2 {
		}
		notes = append(notes, fmt.Sprintf("fat-tree radix k=%d (smallest even k holding %d GPUs at %s)", p.K, p.GPUs, how))
	}
	k := p.K
	if k < 2 || k%2 != 0 {
		return nil, fmt.Errorf("--fat-tree-k %d must be even and at least 2", k)
	}
	h := perEdge(k)
	if cap := k * (k / 2) * h; p.GPUs > cap {
		return nil, fmt.Errorf("--gpus %d exceeds a k=%d fat-tree's %d GPU ports", p.GPUs, k, cap)
	}
	if err := sizeOf(k, float64(p.GPUs)); err != nil {
		return nil, err
	}
	half := k / 2
	u := uplinks(k)
	if ratio := float64(h) / float64(u); byUplinks && math.Abs(ratio-p.Oversub) > 1e-9*p.Oversub {
		notes = append(notes, fmt.Sprintf("--oversubscription %g by uplinks: each edge switch of the k=%d fat-tree keeps %d GPU NICs and gets %s (round(%d/%g), at least 1), a real ratio of %.3g:1",
			p.Oversub, k, h, plural(u, "uplink"), half, p.Oversub, ratio))
	}
	edgeOf := func(g int) int { return g / h }
	firstNVS, err := b.gpusAndNVSwitches(p.GPUs, func(g int) int32 { return int32(edgeOf(g) / (k / 2)) })
	if err != nil {
		return nil, err
	}
	firstEdge := int32(len(b.t.Nodes))
	for e := 0; e < k*half; e++ {
		b.node(stream.NodeSwitch, RoleEdge, -1, int32(e/half), -1)
	}
	firstAgg := int32(len(b.t.Nodes))
	for a := 0; a < k*half; a++ {
		b.node(stream.NodeSwitch, RoleAgg, -1, int32(a/half), -1)
	}
	firstCore := int32(len(b.t.Nodes))
	for c := 0; c < half*half; c++ {
		b.node(stream.NodeSwitch, RoleCore, -1, -1, -1)
	}
	for g := 0; g < p.GPUs; g++ {
		b.nvlinks(g, firstNVS)
		b.nicLink(int32(g), firstEdge+int32(edgeOf(g)), 1)
	}
	for pod := 0; pod < k; pod++ {
		for e := 0; e < half; e++ {
			for a := 0; a < u; a++ {
				b.link(firstEdge+int32(pod*half+e), firstAgg+int32(pod*half+a), p.SwitchBW, p.SwitchLatencyPs, stream.LinkFabric)
			}
		}
	}
	for pod := 0; pod < k; pod++ {
		for a := 0; a < half; a++ {
			for c := 0; c < half; c++ {
				b.link(firstAgg+int32(pod*half+a), firstCore+int32(a*half+c), p.SwitchBW, p.SwitchLatencyPs, stream.LinkFabric)
			}
		}
	}
	b.t.Params["nic_bw"] = units.FormatBandwidth(p.NICBW)
	b.t.Params["k"] = strconv.Itoa(k)
	b.t.Params["gpus_per_edge"] = strconv.Itoa(h)
	b.t.Params["oversubscription"] = strconv.FormatFloat(p.Oversub, 'g', -1, 64)
	if byUplinks {
		// Left out by hosts, so that its streams stay as they were: no
		// oversubscribe_by means hosts, with k/2 uplinks per edge.
		b.t.Params["oversubscribe_by"] = OversubUplinks
		b.t.Params["uplinks_per_edge"] = strconv.Itoa(u)
	}
	return notes, nil
}

// dragonfly builds a 1D dragonfly as CODES models it: g groups of a routers,
// each with p terminals (GPU NICs), routers of a group fully connected, and
// h global channels per router. Global channel c of group i (router c/h)
// goes to group i+1+(c mod (g-1)); with g = a*h+1, the balanced maximum,
// every pair of groups shares exactly one global link.
func (b *builder) dragonfly() ([]string, error) {
	p := &b.p
	var notes []string
	if p.NICBW == 0 {
		p.NICBW = p.SwitchBW
	}
	if p.RoutersPerGroup == 0 && p.TerminalsPerRouter == 0 && p.GlobalPerRouter == 0 {
		// Balanced dragonfly a = 2p = 2h, the smallest that holds the GPUs.
		if p.GPUs == 0 {
			p.GPUs = 72
		}
		for t := 1; ; t++ {
			a, h := 2*t, t
			if a*t*(a*h+1) >= p.GPUs {
				p.RoutersPerGroup, p.TerminalsPerRouter, p.GlobalPerRouter = a, t, h
				break
			}
		}
		notes = append(notes, fmt.Sprintf("balanced dragonfly: %d routers per group, %d terminals per router, %d global channels per router",
			p.RoutersPerGroup, p.TerminalsPerRouter, p.GlobalPerRouter))
	}
	a, t, h := p.RoutersPerGroup, p.TerminalsPerRouter, p.GlobalPerRouter
	if a <= 0 || t <= 0 || h <= 0 {
		return nil, fmt.Errorf("--routers-per-group, --terminals-per-router and --global-per-router must all be positive (or all omitted)")
	}
	// g groups of a routers: a*g routers, g*a(a-1)/2 local and g*a*h/2
	// global links. At least two groups; refuse absurd sizes before the
	// group search below walks them.
	sizeOf := func(g, gpus float64, least string) error {
		fa, fh := float64(a), float64(h)
		return b.checkSize(fmt.Sprintf("a dragonfly of %s%s groups of %d routers with %d terminals and %d global channels each", least, count(g), a, t, h),
			gpus, fa*g, 1, g*fa*(fa-1)/2+g*fa*fh/2)
	}
	if p.Groups < 0 {
		return nil, fmt.Errorf("--groups %d: a dragonfly needs at least 2 groups", p.Groups)
	}
	if g := float64(max(p.Groups, 2)); float64(a)*g > MaxSwitches || float64(t) > MaxGPUs || float64(h)*float64(a) > MaxLinks {
		gpus := float64(p.GPUs)
		if p.GPUs == 0 {
			gpus = float64(a) * float64(t) * g
		}
		least := ""
		if p.Groups == 0 {
			least = "at least "
		}
		return nil, sizeOf(g, gpus, least)
	}
	if p.Groups == 0 {
		p.Groups = a*h + 1
		// Fewer GPUs than the maximum: the fewest groups that hold them and
		// still spread each group's global channels evenly.
		if p.GPUs > 0 && p.GPUs < a*t*p.Groups {
			for g := max(2, ceilDiv(p.GPUs, a*t)); g <= a*h+1; g++ {
				if (a*h)%(g-1) == 0 {
					p.Groups = g
					break
				}
			}
		}
	}
	g := p.Groups
	if g < 2 {
		return nil, fmt.Errorf("--groups %d: a dragonfly needs at least 2 groups", g)
	}
	if (a*h)%(g-1) != 0 {
		return nil, fmt.Errorf("--groups %d: the %d global channels of a group must divide evenly over the %d other groups", g, a*h, g-1)
	}
	if err := sizeOf(float64(g), float64(a)*float64(t)*float64(g), ""); p.GPUs == 0 && err != nil {
		return nil, err
	}
	if p.GPUs == 0 {
		p.GPUs = a * t * g
	}
	if p.GPUs > a*t*g {
		return nil, fmt.Errorf("--gpus %d exceeds the dragonfly's %d terminals", p.GPUs, a*t*g)
	}
	if err := sizeOf(float64(g), float64(p.GPUs), ""); err != nil {
		return nil, err
	}
	routerOf := func(gpu int) int { return gpu / t }
	firstNVS, err := b.gpusAndNVSwitches(p.GPUs, func(gpu int) int32 { return int32(routerOf(gpu) / a) })
	if err != nil {
		return nil, err
	}
	firstR := int32(len(b.t.Nodes))
	for r := 0; r < a*g; r++ {
		b.node(stream.NodeSwitch, RoleRouter, -1, int32(r/a), -1)
	}
	for gpu := 0; gpu < p.GPUs; gpu++ {
		b.nvlinks(gpu, firstNVS)
		b.nicLink(int32(gpu), firstR+int32(routerOf(gpu)), 1)
	}
	for grp := 0; grp < g; grp++ {
		for i := 0; i < a; i++ {
			for j := i + 1; j < a; j++ {
				b.link(firstR+int32(grp*a+i), firstR+int32(grp*a+j), p.SwitchBW, p.SwitchLatencyPs, stream.LinkFabric)
			}
		}
	}
	for grp := 0; grp < g; grp++ {
		for c := 0; c < a*h; c++ {
			off := c%(g-1) + 1
			if grp+off >= g {
				continue // emitted from the other end
			}
			copyIdx := c / (g - 1)
			peer := grp + off
			pc := copyIdx*(g-1) + (g - 1 - off) // the peer's channel back to grp
			b.link(firstR+int32(grp*a+c/h), firstR+int32(peer*a+pc/h), p.SwitchBW, p.SwitchLatencyPs, stream.LinkFabric)
		}
	}
	b.t.Params["nic_bw"] = units.FormatBandwidth(p.NICBW)
	b.t.Params["routers_per_group"] = strconv.Itoa(a)
	b.t.Params["terminals_per_router"] = strconv.Itoa(t)
	b.t.Params["global_per_router"] = strconv.Itoa(h)
	b.t.Params["groups"] = strconv.Itoa(g)
	return notes, nil
}

// plural counts: "1 uplink", "2 uplinks".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
