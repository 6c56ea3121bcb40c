package expand

import (
	"fmt"
	"strconv"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/collective"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/flowset"
)

// Lockstep: an APPROXIMATION, opt-in (flowsim-analytical
// --approx-lockstep). The sibling groups of a COLL node that have the
// same layout (size, ranks per server, local GPU indexes relative to the
// group's first rank) make the same flows, index for index. The first
// group of each such class (its representative) gets slots; each other
// group's flow is attached to the representative's flow of the same index
// as a Member (its own source, destination, id and NIC port), and makes
// no slot, no dep and no event. A backend sends a representative's flow
// and its members as one flow over all their paths (each link weighted by
// how many of them cross it) at one rate: the members move in lockstep
// with their representative, at the pace of the most loaded of their
// paths, and the class ends when it does.
//
// Every member's bytes still load its own path, hashed as at flow
// granularity, so ECMP collisions between groups stay; what is lost is
// each group's own pace (a group on lighter paths no longer finishes
// earlier and frees its links). Where the groups would run at the same
// rates anyway (a fabric that treats them alike, as routing with an even
// split over a symmetric tree does), the result is the full expansion's.
// It makes one group's flows, events and solver entries per class instead
// of every group's; routing still computes every member's path.

// Member is a flow of a sibling group that moves in lockstep with a
// representative's flow (see above).
type Member struct {
	Src, Dst int32
	ID       int64 // the id flow granularity gives it (ECMP hashes it)
	Port     uint8
	Channel  int32 // its channel (ECMP hashes it per connection: route.KeyConnection)
}

// UseLockstep makes every COLL node not marked by UseSymmetry run its
// sibling groups in lockstep with the representative of their layout
// class (see above): an approximation.
// At most max groups share a class (0: no bound): fewer groups per
// class cost more and couple less.
func (x *Store) UseLockstep(max int) { x.lockstep, x.lockMax = true, max }

// MakeMemberRows makes every row of every member group, as attach
// checks them, instead of attaching images of the representative's rows
// (followImages): slower, for checking that the two agree.
func (x *Store) MakeMemberRows() { x.noFollow = true }

// Members is the sibling flows moving in lockstep with expanded flow i
// (nil for none); valid until i completes, or, for members imaged
// (followImages), until the next call.
func (x *Store) Members(i int32) []Member {
	if !x.lockstep && !x.chanMerge {
		return nil
	}
	d := x.flow(i)
	if !d.imagedM {
		return x.members[i-x.base]
	}
	set := &x.sets[d.set]
	rep := set.p.GenGroup(int(d.gen))
	idx := d.ID - set.idBase - set.bases[rep]
	x.memBuf = x.memBuf[:0]
	for _, m := range set.lmembs[rep] {
		src, _ := set.image(m, d.Src) // followImages checked them
		dst, _ := set.image(m, d.Dst)
		x.memBuf = append(x.memBuf, Member{Src: src, Dst: dst, ID: set.idBase + set.bases[m] + idx, Channel: d.Channel})
	}
	return x.memBuf
}

// MemberCount is len(Members(i)), without making imaged ones.
func (x *Store) MemberCount(i int32) int {
	if !x.lockstep && !x.chanMerge {
		return 0
	}
	d := x.flow(i)
	if !d.imagedM {
		return len(x.members[i-x.base])
	}
	return len(x.sets[d.set].lmembs[x.sets[d.set].p.GenGroup(int(d.gen))])
}

// MembersKey names the connections of expanded flow i's members: two
// flows on the same connection (source, destination, channel, port)
// with the same key have members on the same connections, one for one
// (their member groups' images of it: the groups come with the key, the
// COLL node's group id). ok is false when there is no such name (the
// members were made, not imaged, or ports are numbered per expansion):
// compare the members themselves.
func (x *Store) MembersKey(i int32) (key int64, ok bool) {
	if !x.lockstep || x.multiNIC {
		return 0, false
	}
	set := &x.sets[x.flow(i).set]
	if set.rep == nil || !set.imaged {
		return 0, false
	}
	return set.group, true
}

// Lockstepped is the COLL nodes run in lockstep so far, the classes
// (representatives) they ran and the member flows that moved with the
// representatives' (counted in Made, not in Mirrored).
func (x *Store) Lockstepped() (nodes, classes, members int64) {
	return x.lockNodes, x.lockClasses, x.lockMembers
}

