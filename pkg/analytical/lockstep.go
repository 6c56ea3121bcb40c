package analytical

import (
	"fmt"
	"slices"

	"github.com/fabricsim/fabricsim/pkg/expand"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/route"
)

// Lockstep (Options.ApproxLockstep, an APPROXIMATION; expand/lockstep.go):
// an expanded flow whose sibling groups' matching flows move with it (its
// members) is sent as one fluid flow over the union of their paths, each
// member routed as at flow granularity (its own id hashed, its own NIC
// port; under spray and adaptive its even split). Each link is weighted
// by how many of them cross it (the solver weighs a flow's claim on a link
// by its weight, as for a sprayed flow's shares): at rate r it puts r*w
// on the link, so the link is shared exactly as among those flows held to
// one rate, and other flows there see every member's bytes. It sends after
// the representative's step latency and lands its path latency after its
// last byte.
//
// The common rate is the slowest member's, so each step of a ring waits
// for the unluckiest group's ECMP collisions, where in the full run each
// group keeps its own pace and the collective ends with the slowest
// group's sum of steps: under ECMP on a fat-tree lockstep comes out slow,
// the more so the more groups share a class (Options.LockstepGroups).
// Letting only the representative's links limit the rate (the members
// "faring as it does") came out 10% fast on the same MoE, and loads the
// members' links beyond their capacity, starving other flows: not kept.
// ApproxLockstepNote is what the trace (fabricsim.approximate), the
// summary line and fctstats say of a lockstep run.
const ApproxLockstepNote = "approx-lockstep: sibling groups of like layout moved in lockstep with one representative each (one rate per class, every member's own path)"

// members is the lockstep members of flow i (none for a stream flow or
// without lockstep).
func (e *engine) members(i int32) []expand.Member {
	if i < e.n || e.ex == nil {
		return nil
	}
	return e.ex.Members(i)
}

// lockstepUnion puts into e.lockLinks and e.lockW the links flow f (its
// path e.path) and its members cross, each with how many of them do
// (sprayed ones with their shares). The weights are nil when each link
// carries one of them.
func (e *engine) lockstepUnion(f *flowset.Flow, members []expand.Member) error {
	if e.spreadAt == nil {
		e.spreadAt = make([]float64, e.r.DirLinks())
	}
	links := e.lockLinks[:0]
	add := func(l route.DirLink, x float64) {
		if e.spreadAt[l] == 0 {
			links = append(links, l)
		}
		e.spreadAt[l] += x
	}
	one := func(src, dst int32, port int, path []route.DirLink) error {
		if e.opt.Routing.Hashed() || f.Size == 0 {
			for _, l := range path {
				add(l, 1)
			}
			return nil
		}
		var load func(route.DirLink) float64
		if e.opt.Routing == route.Adaptive {
			load = e.load
		}
		return e.r.SpreadLeast(src, dst, port, 1, load, add)
	}
	err := one(f.Src, f.Dst, int(f.Port), e.path)
	for k := 0; err == nil && k < len(members); k++ {
		m := &members[k]
		hash := route.QPHash(m.Src, m.Dst, m.ID, 0, e.opt.Seed)
		e.lockPath, err = e.r.AppendPathPort(e.lockPath[:0], m.Src, m.Dst, hash, int(m.Port))
		if err != nil {
			err = fmt.Errorf("flow %d (moving in lockstep with flow %d): %v", m.ID, f.ID, err)
			break
		}
		err = one(m.Src, m.Dst, int(m.Port), e.lockPath)
	}
	slices.Sort(links)
	e.lockW = e.lockW[:0]
	ones := true
	for _, l := range links {
		w := float32(e.spreadAt[l])
		e.spreadAt[l] = 0
		ones = ones && w == 1
		e.lockW = append(e.lockW, w)
	}
	e.lockLinks = links
	if ones {
		e.lockW = e.lockW[:0]
	}
	return err
}
