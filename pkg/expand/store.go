// Package expand runs a collective-granularity stream's COLL nodes as
// their flows: when a COLL node is released, its collective is cut into
// the flows flow granularity would have held, on its group and every
// sibling group (collective.Expander), and a backend runs those like any
// other; the node completes with the last of them. A ring or NVLS
// channel's flows are made a row at a time, the next row when the first
// flow of the row before it starts (every dep of a row is in the row
// before it), and a flow's slot is freed when it completes, so memory
// follows the flows in flight, not the workload. A COLL node whose
// sibling groups would run exactly as its first (symmetry.go) may make the
// first group's flows only.
//
// Expanded flows are indexed after the stream's: flow i >= Base() is slot
// i - Base(). They write no trace rows; their COLL node's row spans them.
package expand

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"unsafe"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/internal/prefetch"
	"github.com/fabricsim/fabricsim/pkg/collective"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/topo"
	"github.com/fabricsim/fabricsim/pkg/units"
)

// Early says when a flow's dependant may start, before the flow completes.
type Early uint8

const (
	AtCompletion Early = iota
	// OnSent: once the flow's last byte has left its source (the next
	// chunk on a connection, posted back to back as NCCL does).
	OnSent
	// OnReceived: once the flow's last byte has landed (a receiver
	// forwarding what just arrived).
	OnReceived
)

// Rule is a backend's: when flow d, which waits on dep, may start.
type Rule func(dep, d *flowset.Flow) Early

// Store holds the expanded flows in flight.
type Store struct {
	x     *collective.Expander
	rule  Rule
	in    *flowset.Set
	base  int32
	flows []dynFlow
	// waiting is, per slot, the flow's deps not complete yet (-1 once
	// done): apart from the flows, because completing a flow counts down
	// its dependants', and 16 counters share a cache line where one
	// dynFlow takes two.
	waiting []int32
	free    []int32
	sets    []expSet
	free2   []int32 // free sets
	groups  map[int64][][]int32
	ready   []int32 // scratch: made ready by the flows being made
	// The run of equal dep lists being made (shared).
	runSet  int32
	runDeps []int64
	runJoin int32

	inFlight, peak, total int64
	mirrored, mirroredB   int64 // flows (and their bytes) stood for by a first group's (sym)
	sym                   *Symmetry
	multiNIC              bool  // some GPU has several NIC ports (see made)
	bytes                 int64 // the transfers' made so far
	limit, slotCap        int64 // the memory budget; slots' capacity in all sets
	maxIndex              int64 // bound on flow indexes (LimitIndex)
	// Lockstep (lockstep.go), an approximation: per slot, the member
	// flows moving with it; per group id, its classes.
	lockstep               bool
	members                [][]Member
	classes                map[int64][]int32
	local, perServer       []int32
	lockNodes, lockClasses int64
	lockMembers            int64
	lockMax                int
	// following is set while Started makes a representative's rows;
	// rowMade is the slots made meanwhile (lockstep.go: followRows).
	following bool
	rowMade   []int32
	noFollow  bool // make members' rows (MakeMemberRows)
	memBuf    []Member
	imaged    int64 // rows whose members were images (followImages)
	// Channel merging (chanmerge.go): exact, checked by the backend.
	chanMerge   bool
	chanCache   map[string][]int32
	chanSkip    map[string]bool // shapes left unmerged (SkipChannelMerge)
	pos         []int32         // scratch: a GPU's position in a group + 1
	chanMembers int64
	depBuf      []int64
	// Reuse (reuse.go): kept times, by reuseKey.
	clock                    func() des.Time
	reuse                    map[string]reuseRec
	replayed                 map[int64]bool
	reusedNodes, reusedFlows int64
	// Approximate reuse (approxreuse.go): kept times by approxKey, a
	// group id's placement.
	areuse                     map[string]reuseRec
	aplace                     map[int64]string
	arun                       map[string][]apending // by key: a node runs, these wait for its time
	awaits                     bool                  // the last node expanded waits (Waits)
	areusedNodes, areusedFlows int64
	// Rails as symmetry (railsym.go): per group id, the groups to run.
	arails               map[int64]railPlan
	railNodes, railFlows int64
	// Pod rotation (podrot.go): per group id, whether the first group runs.
	arot               *PodRotation
	rotPlans           map[int64]bool
	rotNodes, rotFlows int64
	// Idle reuse (approxidle.go): per GPU the stream transfers in flight
	// and the last one's start; per group id the GPUs checked.
	fbusy []int32
	flast []des.Time
	igpus map[int64][]int32
	// idleSets are the sets watched (idleState); materialized counts the
	// nodes a transfer met.
	idleSets                 []int32
	flastBy                  []int32 // per GPU: the set whose start flast is, -1 a stream transfer's
	metReady                 []int32 // flows of reused nodes a node's start met (TakeMet)
	idleReused, materialized int64
	awaited                  int64 // nodes that waited for a running one's time
	// Mark, when set, sees each dependant Release frees (flow index),
	// before it may be made ready: the backends' flowset.Pacer.
	Mark func(j int32)
}