// classesOf is, for each of groups, the position of the group standing
// for it (its own for a representative); nil when every group stands for
// itself. Cached per group id.
func (x *Store) classesOf(id int64, groups [][]int32) []int32 {
	if c, ok := x.classes[id]; ok {
		return c
	}
	if x.local == nil {
		x.local, x.perServer = localIndexes(x.in.Topology)
	}
	rep := make([]int32, len(groups))
	first := map[string]int32{}
	size := map[string]int{}
	shared := false
	for gi, g := range groups {
		k := x.layout(g)
		r, ok := first[k]
		if !ok || (x.lockMax > 0 && size[k] >= x.lockMax) {
			r = int32(gi)
			first[k], size[k] = r, 0
		} else {
			shared = true
		}
		size[k]++
		rep[gi] = r
	}
	if !shared {
		rep = nil
	}
	x.classes[id] = rep
	return rep
}

// layout is a group's class key: per rank, its server's order of first
// appearance in the group and its local GPU index less the first rank's
// (modulo the server's GPUs). Ranks outside the fabric's GPUs get a key
// of their own (the expansion refuses them).
func (x *Store) layout(g []int32) string {
	return layoutKey(x.in.Topology, x.local, x.perServer, g)
}

// layoutKey is layout's key, given localIndexes' tables.
func layoutKey(t *stream.Topology, local, perServer []int32, g []int32) string {
	b := make([]byte, 0, 8*len(g))
	servers := map[int32]int32{}
	var l0 int32
	for q, r := range g {
		if r < 0 || int(r) >= t.GPUs {
			return "bad:" + strconv.Itoa(int(r))
		}
		s := t.Nodes[r].Server
		o, ok := servers[s]
		if !ok {
			o = int32(len(servers))
			servers[s] = o
		}
		l := local[r]
		if q == 0 {
			l0 = l
		}
		n := max(perServer[r], 1)
		b = strconv.AppendInt(b, int64(o), 36)
		b = append(b, '.')
		b = strconv.AppendInt(b, int64(((l-l0)%n+n)%n), 36)
		b = append(b, ',')
	}
	return string(b)
}

// localIndexes is each GPU's index among its server's GPUs (in GPU
// order) and its server's GPU count.
func localIndexes(t *stream.Topology) (local, perServer []int32) {
	local, perServer = make([]int32, t.GPUs), make([]int32, t.GPUs)
	count := map[int32]int32{}
	for r := 0; r < t.GPUs; r++ {
		s := t.Nodes[r].Server
		local[r] = count[s]
		count[s]++
	}
	for r := 0; r < t.GPUs; r++ {
		perServer[r] = count[t.Nodes[r].Server]
	}
	return local, perServer
}

// attach takes in flow sf of a member group of set s (its representative
// is group rep): the representative's flow of the same index carries it.
func (x *Store) attach(s int32, rep int32, o collective.Origin, sf *stream.Flow) error {
	set := &x.sets[s]
	id := set.bases[rep] + (sf.ID - o.Base)
	if set.bases[rep] < 0 || id < 0 || id >= int64(len(set.slots)) || set.slots[id] == 0 {
		return fmt.Errorf("flow %d of group %d has no flow of its representative group %d in flight to move in lockstep with (an internal error: run without --approx-lockstep)", sf.ID, o.Group, rep)
	}
	slot := set.slots[id] - 1
	d := &x.flows[slot]
	kind := flowKind(sf)
	if kind != d.Kind || (kind == flowset.Transfer && (sf.Size != d.Size || des.Time(sf.DelayPs) != d.Lat)) {
		return fmt.Errorf("flow %d of group %d differs from flow %d of its representative group %d (size, kind or step latency): the groups' layouts are not alike (an internal error: run without --approx-lockstep)", sf.ID, o.Group, id, rep)
	}
	x.total++
	x.lockMembers++
	if kind != flowset.Transfer {
		return nil
	}
	if set.imaged && !set.isImage(o.Group, d, sf) {
		set.imaged = false
	}
	m := x.member(set, sf)
	x.members[slot] = append(x.members[slot], m)
	x.bytes += sf.Size
	return nil
}

// Member images. A member group's flow is, index for index, its
// representative's with each rank replaced by the rank at the same
// position in the member group (same channel, same size), as far as the
// flows made at Start show (every group's first row of every channel,
// and all its flows outside rows). While that holds (set.imaged), a
// representative's later rows are not made again for its members:
// followRows attaches to each flow the representative's row made its
// members' images, and counts their flows as attach would. Making those
// rows was about a quarter of an 8192-GPU lockstep run's CPU. Any flow
// that is not an image turns it off (every row is then made, as before).

