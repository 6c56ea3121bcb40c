package expand

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/collective"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/flowset"
)

// Channel merging (UseChannelMerge). NCCL runs a ring collective's
// channels in a few ring orders: SimAI's 9216-GPU example's DP rings have
// 16 channels in 4 orders, each order taken by 4 channels that carry the
// same bytes. Such channels (a class) make the same flows, row by row:
// same source, destination, size, step latency and pace, the same deps
// within the channel. The first of a class (its representative) gets
// slots; each other channel's flow is attached to the representative's
// flow of the same place as a Member, as lockstep.go attaches a sibling
// group's, and makes no slot, dep or event. A backend sends the
// representative's flow with its members as one flow over all their
// paths, each link weighted by how many of them cross it.
//
// That is exact when the members would run at one rate anyway. Where
// their paths are one (no ECMP choice) the max-min rates of identical
// flows on identical links are equal. Where ECMP spreads them (a ring hop
// between segments, over the spines), they are equal when each is limited
// by a link all of them cross (their NIC): the backend checks that at
// every solve (analytical: fluid.merged) and, if one was limited by a
// link only some cross, runs again with that collective's shape
// (SkipChannelMerge) unmerged. So the result is the
// unmerged run's, up to the rounding of a weighted link's sum.
//
// The classes come from a dry expansion of the collective on the group
// (cached by the collective's shape and the group's layout) that hashes
// each channel's rows with ranks as positions in the group; at run time
// every member flow is checked against its representative's.

// UseChannelMerge makes the ring channels of a COLL node's groups that
// emit the same flows move with the first of them (see above). Not with
// lockstep's groups (UseLockstep).
func (x *Store) UseChannelMerge() { x.chanMerge = true }

// SkipChannelMerge leaves unmerged the COLL nodes of the collective
// shape named (as Shape names it): a run found them inexact there.
func (x *Store) SkipChannelMerge(shape string) {
	if x.chanSkip == nil {
		x.chanSkip = map[string]bool{}
	}
	x.chanSkip[shape] = true
}

// Shape names the collective shape of expanded flow i's COLL node: what
// its expansion depends on besides its groups' ranks.
func (x *Store) Shape(i int32) string {
	f := x.in.Flow(x.Coll(i))
	return shapeKey(x.in.Collectives[f.Coll])
}

// NodeShape is Shape for COLL node c.
func (x *Store) NodeShape(c int32) string {
	return shapeKey(x.in.Collectives[x.in.Flow(c).Coll])
}

// ChannelsMerged is the flows that moved with another channel's flow
// (counted in Made, not in Mirrored).
func (x *Store) ChannelsMerged() int64 { return x.chanMembers }

