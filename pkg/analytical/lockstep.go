package analytical

import (
	"fmt"
	"math"
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
// What limits the common rate is Options.LockstepRate. SlowestMember:
// every member's path, so each step of a ring waits for the unluckiest
// group's ECMP collisions, where in the full run each group keeps its own
// pace and the collective ends with the slowest group's sum of steps:
// under ECMP on a fat-tree it comes out slow (+34% on a 128-GPU DP ring
// and EP AllToAll), the more so the more groups share a class
// (Options.LockstepGroups). RepresentativePace: the representative's
// path alone; the members' links off it are soft entries (below), loaded
// but never the limit: the representative is taken as a typical group,
// the members faring as it does (-11% and -10% on the same). Where the
// groups are alike and so are their paths' loads (an even split on a
// symmetric fabric, or groups on links of their own) both are the full
// run.
// ApproxLockstepNote is what the trace (fabricsim.approximate), the
// summary line and fctstats say of a lockstep run.
const ApproxLockstepNote = "approx-lockstep: sibling groups of like layout moved in lockstep with one representative each (one rate per class, every member's own path)"

// members is the lockstep members of flow i (none for a stream flow or
// without lockstep), valid until the next call.
func (e *engine) members(i int32) []expand.Member {
	if i < e.n || e.ex == nil {
		return nil
	}
	return e.ex.Members(i)
}

// memberCount is len(e.members(i)), without making them.
func (e *engine) memberCount(i int32) int {
	if i < e.n || e.ex == nil {
		return 0
	}
	return e.ex.MemberCount(i)
}

// keptUnion is what lockstepUnion kept for flow f's (i's) connection with
// these members, nil if none. Hashed per connection
// (route.KeyConnection), a flow's path and its members' are their
// connections': a ring's representative hop comes back every step with
// the same members, so its union, and its own path, are kept.
func (e *engine) keptUnion(i int32, f *flowset.Flow) *union {
	if !e.keepUnions() {
		return nil
	}
	k, fits := connKey(f)
	if !fits {
		return nil
	}
	u, ok := e.unions[k]
	if !ok {
		return nil
	}
	if key, named := e.ex.MembersKey(i); named && u.named && u.key == key {
		return u // the same members' connections (expand.Store.MembersKey)
	}
	if sameConns(u.members, e.members(i)) {
		return u
	}
	return nil
}

// keepUnions reports whether lockstep flows' unions are kept: not once
// a link is down (faults.go), which reroutes.
func (e *engine) keepUnions() bool {
	return e.opt.ECMPKey == route.KeyConnection && e.opt.Routing.Hashed() && e.fail.down == 0
}

// lockstepUnion puts into e.lockLinks and e.lockW the links flow f (i,
// its path e.path) and its members cross, each with how many of them do
// (sprayed ones with their shares). The weights are nil when each link
// carries one of them. u is keptUnion's answer for them.
func (e *engine) lockstepUnion(i int32, f *flowset.Flow, u *union) error {
	if u != nil {
		e.lockLinks = append(e.lockLinks[:0], u.links...)
		e.lockW = append(e.lockW[:0], u.w...)
		return nil
	}
	members := e.members(i)
	if err := e.unite(f, members); err != nil || !e.keepUnions() {
		return err
	}
	key, fits := connKey(f)
	if !fits {
		return nil
	}
	if e.unions == nil {
		e.unions = map[uint64]*union{}
	}
	u = e.unions[key]
	if u == nil {
		u = &union{}
		e.unions[key] = u
	}
	u.members = append(u.members[:0], members...)
	u.key, u.named = e.ex.MembersKey(i)
	u.path = append(u.path[:0], e.path...)
	u.links = append(u.links[:0], e.lockLinks...)
	u.w = append(u.w[:0], e.lockW...)
	return nil
}

// connKey packs a lockstep flow's connection (source, destination,
// channel, NIC port) into a map key, as Go's maps hash a uint64 faster
// than a struct; fits is false past 2^21 nodes or 2^14 channels (then
// nothing is kept). union is what lockstepUnion found for it, with the
// members it was for.
func connKey(f *flowset.Flow) (key uint64, fits bool) {
	if uint32(f.Src) >= 1<<21 || uint32(f.Dst) >= 1<<21 || uint32(f.Channel) >= 1<<14 {
		return 0, false
	}
	return uint64(f.Src)<<43 | uint64(f.Dst)<<22 | uint64(f.Channel)<<8 | uint64(f.Port), true
}

type union struct {
	members []expand.Member
	key     int64 // the members' MembersKey, if named
	named   bool
	path    []route.DirLink // the flow's own
	links   []route.DirLink
	w       []float32
}

// sameConns reports whether members a and b are the same connections,
// one for one (their transfers' ids aside).
func sameConns(a, b []expand.Member) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if a[k].Src != b[k].Src || a[k].Dst != b[k].Dst || a[k].Channel != b[k].Channel || a[k].Port != b[k].Port {
			return false
		}
	}
	return true
}

