package analytical

import (
	"fmt"
	"slices"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/collective"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/route"
)

// maxPricedPairs bounds the rank pairs one collective's traffic matrix may
// have before the fabric is left unpriced (a warning says so): a direct
// AllToAll over 4096 ranks is 16.8 M pairs.
const maxPricedPairs = 1 << 22

// collLoad prices the fabric for COLL nodes (collective granularity).
// NCCL's model time, a COLL's delay_ps, assumes the network beyond the
// NICs never limits a collective. collLoad loads the links with the
// collective's traffic matrix on its group and every sibling group
// (collective.Traffic, split over equal-cost paths by route.Spread) and
// adds the time by which the most loaded fabric link is slower than the
// most loaded NIC link: zero on a non-blocking fat-tree, the uplinks'
// extra time on an oversubscribed one. The loads scale with the size, so
// they are computed once per group and plan, per byte.
type collLoad struct {
	in    *flowset.Set
	r     *route.Router
	fab   collective.Fabric
	cache map[loadKey]*demand
	load  []float64 // scratch, per directed link
	pairs []pair    // scratch: one stage's traffic, pair by pair
	warn  map[string]bool
	res   *Result
}

type loadKey struct {
	group    int64
	op, algo string
	proto    string
	channels int
	pxn      bool
}

type pair struct {
	a, b int32
	x    float64
}

// demand is one collective's load on the links per byte of its size.
type demand struct {
	links []route.DirLink
	ps    []float64 // ps each link needs per byte of the collective's size
	extra float64   // ps per byte the fabric adds to NCCL's model time
}

func newCollLoad(in *flowset.Set, r *route.Router, res *Result) *collLoad {
	return &collLoad{in: in, r: r, fab: collective.FabricOf(in.Topology), cache: map[loadKey]*demand{},
		load: make([]float64, r.DirLinks()), warn: map[string]bool{}, res: res}
}

// extra is the time the fabric adds to COLL node f's model time.
func (c *collLoad) extra(f *flowset.Flow) des.Time { return c.demandOf(f).extraFor(f.Size) }

// extraFor is the time the fabric adds to a collective of size bytes; an
// unpriced collective (nil) gets none.
func (d *demand) extraFor(size int64) des.Time {
	if d == nil {
		return 0
	}
	return des.Time(d.extra * float64(size))
}

// demandOf returns COLL node f's per-byte demand, nil when it cannot be
// priced (the run then goes on at NCCL's model time, with a warning).
func (c *collLoad) demandOf(f *flowset.Flow) *demand {
	co := c.in.Collectives[f.Coll]
	if co == nil {
		return nil
	}
	k := loadKey{co.Group, co.Op, co.Algorithm, co.Protocol, co.Channels, co.PXN}
	if d, ok := c.cache[k]; ok {
		return d
	}
	d, err := c.price(co)
	if err != nil {
		msg := fmt.Sprintf("%s %s on group %d: fabric not priced (%v); it takes NCCL's model time", co.Algorithm, co.Op, co.Group, err)
		if !c.warn[msg] {
			c.warn[msg] = true
			c.res.Warnings = append(c.res.Warnings, msg)
		}
	}
	c.cache[k] = d
	return d
}

func (c *collLoad) price(co *stream.Collective) (*demand, error) {
	g := c.in.Groups[co.Group]
	if g == nil {
		return nil, fmt.Errorf("no group %d", co.Group)
	}
	sp, err := collective.SpecOf(co, c.in.Topology.GPUType)
	if err != nil {
		return nil, err
	}
	groups := [][]int32{g.Ranks}
	for _, id := range g.Siblings {
		groups = append(groups, c.in.Groups[id].Ranks)
	}
	if n := int64(len(g.Ranks)); n*n*int64(len(groups)) > maxPricedPairs && (sp.Algo == collective.AlgoDirect || sp.Algo == collective.AlgoPXN) {
		return nil, fmt.Errorf("%d groups of %d ranks are more than %d rank pairs", len(groups), n, maxPricedPairs)
	}
	// The pairs are gathered in a slice and merged after a stable sort,
	// cheaper than a map for the thousands a stage makes; the fixed order
	// keeps the float sums, and so the run, deterministic.
	pairs := c.pairs[:0]
	for _, ranks := range groups {
		if err := collective.Traffic(c.fab, sp, 1, ranks, func(a, b int32, x float64) { pairs = append(pairs, pair{a, b, x}) }); err != nil {
			return nil, err
		}
	}
	c.pairs = pairs // the scratch is kept for the next stage
	slices.SortStableFunc(pairs, func(x, y pair) int {
		if x.a != y.a {
			return int(x.a - y.a)
		}
		return int(x.b - y.b)
	})
	merged := pairs[:0]
	for _, p := range pairs {
		if k := len(merged) - 1; k >= 0 && merged[k].a == p.a && merged[k].b == p.b {
			merged[k].x += p.x
		} else {
			merged = append(merged, p)
		}
	}
	var touched []route.DirLink
	add := func(d route.DirLink, x float64) {
		if c.load[d] == 0 {
			touched = append(touched, d)
		}
		c.load[d] += x
	}
	for _, p := range merged {
		if err := c.r.Spread(p.a, p.b, p.x, add); err != nil {
			return nil, err
		}
	}
	slices.Sort(touched)
	d := &demand{links: touched, ps: make([]float64, len(touched))}
	var fabric, nic float64
	t := c.in.Topology
	for i, l := range touched {
		d.ps[i] = c.load[l] * 8e12 / c.r.Bandwidth(l)
		c.load[l] = 0
		switch t.Links[l.Link()].Kind {
		case stream.LinkFabric:
			fabric = max(fabric, d.ps[i])
		case stream.LinkNIC, stream.LinkPCIe:
			nic = max(nic, d.ps[i])
		}
	}
	d.extra = max(0, fabric-nic)
	return d, nil
}