// chanClasses is, for a group's channels with flows (in the order the
// expansion emits them), the channel each moves with (its own for a
// representative); nil when each stands for itself. Cached.
func (x *Store) chanClasses(rec *stream.Collective, g []int32) ([]int32, error) {
	if x.local == nil {
		x.local, x.perServer = localIndexes(x.in.Topology)
	}
	key := shapeKey(rec) + "|" + x.layout(g)
	if c, ok := x.chanCache[key]; ok {
		return c, nil
	}
	if x.pos == nil {
		x.pos = make([]int32, x.in.Topology.GPUs)
	}
	for p, r := range g {
		if r < 0 || int(r) >= len(x.pos) {
			return nil, nil
		}
		x.pos[r] = int32(p + 1)
	}
	defer func() {
		for _, r := range g {
			x.pos[r] = 0
		}
	}()
	var sig []uint64  // per gen
	var start []int64 // per gen: its first id
	var count []int64 // per gen: its flows
	bad := false
	p, err := x.x.Start(rec, [][]int32{g}, func(o collective.Origin, sf *stream.Flow) error {
		if o.Gen < 0 {
			return nil
		}
		for int(o.Gen) >= len(sig) {
			sig, start, count = append(sig, 14695981039346656037), append(start, sf.ID), append(count, 0)
		}
		k := o.Gen
		count[k]++
		h := sig[k]
		mix := func(v int64) { h = (h ^ uint64(v)) * 1099511628211 }
		pos := func(v int32) int64 {
			if v < 0 || int(v) >= len(x.pos) {
				return -1 - int64(v)
			}
			return int64(x.pos[v]) - 1
		}
		mix(int64(o.Row))
		mix(pos(sf.Src))
		mix(pos(sf.Dst))
		mix(sf.Size)
		mix(sf.DelayPs)
		mix(sf.PacePs)
		mix(int64(sf.Chunk))
		mix(int64(len(sf.ConnType)))
		if len(sf.ConnType) > 0 {
			mix(int64(sf.ConnType[0]))
		}
		mix(int64(len(sf.Deps)))
		for _, d := range sf.Deps {
			if d >= start[k] {
				mix(d - start[k])
			} else {
				mix(-1 - (d - o.Base)) // the group's entry delays: shared
			}
		}
		if sf.ID-start[k] != count[k]-1 {
			bad = true // ids not consecutive within the channel
		}
		sig[k] = h
		return nil
	})
	if err != nil {
		return nil, err
	}
	for k := 0; k < p.Gens(); k++ {
		for {
			more, err := p.Row(k)
			if err != nil {
				return nil, err
			}
			if !more {
				break
			}
		}
	}
	var rep []int32
	if !bad && len(sig) == p.Gens() {
		rep = make([]int32, len(sig))
		first := map[[2]uint64]int32{}
		shared := false
		for k := range sig {
			id := [2]uint64{sig[k], uint64(count[k])}
			r, ok := first[id]
			if !ok {
				r = int32(k)
				first[id] = r
			} else {
				shared = true
			}
			rep[k] = r
		}
		if !shared {
			rep = nil
		}
	}
	x.chanCache[key] = rep
	return rep, nil
}

// shapeKey is what a collective's expansion depends on besides its
// group's ranks.
func shapeKey(rec *stream.Collective) string {
	b := make([]byte, 0, 128)
	b = append(b, rec.Op...)
	b = append(b, '|')
	b = append(b, rec.Algorithm...)
	b = append(b, '|')
	b = append(b, rec.Protocol...)
	for _, v := range []int64{rec.Size, int64(rec.Channels), int64(b2i(rec.PXN)), rec.SendLatPs} {
		b = append(b, '|')
		b = strconv.AppendInt(b, v, 10)
	}
	if c := rec.Cut; c != nil {
		for _, v := range []int64{c.ChunkBytes, c.MaxChunks, c.BaseLatPs, c.IntraLatPs, c.InterLatPs, c.StepBytes, c.StepIntraPs, c.StepInterPs, c.StepSerialPs, c.StepProxyPs, c.StepPacePs, c.MaxRecvs, c.StepTreeFs, c.StepTreeShare, c.StepTreeWhole} {
			b = append(b, '|')
			b = strconv.AppendInt(b, v, 10)
		}
	}
	return string(b)
}

// chanState is a set's channel merging: per group run, its channels'
// classes (relative to its first channel; nil: none) and its first
// channel's index; per channel, its first flow's id.
type chanState struct {
	on     bool
	cls    [][]int32
	gfirst []int32
	gstart []int64
}

// chanRep is the channel flow gen (of group grp) moves with, or gen.
func (c *chanState) chanRep(grp, gen int32) int32 {
	if !c.on || gen < 0 || int(grp) >= len(c.cls) || c.cls[grp] == nil || c.gfirst[grp] < 0 {
		return gen
	}
	rel := gen - c.gfirst[grp]
	if rel < 0 || int(rel) >= len(c.cls[grp]) {
		return gen
	}
	return c.gfirst[grp] + c.cls[grp][rel]
}

// seen records a flow of channel gen of group grp (ids rise within a
// channel, the first being its first).
func (c *chanState) seen(grp, gen int32, id int64) {
	if gen < 0 {
		return
	}
	if c.gfirst[grp] < 0 {
		c.gfirst[grp] = gen
	}
	for int(gen) >= len(c.gstart) {
		c.gstart = append(c.gstart, -1)
	}
	if c.gstart[gen] < 0 {
		c.gstart[gen] = id
	}
}