type dynFlow struct {
	flowset.Flow
	set      int32 // its expansion
	gen, row int32 // its ring or NVLS channel (-1: none) and row there
	// Dependants, with when each may start (the Rule's Early, decided
	// when it was made). The first of each kind is in first (slot + 1, 0
	// for none), any other in succ as slot<<2 | kind (-1 once released
	// early). Keeping the usual ones (the next ring step, the next chunk
	// on a connection) in the flow itself spares a walk of succ at each
	// completion and early release (at 1024 GPUs the early releases'
	// walks missed the cache).
	first  [3]int32 // by Early
	more   [3]bool  // succ holds dependants of that kind
	hidden bool     // a join of shared deps (shared), no flow of the stream's
	inRep  bool     // of the group whose time reuse.go keeps
	// imagedM: its members are its member groups' images, made when
	// asked (lockstep.go: Members).
	imagedM bool
	succ    []int32
}

// expSet is one COLL node's expansion.
type expSet struct {
	coll int32 // the COLL node's flow index
	left int32 // flows made and not complete
	p    *collective.Expansion
	// idBase is added to expansion ids: the id flow granularity gives the
	// collective's first flow (cut.first_flow), so ECMP hashes expanded
	// flows onto its flows' paths; in streams without it, the COLL node's
	// id << 32 (distinct hashes per node).
	idBase int64
	ports  map[uint64]uint8 // by portKey
	next   map[int32]uint8
	// slots maps a flow's id in the expansion to its slot + 1 while it
	// is made and unfinished, 0 otherwise: a dep at 0 has finished. An
	// array, not a map: a 1024-GPU iteration looks up a billion deps.
	slots []int32
	emit  func(collective.Origin, *stream.Flow) error
	// copies: sibling groups the first one stands for (Symmetry), whose
	// flows all stay in server.
	copies int32
	server int32
	// fabric: the first group stands for siblings across servers
	// (fabricsym.go); its flows all go between pairs of its ranks that
	// were checked: pos0 is a GPU's position in it + 1 (0: none), pairs
	// the pairs of positions (PairsOf).
	fabric bool
	pos0   []int32
	grp    []int32 // a GPU's group among those run
	pairs  []bool
	m      int32 // group 0's size
	repAt  int32 // the position, among the groups run, of the one with copies
	// Lockstep: per group, the group it moves with (itself for a
	// representative; nil: none) and its first flow's id.
	rep   []int32
	bases []int64
	// Lockstep's member images (lockstep.go): the groups, a GPU's
	// position in its representative group + 1, the members of each
	// representative, and whether every member flow made so far was its
	// representative's image (then later rows are not made: image).
	lgroups [][]int32
	lpos    []int32
	lmembs  [][]int32
	imaged  bool
	group   int64 // the COLL node's group id
	chans   chanState
	reuse   reuseState
	areuse  reuseState // approxreuse.go: the whole node's
	rcopies int32      // railsym.go: per flow made, those it stands for on other rails
	rot     bool       // podrot.go: the first group stands for its images (rcopies of them)
	idle    idleState  // approxidle.go: a reused node a transfer may yet meet
	occ     []int32    // approxidle.go: the GPUs it occupies as a node a transfer may overlap
}

// checked reports whether a flow from src to dst is within what
// fabricsym.go checked for the set's first group: a delay at one of its
// ranks, or a pair of them it may send between.
func (set *expSet) checked(src, dst int32) bool {
	gpus := int32(len(set.pos0))
	if src < 0 || src >= gpus || dst < 0 || dst >= gpus || set.pos0[src] == 0 || set.pos0[dst] == 0 {
		return false
	}
	i, j := set.pos0[src]-1, set.pos0[dst]-1
	return set.grp[src] == set.grp[dst] && (i == j || set.pairs[i*set.m+j])
}

// port is connection (src, dst, ch)'s index among src's connections to
// other servers, numbered in order of first use as flowset numbers them
// at flow granularity.
func (set *expSet) port(src, dst, ch int32) uint8 {
	k := portKey(src, dst, ch)
	p, ok := set.ports[k]
	if !ok {
		p = set.next[src]
		set.next[src]++
		set.ports[k] = p
	}
	return p
}

// member is a transfer of the expansion that rides on another's flow:
// its ends, id and (multi-NIC GPUs, across servers) NIC port.
func (x *Store) member(set *expSet, sf *stream.Flow) Member {
	m := Member{Src: sf.Src, Dst: sf.Dst, ID: set.idBase + sf.ID, Channel: sf.Channel}
	t := x.in.Topology
	if gpus := int32(t.GPUs); x.multiNIC && sf.Src < gpus && sf.Dst < gpus && t.Nodes[sf.Src].Server != t.Nodes[sf.Dst].Server {
		m.Port = set.port(sf.Src, sf.Dst, sf.Channel)
	}
	return m
}