// unite is lockstepUnion's work, done anew.
func (e *engine) unite(f *flowset.Flow, members []expand.Member) error {
	if e.spreadAt == nil {
		e.spreadAt = make([]float64, e.r.DirLinks())
	}
	if e.hardAt == nil {
		e.hardAt = make([]bool, e.r.DirLinks())
	}
	links := e.lockLinks[:0]
	hard := true
	add := func(l route.DirLink, x float64) {
		if e.spreadAt[l] == 0 {
			links = append(links, l)
		}
		e.spreadAt[l] += x
		e.hardAt[l] = e.hardAt[l] || hard
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
	hard = e.opt.LockstepRate == SlowestMember || e.merging // every member's links limit the rate
	for k := 0; err == nil && k < len(members); k++ {
		m := &members[k]
		hash := route.QPHash(m.Src, m.Dst, e.opt.ECMPKey.ID(m.ID, m.Channel), 0, e.opt.Seed)
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
		if !e.hardAt[l] {
			w = -w // soft: fluid.go
		}
		e.spreadAt[l], e.hardAt[l] = 0, false
		ones = ones && w == 1
		e.lockW = append(e.lockW, w)
	}
	e.lockLinks = links
	if ones {
		e.lockW = e.lockW[:0]
	}
	return err
}

// Soft entries in the solver (fluid.go): a negative weight marks a link
// of a lockstep flow's members off its representative's path. It claims
// its share of the link like any entry while the flow's rate grows, but
// when the link saturates the flow is not frozen there: the entry's load
// is held to the link's level (caps) and the flow grows on, limited only
// by its representative's links. The link never carries more than its
// capacity, and the members' bytes there still weigh on its other flows.

// abs32 clears the sign bit: max(x, -x) without max's NaN and zero
// checks (a weight is never NaN; -0 gives +0 either way).
func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

// signed is the slot's weight on path[k], negative for a soft entry.
func (s *slot) signed(k int) float32 {
	if len(s.w) == 0 {
		return 1
	}
	return s.w[k]
}

// hasSoft reports whether weights w have a soft entry, and starts keeping
// the entries' caps at the first.
func (f *fluid) hasSoft(w []float32) bool {
	for _, x := range w {
		if x < 0 {
			if f.caps == nil {
				f.caps = make([][]float64, len(f.flows))
				for l, list := range f.flows {
					for range list {
						f.caps[l] = append(f.caps[l], math.Inf(1))
					}
				}
			}
			return true
		}
	}
	return false
}

// uncap lifts slot s's caps: it is being solved again.
func (f *fluid) uncap(s *slot) {
	for k, l := range s.path {
		f.caps[l][s.pos[k]] = math.Inf(1)
	}
}

// lockstepLoads is the link loads' weights of the flow lockstepUnion
// made: bytes per byte of the flow on each link, soft ones too.
func (e *engine) lockstepLoads() []float32 {
	if len(e.lockW) == 0 {
		return nil
	}
	e.lockAbs = e.lockAbs[:0]
	for _, w := range e.lockW {
		e.lockAbs = append(e.lockAbs, abs32(w))
	}
	return e.lockAbs
}

// LockstepRate is what limits a lockstep flow's rate.
type LockstepRate int

const (
	// RepresentativePace (the default): the representative's path alone;
	// the members' other links only carry their load, held to each link's
	// fair level when it saturates (soft entries).
	RepresentativePace LockstepRate = iota
	// SlowestMember: every member's path (the class moves at its slowest
	// member's pace; comes out slow under ECMP).
	SlowestMember
)

// softLevel is the lowest cap on slot s's soft entries: removing s frees
// a share at that level on the link where it was held there.
func (f *fluid) softLevel(s *slot) float64 {
	level := math.Inf(1)
	for k, l := range s.path {
		if s.w[k] < 0 {
			level = min(level, f.caps[l][s.pos[k]])
		}
	}
	return level
}