// startImages readies set's member images for groups (set.rep made).
func (x *Store) startImages(set *expSet, groups [][]int32) {
	set.imaged = !x.noFollow
	if !set.imaged {
		return
	}
	if len(set.lpos) != x.in.Topology.GPUs {
		set.lpos = make([]int32, x.in.Topology.GPUs)
	}
	clear(set.lpos)
	set.lgroups = groups
	for len(set.lmembs) < len(groups) {
		set.lmembs = append(set.lmembs, nil)
	}
	for g := range groups {
		set.lmembs[g] = set.lmembs[g][:0]
	}
	for g, r := range set.rep {
		if int(r) == g {
			for p, rank := range groups[g] {
				if rank >= 0 && int(rank) < len(set.lpos) {
					set.lpos[rank] = int32(p + 1)
				}
			}
		} else {
			set.lmembs[r] = append(set.lmembs[r], int32(g))
		}
	}
}

// image is rank r of a representative group as member group m's rank at
// the same position, false if r is none of the representatives' ranks.
func (set *expSet) image(m int32, r int32) (int32, bool) {
	if r < 0 || int(r) >= len(set.lpos) || set.lpos[r] == 0 {
		return 0, false
	}
	g := set.lgroups[m]
	p := set.lpos[r] - 1
	if int(p) >= len(g) {
		return 0, false
	}
	return g[p], true
}

// isImage reports whether member group m's flow sf is representative
// flow d's image.
func (set *expSet) isImage(m int32, d *dynFlow, sf *stream.Flow) bool {
	src, ok1 := set.image(m, d.Src)
	dst, ok2 := set.image(m, d.Dst)
	return ok1 && ok2 && src == sf.Src && dst == sf.Dst && sf.Channel == d.Channel
}

// followImages attaches to the flows in rowMade (a representative's
// rows of channel gen, just made) their members' images, as attach would
// have.
func (x *Store) followImages(s int32, gen int) error {
	set := &x.sets[s]
	t := x.in.Topology
	rep := int32(set.p.GenGroup(gen))
	x.imaged++
	for _, slot := range x.rowMade {
		d := &x.flows[slot]
		if d.hidden {
			continue
		}
		membs := set.lmembs[rep]
		n := int64(len(membs))
		x.total += n
		x.lockMembers += n
		if d.Kind != flowset.Transfer || n == 0 {
			continue
		}
		for _, m := range membs {
			src, ok1 := set.image(m, d.Src)
			dst, ok2 := set.image(m, d.Dst)
			if !ok1 || !ok2 || set.bases[m] < 0 {
				return fmt.Errorf("flow %d of group %d has no image in group %d (an internal error: run without --approx-lockstep)", d.ID, rep, m)
			}
			if x.multiNIC {
				// Ports are numbered in order of first use: make them now.
				mb := Member{Src: src, Dst: dst, ID: set.idBase + set.bases[m] + d.ID - set.idBase - set.bases[rep], Channel: d.Channel}
				if gpus := int32(t.GPUs); src < gpus && dst < gpus && t.Nodes[src].Server != t.Nodes[dst].Server {
					mb.Port = set.port(src, dst, d.Channel)
				}
				x.members[slot] = append(x.members[slot], mb)
			}
		}
		// Without ports to number, Members makes them when asked.
		d.imagedM = !x.multiNIC
		x.bytes += n * d.Size
	}
	return nil
}

// followRows makes, after representative channel gen emitted rows, the
// same rows of its members' matching channels.
func (x *Store) followRows(s int32, gen int) error {
	set := &x.sets[s]
	if set.imaged {
		return x.followImages(s, gen)
	}
	p := set.p
	g := p.GenGroup(gen)
	first, _ := p.GroupGens(g)
	want := p.Rows(gen)
	for m, r := range set.rep {
		if int(r) != g || m == g {
			continue
		}
		mf, n := p.GroupGens(m)
		mg := mf + gen - first
		if gen-first >= n {
			return fmt.Errorf("group %d has fewer channels than its representative group %d (an internal error: run without --approx-lockstep)", m, g)
		}
		if err := rowsUpTo(p, mg, want); err != nil {
			return err
		}
	}
	return nil
}