// mapDep is dep d of a flow of group grp, moved onto the representative
// channel's flow when it is a merged channel's.
func (c *chanState) mapDep(grp int32, d int64) int64 {
	g0 := c.gfirst[grp]
	if g0 < 0 || int(grp) >= len(c.cls) || c.cls[grp] == nil || d < c.gstart[g0] {
		return d
	}
	// The group's channel holding d: the last to start at or before it.
	last := g0 + int32(len(c.cls[grp])) - 1
	lo, hi := g0, min(last, int32(len(c.gstart))-1)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if s := c.gstart[mid]; s >= 0 && s <= d {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	r := c.chanRep(grp, lo)
	if r == lo {
		return d
	}
	return d - c.gstart[lo] + c.gstart[r]
}

// attachChan takes in flow sf of a merged channel of set s: the flow of
// its representative channel rep at the same place carries it.
func (x *Store) attachChan(s int32, rep int32, o collective.Origin, sf *stream.Flow) error {
	set := &x.sets[s]
	c := &set.chans
	id := c.gstart[rep] + (sf.ID - c.gstart[o.Gen])
	if id < 0 || id >= int64(len(set.slots)) || set.slots[id] == 0 {
		return fmt.Errorf("flow %d of channel %d has no flow of the channel it moves with in flight (an internal error: run with --no-merge-channels)", sf.ID, o.Gen)
	}
	slot := set.slots[id] - 1
	d := &x.flows[slot]
	kind := flowKind(sf)
	if kind != d.Kind || (kind == flowset.Transfer && (sf.Src != d.Src || sf.Dst != d.Dst || sf.Size != d.Size || des.Time(sf.DelayPs) != d.Lat || flowset.PaceNsOf(sf.PacePs) != d.PaceNs)) ||
		(kind == flowset.Delay && sf.DelayPs != d.Size) {
		return fmt.Errorf("flow %d of channel %d differs from flow %d of the channel it moves with (an internal error: run with --no-merge-channels)", sf.ID, o.Gen, id)
	}
	copies := int64(set.copies)
	if o.Group != set.repAt {
		copies = 0
	}
	rc := int64(set.rcopies)
	x.total += 1 + copies + rc
	x.mirrored += copies
	if set.rot {
		x.rotFlows += rc
	} else {
		x.railFlows += rc
	}
	x.chanMembers++
	if set.reuse.key != "" && o.Group == set.repAt {
		set.reuse.rec.made++
		set.reuse.rec.chanms++
		if kind == flowset.Transfer {
			set.reuse.rec.bytes += sf.Size
		}
	}
	if kind != flowset.Transfer {
		return nil
	}
	m := x.member(set, sf)
	x.members[slot] = append(x.members[slot], m)
	x.bytes += (1 + copies + rc) * sf.Size
	x.mirroredB += copies * sf.Size
	return nil
}

// followChans makes, after channel gen emitted rows, the same rows of
// the channels that move with it.
func (x *Store) followChans(s int32, gen int) error {
	set := &x.sets[s]
	p := set.p
	g := int32(p.GenGroup(gen))
	c := &set.chans
	first, n := p.GroupGens(int(g))
	want := p.Rows(gen)
	for m := gen + 1; m < first+n; m++ {
		if c.chanRep(g, int32(m)) != int32(gen) {
			continue
		}
		if err := rowsUpTo(p, m, want); err != nil {
			return err
		}
	}
	return nil
}

// rowsUpTo makes generator gen's rows until it has want of them or
// has none left: a member channel or group catching up with the one it
// moves with.
func rowsUpTo(p *collective.Expansion, gen int, want int32) error {
	for p.Rows(gen) < want {
		more, err := p.Row(gen)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// mergeable reports whether rec's collective is cut in channel rows
// (collective.ringRows: a ring AllReduce, AllGather or ReduceScatter),
// the only ones whose channels are compared.
func mergeable(rec *stream.Collective) bool {
	if !strings.EqualFold(rec.Algorithm, "ring") {
		return false
	}
	switch strings.ToLower(rec.Op) {
	case "allreduce", "allgather", "reducescatter":
		return true
	}
	return false
}