// portKey packs a connection (source, destination, channel) into a map
// key: Go's maps hash a uint64 key faster than a struct one. GPUs stay
// under 2^21, channels under 2^22 (maxExpandChannels is 1024).
func portKey(src, dst, ch int32) uint64 {
	return uint64(uint32(src))<<43 | uint64(uint32(dst))<<22 | uint64(uint32(ch))&(1<<22-1)
}

// New returns a Store for in's COLL nodes. limit is the memory the held
// flows may take (0: no limit); rule decides early releases.
func New(in *flowset.Set, limit int64, rule Rule) *Store {
	x := collective.NewExpander(in.Topology)
	x.Job(slices.Collect(maps.Values(in.Groups)))
	return &Store{x: x, in: in, base: int32(in.DAG.Len()), limit: limit, chanCache: map[string][]int32{},
		rule: rule, groups: map[int64][][]int32{}, classes: map[int64][]int32{}, runSet: -1, maxIndex: math.MaxInt32, multiNIC: multiNIC(in.Topology)}
}

// multiNIC reports whether some GPU has several NIC links (a dual-homed
// NIC), whose ports its connections take in turn.
func multiNIC(t *topo.Topology) bool {
	nics := make([]uint8, t.GPUs)
	for _, l := range t.Links {
		if l.Kind != stream.LinkNIC {
			continue
		}
		for _, v := range [2]int32{l.A, l.B} {
			if v >= 0 && int(v) < t.GPUs {
				if nics[v]++; nics[v] > 1 {
					return true
				}
			}
		}
	}
	return false
}

// LimitIndex keeps expanded flow indexes below n: a backend that packs
// more than the index into an int32 refuses, with an error, the flows
// past it.
func (x *Store) LimitIndex(n int64) { x.maxIndex = min(n, math.MaxInt32) }

// Base is the index of slot 0: the stream's flow count.
func (x *Store) Base() int32 { return x.base }

// Slots is the number of slots so far: expanded flow indexes are below
// Base() + Slots().
func (x *Store) Slots() int { return len(x.flows) }

// UseSymmetry makes the COLL nodes s marks expand their first group only,
// which stands for its siblings (see FindSymmetry). Only a model in which
// flows on disjoint links do not interact may use it.
func (x *Store) UseSymmetry(s *Symmetry) { x.sym = s }

// Mirrored is the part of Made and Bytes that groups standing for their
// siblings counted on the siblings' behalf, without making those flows.
func (x *Store) Mirrored() (flows, bytes int64) { return x.mirrored, x.mirroredB }

// Made is the number of flows expanded so far (hidden joins not counted,
// Mirrored counted); Peak the most held at once (hidden joins counted);
// Bytes what the transfers among them carry.
func (x *Store) Made() int64  { return x.total }
func (x *Store) Bytes() int64 { return x.bytes }
func (x *Store) Peak() int64  { return x.peak }

func (x *Store) flow(i int32) *dynFlow { return &x.flows[i-x.base] }

// Flow is expanded flow i. Its ID is its id in the expansion plus the id
// flow granularity gives the collective's first flow (the collective's
// cut.first_flow; in streams without it, the COLL node's id << 32): the id
// the flow has at flow granularity, which ECMP hashes.
func (x *Store) Flow(i int32) *flowset.Flow { return &x.flows[i-x.base].Flow }

// Index is expanded flow i's id in its expansion (from 0).
func (x *Store) Index(i int32) int64 {
	d := x.flow(i)
	return d.ID - x.sets[d.set].idBase
}

// Prefetch starts loading what completing or starting expanded flow i
// reads first (its record and its dep counter), for a backend reading
// ahead of its next event.
func (x *Store) Prefetch(i int32) {
	if slot := i - x.base; slot >= 0 && int(slot) < len(x.flows) {
		prefetch.Line(unsafe.Pointer(&x.flows[slot]))
		prefetch.Line(unsafe.Pointer(&x.waiting[slot]))
	}
}

// Coll is the COLL node expanded flow i belongs to.
func (x *Store) Coll(i int32) int32 { return x.sets[x.flow(i).set].coll }

// Error names expanded flow i in an error, located at its COLL node's
// record.
func (x *Store) Error(i int32, err error) error {
	d := x.flow(i)
	coll := x.sets[d.set].coll
	return x.in.FlowError(coll, "collective", fmt.Errorf("expanded flow %d of COLL node %d: %v", x.Index(i), x.in.DAG.ID(coll), err))
}

// groupsOf is groupRanks, kept per group.
func (x *Store) groupsOf(id int64) ([][]int32, error) {
	if g, ok := x.groups[id]; ok {
		return g, nil
	}
	g, err := groupRanks(x.in, id)
	if err == nil {
		x.groups[id] = g
	}
	return g, err
}

// groupRanks is a group's ranks, then its siblings'.
func groupRanks(in *flowset.Set, id int64) ([][]int32, error) {
	g := in.Groups[id]
	if g == nil {
		return nil, fmt.Errorf("no group %d", id)
	}
	out := [][]int32{g.Ranks}
	for _, s := range g.Siblings {
		out = append(out, in.Groups[s].Ranks) // the reader checked they exist
	}
	return out, nil
}

// Expand starts COLL node i's expansion and returns the flows ready now
// (a scratch slice, valid until the next call); none when the collective
// moves nothing, which the caller completes at once.
func (x *Store) Expand(i int32) ([]int32, error) {
	f := x.in.Flow(i)
	rec := x.in.Collectives[f.Coll] // the reader checked every COLL has one
	groups, err := x.groupsOf(rec.Group)
	if err != nil {
		return nil, x.in.FlowError(i, "collective", fmt.Errorf("COLL node %d: %v", x.in.DAG.ID(i), err))
	}
	var s int32
	if n := len(x.free2); n > 0 {
		s, x.free2 = x.free2[n-1], x.free2[:n-1]
	} else {
		s = int32(len(x.sets))
		x.sets = append(x.sets, expSet{ports: map[uint64]uint8{}, next: map[int32]uint8{}})
		x.sets[s].emit = func(o collective.Origin, sf *stream.Flow) error { return x.made(s, o, sf) }
	}
	set := &x.sets[s]
	set.coll, set.left, set.idBase, set.group = i, 0, x.in.DAG.ID(i)<<32, rec.Group
	if rec.Cut != nil && rec.Cut.FirstFlow != nil {
		set.idBase = *rec.Cut.FirstFlow
	}
	set.copies, set.rep, set.fabric, set.repAt, set.rot = 0, nil, false, 0, false
	// Approximate reuse (approxreuse.go): a node takes the time of the
	// first one of its shape placed alike, or keeps its own.
	set.areuse = reuseState{}
	var akept reuseRec
	adrop, apend := false, ""
	x.awaits = false
	// Not a node whose groups on GPUs another node may overlap run for
	// themselves (symmetry's runs): it loads the links that node shares.
	run, runRep := x.sym.Run(i)
	set.idle = idleState{}
	var igpus []int32 // approxidle.go: a node a transfer may overlap, idle
	set.occ = nil
	if x.areuse != nil && run != nil && x.fbusy != nil {
		g := x.idleGPUs(rec.Group, groups, run, relaysOf(rec.PXN, rec.Algorithm, spans(x.in.Topology, groups)))
		if x.idle(g) {
			igpus = g
		}
		// It may overlap another such node there: it meets those reused.
		if err := x.occupy(s, g); err != nil {
			return nil, err
		}
		set = &x.sets[s]
	}
	if x.areuse != nil && (run == nil || igpus != nil) {
		key := x.approxKey(i, groups, x.chanMerge && mergeable(rec) && (x.chanSkip == nil || !x.chanSkip[shapeKey(rec)]))
		if igpus != nil {
			key += "#idle"
		}
		akept, adrop = x.areuse[key]
		_, running := x.arun[key]
		switch {
		case adrop:
		case running: // a node placed alike is running: take its time when it ends
			adrop, apend, x.awaits = true, key, true
		default:
			set.areuse.key, set.areuse.at, set.areuse.gpus = key, x.clock(), igpus
			x.arun[key] = nil
		}
		if adrop {
			groups = nil
		}
	}
	if x.sym.Alone(i) && !adrop {
		set.copies, set.server = int32(len(groups)-1), x.in.Topology.Nodes[groups[0][0]].Server
		if set.fabric = x.sym.Fabric(i); set.fabric {
			if set.pos0 == nil {
				set.pos0, set.grp = make([]int32, x.in.Topology.GPUs), make([]int32, x.in.Topology.GPUs)
			}
			sub := groups[:1]
			set.repAt = 0
			if run, rep := x.sym.Run(i); run != nil {
				set.repAt = rep
				sub = make([][]int32, len(run))
				for k, g := range run {
					sub[k] = groups[g]
				}
				set.copies = int32(len(groups) - len(run))
			}
			groups = sub
			clear(set.pos0)
			for gi, g := range groups {
				for p, r := range g {
					set.pos0[r] = int32(p + 1)
					set.grp[r] = int32(gi)
				}
			}
			set.pairs, set.m = PairsOf(x.in.Topology, groups[0], pxnAlgo(rec)), int32(len(groups[0]))
		}
		if run, _ := x.sym.Run(i); run == nil {
			groups = groups[:1]
		}
	} else if x.lockstep && len(groups) > 1 {
		if set.rep = x.classesOf(rec.Group, groups); set.rep != nil {
			set.bases = set.bases[:0]
			for range groups {
				set.bases = append(set.bases, -1)
			}
			x.lockNodes++
			for g, r := range set.rep {
				if int(r) == g {
					x.lockClasses++
				}
			}
			x.startImages(set, groups)
		}
	}
	set.rcopies = 0
	if x.arails != nil && !adrop && !x.sym.Alone(i) && set.rep == nil {
		if p := x.railRun(rec.Group, groups, rec.Algorithm); p.run != nil {
			sub := make([][]int32, len(p.run))
			for k, g := range p.run {
				sub[k] = groups[g]
			}
			groups, set.rcopies = sub, p.copies
			x.railNodes++
		}
	}
	if x.arot != nil && !adrop && !x.sym.Alone(i) && set.rep == nil && set.rcopies == 0 && len(groups) > 1 && x.rotRun(rec.Group, groups, rec.Algorithm) {
		groups, set.rcopies, set.rot = groups[:1], int32(len(groups)-1), true
		x.rotNodes++
	}
	merge := x.chanMerge && set.rep == nil && mergeable(rec) && (x.chanSkip == nil || !x.chanSkip[shapeKey(rec)])
	// Reuse (reuse.go): the standing group's kept time, or keep it.
	set.reuse = reuseState{}
	var kept reuseRec
	drop := false
	if x.reuse != nil && x.sym.Alone(i) && !adrop {
		gid := rec.Group
		if run, rep := x.sym.Run(i); run != nil {
			gid = x.groupID(rec.Group, int(run[rep]))
		}
		key := x.reuseKey(i, gid, merge)
		if kept, drop = x.reuse[key]; drop {
			groups = slices.Delete(slices.Clone(groups), int(set.repAt), int(set.repAt)+1)
			set.repAt = -1
		} else {
			set.reuse.key, set.reuse.at = key, x.clock()
		}
	}
	set.chans.on = false
	if merge {
		c := &set.chans
		c.cls, c.gfirst, c.gstart = c.cls[:0], c.gfirst[:0], c.gstart[:0]
		for _, g := range groups {
			cls, err := x.chanClasses(rec, g)
			if err != nil {
				return nil, x.in.FlowError(i, "collective", fmt.Errorf("COLL node %d: %v", x.in.DAG.ID(i), err))
			}
			c.cls, c.gfirst = append(c.cls, cls), append(c.gfirst, -1)
			c.on = c.on || cls != nil
		}
	}
	clear(set.ports)
	clear(set.next)
	x.ready = x.ready[:0]
	x.runSet = -1
	if drop {
		if err := x.reuseDelay(s, kept, int64(set.copies)); err != nil {
			return nil, x.in.FlowError(i, "collective", fmt.Errorf("COLL node %d: %v", x.in.DAG.ID(i), err))
		}
	}
	if adrop {
		if err := x.approxDelay(s, akept, apend); err != nil {
			return nil, x.in.FlowError(i, "collective", fmt.Errorf("COLL node %d: %v", x.in.DAG.ID(i), err))
		}
		if igpus != nil {
			x.idleReused++
			if apend == "" {
				x.watchIdle(s, igpus, akept.span, run, runRep)
			}
		}
	}
	var p *collective.Expansion
	if len(groups) > 0 {
		if p, err = x.x.Start(rec, groups, set.emit); err != nil {
			return nil, x.in.FlowError(i, "collective", fmt.Errorf("COLL node %d: %v", x.in.DAG.ID(i), err))
		}
	}
	x.sets[s].p = p
	if x.sets[s].left == 0 {
		x.idleEnded(s)
		x.free2 = append(x.free2, s)
		if k := x.sets[s].areuse.key; k != "" { // moves nothing: nothing to time
			delete(x.arun, k)
			x.sets[s].areuse.key = ""
		}
	}
	return x.ready, nil
}

// made takes in flow sf of set s's expansion: a slot, its deps that have
// not finished, its NIC port; ready ones go to x.ready.
func (x *Store) made(s int32, o collective.Origin, sf *stream.Flow) error {
	if u := &x.sets[s].areuse; u.key != "" {
		// A standing group's flow stands for its copies' too (Made counts them).
		if set := &x.sets[s]; o.Group == set.repAt && (set.fabric || set.copies > 0) {
			u.rec.made += int64(set.copies)
		}
		rc := 1 + int64(x.sets[s].rcopies)
		u.rec.made += rc
		if flowKind(sf) == flowset.Transfer {
			u.rec.bytes += rc * sf.Size
		}
	}
	if set := &x.sets[s]; set.rep != nil {
		set.bases[o.Group] = o.Base
		if r := set.rep[o.Group]; r != o.Group {
			return x.attach(s, r, o, sf)
		}
	} else if set.chans.on {
		set.chans.seen(o.Group, o.Gen, sf.ID)
		if r := set.chans.chanRep(o.Group, o.Gen); r != o.Gen {
			return x.attachChan(s, r, o, sf)
		}
	}
	slot, err := x.alloc()
	if err != nil {
		return err
	}
	set := &x.sets[s]
	t := x.in.Topology
	if set.fabric {
		if !set.checked(sf.Src, sf.Dst) {
			return fmt.Errorf("flow %d from %d to %d is not between ranks of the group standing for its siblings that symmetry checked (an internal error: --no-symmetry expands every group)", sf.ID, sf.Src, sf.Dst)
		}
	} else if set.copies > 0 {
		if t.Nodes[sf.Src].Server != set.server || t.Nodes[sf.Dst].Server != set.server {
			return fmt.Errorf("flow %d leaves the server of the group standing for its siblings (an internal error: --no-symmetry expands every group)", sf.ID)
		}
	}
	gpus := int32(t.GPUs)
	d := &x.flows[slot]
	d.Flow = flowset.Flow{ID: set.idBase + sf.ID, Coll: x.in.Flow(set.coll).Coll, Size: sf.Size, Lat: des.Time(sf.DelayPs),
		Src: sf.Src, Dst: sf.Dst, Chunk: sf.Chunk, Channel: sf.Channel, Kind: flowset.Transfer, PaceNs: flowset.PaceNsOf(sf.PacePs)}
	d.Kind = flowKind(sf)
	switch {
	case d.Kind == flowset.Delay:
		d.Size, d.Lat = sf.DelayPs, 0
	case d.Kind == flowset.Join:
	case x.multiNIC && sf.Src < gpus && sf.Dst < gpus && t.Nodes[sf.Src].Server != t.Nodes[sf.Dst].Server:
		// The connection's index among its source's connections to
		// other servers, as flowset numbers them at flow granularity.
		// Only a GPU with several NIC ports uses it: numbering the
		// connections of one-port GPUs cost about 6% of an 8192-GPU
		// Spectrum-X iteration in map lookups.
		d.Port = set.port(sf.Src, sf.Dst, sf.Channel)
	}
	if sc := set.idle.scale; sc > 0 {
		cutToShare(&d.Flow, sc)
	}
	x.waiting[slot] = 0
	d.set, d.gen, d.row, d.succ, d.first, d.more, d.hidden, d.imagedM = s, o.Gen, o.Row, d.succ[:0], [3]int32{}, [3]bool{}, false, false
	if d.inRep = set.reuse.key != "" && o.Group == set.repAt; d.inRep {
		set.reuse.left++
		set.reuse.rec.made++
		if d.Kind == flowset.Transfer {
			set.reuse.rec.bytes += d.Size
		}
	}
	deps := sf.Deps
	if set.chans.on && len(deps) > 0 {
		// A dep on a merged channel's flow is one on the flow carrying it.
		x.depBuf = x.depBuf[:0]
		for _, dep := range deps {
			x.depBuf = append(x.depBuf, set.chans.mapDep(o.Group, dep))
		}
		deps = x.depBuf
	}
	if j := x.shared(s, slot, deps); j >= 0 {
		x.link(j, slot, AtCompletion)
		deps = deps[len(deps)-1:]
	}
	d = &x.flows[slot] // shared may have moved the flows
	// The rule reads the deps: start loading them all before the first.
	for _, dep := range deps {
		if p := set.slots[dep] - 1; p >= 0 {
			prefetch.Line(unsafe.Pointer(&x.flows[p]))
		}
	}
	for _, dep := range deps {
		if p := set.slots[dep] - 1; p >= 0 {
			x.link(p, slot, x.rule(&x.flows[p].Flow, &d.Flow))
		}
	}
	if n := int64(len(set.slots)); n <= sf.ID {
		if c := int64(cap(set.slots)); c <= sf.ID {
			if err := x.fits(max(sf.ID+1, 2*c) - c); err != nil {
				return err
			}
		}
		c0 := int64(cap(set.slots))
		set.slots = append(set.slots, make([]int32, sf.ID+1-n)...)
		x.slotCap += int64(cap(set.slots)) - c0
	}
	set.slots[sf.ID] = slot + 1
	if x.waiting[slot] == 0 && o.Gen >= 0 && o.Row > 0 {
		// Its row came too late: it would start now, not when its deps
		// finished. No cut makes such a row; refuse rather than mistime.
		return fmt.Errorf("flow %d of channel row %d was made after its deps finished", sf.ID, o.Row)
	}
	if x.waiting[slot] == 0 {
		x.ready = append(x.ready, slot+x.base)
	}
	if x.following {
		x.rowMade = append(x.rowMade, slot)
	}
	set.left++
	copies := int64(set.copies)
	if o.Group != set.repAt {
		copies = 0 // a group run for itself (fabricsym.go)
	}
	x.inFlight++
	x.peak = max(x.peak, x.inFlight)
	if set.idle.scale > 0 {
		return nil // the node's delay counted what it stands for
	}
	rc := int64(set.rcopies)
	x.total += 1 + copies + rc
	x.mirrored += copies
	if set.rot {
		x.rotFlows += rc
	} else {
		x.railFlows += rc
	}
	if d.Kind == flowset.Transfer {
		x.bytes += (1 + copies + rc) * d.Size
		x.mirroredB += copies * d.Size
	}
	return nil
}

// link makes the flow in slot d wait for the one in slot p, released
// when says.
func (x *Store) link(p, d int32, when Early) {
	q := &x.flows[p]
	x.waiting[d]++
	if q.first[when] == 0 {
		q.first[when] = d + 1
	} else {
		q.succ, q.more[when] = append(q.succ, d<<2|int32(when)), true
	}
}

// minShared is the dep list length from which flows made one after the
// other with the same deps but their last wait on a hidden join instead.
const minShared = 5

// shared returns the hidden join the flow in slot d (set s) should wait
// on instead of all its deps but the last, or -1. An NVLS chunk's n
// reductions each wait for all n uploads (and the previous chunk's
// reduction on their connection, the last dep), and its n downloads for
// all n multicasts: 2n^2 edges a chunk, which at 1024 GPUs were most of
// the work of expanding. The first flow of a run of such dep lists keeps
// its own edges; from the second on, they share a join of the common
// deps (n + 2n edges). A join ends the instant its last dep does, and
// releases its dependants in that same instant, so no time changes. A
// flow with a dep it would start early from (the Rule) keeps its own
// edges: the join would hold it to that dep's completion.
func (x *Store) shared(s, d int32, deps []int64) int32 {
	if len(deps) < minShared {
		return -1
	}
	set, f := &x.sets[s], &x.flows[d]
	deps = deps[:len(deps)-1]
	if s != x.runSet || !slices.Equal(deps, x.runDeps) {
		x.runSet, x.runDeps, x.runJoin = s, append(x.runDeps[:0], deps...), -1
		return -1
	}
	for _, dep := range deps {
		if p := set.slots[dep] - 1; p >= 0 && x.rule(&x.flows[p].Flow, &f.Flow) != AtCompletion {
			return -1
		}
	}
	if x.runJoin < 0 {
		live := 0
		for _, dep := range deps {
			if set.slots[dep] > 0 {
				live++
			}
		}
		if live == 0 {
			return -1 // nothing to wait for: the flow's own check decides
		}
		j, err := x.alloc()
		if err != nil {
			return -1 // the flow keeps its own edges
		}
		f = &x.flows[d] // alloc may have moved the flows
		jf := &x.flows[j]
		jf.Flow = flowset.Flow{ID: set.idBase - 1, Coll: f.Coll, Src: f.Src, Dst: f.Src, Kind: flowset.Join}
		x.waiting[j] = 0
		jf.set, jf.gen, jf.row, jf.succ, jf.first, jf.more, jf.hidden, jf.imagedM = s, -1, f.row, jf.succ[:0], [3]int32{}, [3]bool{}, true, false
		if jf.inRep = f.inRep; jf.inRep {
			set.reuse.left++
		}
		for _, dep := range deps {
			if p := set.slots[dep] - 1; p >= 0 {
				x.link(p, j, AtCompletion)
			}
		}
		set.left++
		x.inFlight++
		x.runJoin = j
	}
	return x.runJoin
}

// Started makes, once expanded flow i starts, the next row of its ring
// channel if that is not made yet: the row's flows wait on this row's.
// It returns flows made ready (normally none) in a new slice.
func (x *Store) Started(i int32) ([]int32, error) {
	d := x.flow(i)
	if d.gen < 0 {
		return nil, nil
	}
	set := &x.sets[d.set]
	gen, row := int(d.gen), d.row
	// The caller may be walking x.ready (expand's result): what rows made
	// now make ready is appended past its end, copied out, and cut off.
	mark := len(x.ready)
	defer func() { x.ready = x.ready[:mark] }()
	x.runSet = -1
	x.following, x.rowMade = set.rep != nil && set.imaged, x.rowMade[:0]
	for set.p.Rows(gen) <= row+1 {
		more, err := set.p.Row(gen)
		if err != nil {
			x.following = false
			return nil, x.in.FlowError(set.coll, "collective", fmt.Errorf("COLL node %d: %v", x.in.DAG.ID(set.coll), err))
		}
		if !more {
			break
		}
	}
	x.following = false
	set = &x.sets[d.set]
	if set.chans.on {
		if err := x.followChans(d.set, gen); err != nil {
			return nil, x.in.FlowError(set.coll, "collective", fmt.Errorf("COLL node %d: %v", x.in.DAG.ID(set.coll), err))
		}
	}
	if set.rep != nil {
		if err := x.followRows(d.set, gen); err != nil {
			return nil, x.in.FlowError(set.coll, "collective", fmt.Errorf("COLL node %d: %v", x.in.DAG.ID(set.coll), err))
		}
	}
	if len(x.ready) == mark {
		return nil, nil
	}
	return append([]int32(nil), x.ready[mark:]...), nil
}

// maxExpanded bounds the expanded flows held at once: their slots are
// kept times four in int32 dependant lists.
const maxExpanded = 1 << 29

func (x *Store) alloc() (int32, error) {
	if n := len(x.free); n > 0 {
		s := x.free[n-1]
		x.free = x.free[:n-1]
		if n > 1 { // the next flow made takes that one: start loading it
			prefetch.Value(&x.flows[x.free[n-2]])
		}
		return s, nil
	}
	if limit := min(maxExpanded, x.maxIndex-int64(x.base)); int64(len(x.flows)) >= limit {
		return 0, fmt.Errorf("more than %d flows held at once", limit)
	}
	if err := x.fits(1); err != nil {
		return 0, err
	}
	x.flows = append(x.flows, dynFlow{})
	x.waiting = append(x.waiting, 0)
	if x.lockstep || x.chanMerge {
		x.members = append(x.members, nil)
	}
	return int32(len(x.flows) - 1), nil
}

// heldFlowBytes is what a held expanded flow costs: its record, its
// dependants (two or three) and a backend's state for it (the fluid
// model's share; the packet backend's run columns, 21 bytes, and its
// queue pairs while they send).
const heldFlowBytes = int64(unsafe.Sizeof(dynFlow{})) + 4 + 64

// fits refuses, before it is made, the table growth that would take the
// expansions past the run's memory budget (Options.MemoryLimit): the held
// flows, and 4 bytes per flow of every collective in flight (slots).
func (x *Store) fits(newSlots int64) error {
	if x.limit <= 0 {
		return nil
	}
	held := int64(len(x.flows)+1) * heldFlowBytes
	if need := held + 4*(x.slotCap+newSlots); need > x.limit {
		return fmt.Errorf("the expanded flows held at once (%d) would take about %s, beyond the %s this run may use (FABRICSIM_MEMORY, or 90%% of the available memory); decompose with a smaller --max-chunks (fewer, larger chunks), simulate fewer GPUs, or run flowsim-analytical without --expand (the collective-level model)",
			len(x.flows)+1, units.HumanSize(need), units.HumanSize(x.limit))
	}
	return nil
}

// Complete marks expanded flow i done, appends the flows it releases to
// out, frees its slot, and returns the COLL node whose expansion it
// ended (-1 if none).
func (x *Store) Complete(i int32, out []int32) ([]int32, int32) {
	slot := i - x.base
	d := &x.flows[slot]
	if x.waiting[slot] != 0 {
		panic(fmt.Sprintf("expand: flow %d completed twice or before its deps", d.ID))
	}
	x.waiting[slot] = -1
	set := &x.sets[d.set]
	if !d.hidden {
		set.slots[d.ID-set.idBase] = 0
	}
	if d.inRep {
		x.reuseDone(set)
	}
	for _, e := range d.first {
		if e > 0 {
			out = x.satisfy(e-1, out)
		}
	}
	if d.more != [3]bool{} {
		for _, e := range d.succ {
			if e < 0 {
				continue // released early
			}
			out = x.satisfy(e>>2, out)
		}
	}
	x.free = append(x.free, slot)
	if x.lockstep || x.chanMerge {
		x.members[slot] = x.members[slot][:0]
	}
	x.inFlight--
	if set.left--; set.left > 0 {
		return out, -1
	}
	x.free2 = append(x.free2, d.set)
	x.idleEnded(d.set)
	out = x.approxDone(d.set, out)
	set.p, set.slots = nil, set.slots[:0] // all 0 again: every flow finished
	return out, set.coll
}

// Release satisfies, before expanded flow i completes, its dependants
// the Rule let start when (OnSent or OnReceived; never AtCompletion), as
// DAG.ReleaseEarly does for the stream's flows, and appends those it
// makes ready to out.
func (x *Store) Release(i int32, when Early, out []int32) []int32 {
	d := &x.flows[i-x.base]
	if e := d.first[when]; e > 0 {
		if x.Mark != nil {
			x.Mark(e - 1 + x.base)
		}
		out = x.satisfy(e-1, out)
		d.first[when] = 0
	}
	if !d.more[when] {
		return out
	}
	d.more[when] = false
	for j, e := range d.succ {
		if e >= 0 && Early(e&3) == when {
			d.succ[j] = -1
			if x.Mark != nil {
				x.Mark(e>>2 + x.base)
			}
			out = x.satisfy(e>>2, out)
		}
	}
	return out
}

// satisfy counts one dep of the flow in slot s done; out gets it when it
// was the last.
func (x *Store) satisfy(s int32, out []int32) []int32 {
	w := &x.waiting[s]
	if *w--; *w == 0 {
		out = append(out, s+x.base)
		prefetch.Line(unsafe.Pointer(&x.flows[s])) // its start reads it
	}
	return out
}

// flowKind is what a stream flow expands to: a connection's transfer, a
// delay (a connection-less flow with a duration) or a join (one without).
func flowKind(sf *stream.Flow) uint8 {
	switch {
	case sf.ConnType == stream.ConnDelay && sf.DelayPs > 0:
		return flowset.Delay
	case sf.ConnType == stream.ConnDelay:
		return flowset.Join
	}
	return flowset.Transfer
}
