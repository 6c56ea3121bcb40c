package expand

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/flowset"
)

// Approximate reuse of nodes a pipeline transfer may overlap: an
// APPROXIMATION, opt-in with approximate reuse (flowsim-analytical
// --approx-reuse-idle). approxreuse.go leaves such a node running: the
// groups symmetry runs for themselves (fabricsym.go) share their GPUs'
// links with a stream transfer the DAG does not order with it. In
// SimAI's 9216-GPU example those are a stage's first rank's EP AllToAll
// and TP groups, one group in 9,180 EP nodes (29 M flows, half the flows
// approximate reuse still ran). Whether a transfer does overlap them is
// a matter of time: here the backend reports every stream transfer from
// its release to its end (Foreign), and such a node whose GPUs (its
// run groups' ranks, and their servers' GPUs under PXN, which relays
// through them) carry none at its release takes, as approxreuse.go does,
// the time of the first node of its shape placed alike, timed only by a
// run that no transfer met on those GPUs from its release to its end (one
// that did is not kept). Such a run is what the node does alone. Another
// such node counts as a transfer there from its release to its end
// (occupy): the DAG does not order them either.
//
// A transfer that starts on those GPUs while the node stands as a delay
// meets it (meet): its groups run from then, each of their flows cut to
// the share of the delay left (cutToShare: bytes, and the transport's
// times, latencies, AllToAll paces and delay nodes), so the transfer
// meets their load and they its; the node ends when both the delay and
// they have. Without that, exposed PP came out 14.9% under the exact
// run's on the 9216-GPU example. What is lost beyond approximate reuse:
// the node's progress is taken as even over its time. A node with a
// transfer in flight at its release runs, untimed.

// UseApproxReuseIdle lets UseApproxReuse take also the nodes some of
// whose groups run for themselves, when no stream transfer is in flight
// on their GPUs at their release (see above); UseApproxReuse first.
func (x *Store) UseApproxReuseIdle() {
	gpus := x.in.Topology.GPUs
	x.fbusy, x.flast, x.flastBy = make([]int32, gpus), make([]des.Time, gpus), make([]int32, gpus)
	for g := range x.flast {
		x.flast[g], x.flastBy[g] = -1, -1
	}
	x.igpus = map[int64][]int32{}
}

// Foreign counts a stream transfer between src and dst starting (start)
// or ending, for UseApproxReuseIdle (a no-op without it), and returns the
// expanded flows ready now: those of reused nodes the transfer meets
// (meet).
func (x *Store) Foreign(src, dst int32, start bool) ([]int32, error) {
	if x.fbusy == nil {
		return nil, nil
	}
	var out []int32
	for _, g := range [2]int32{src, dst} {
		if g < 0 || int(g) >= len(x.fbusy) {
			continue
		}
		if !start {
			if x.fbusy[g] > 0 {
				x.fbusy[g]--
			}
			continue
		}
		x.fbusy[g]++
		x.flast[g], x.flastBy[g] = x.clock(), -1
		if len(x.idleSets) > 0 {
			r, err := x.meet(g)
			if err != nil {
				return nil, err
			}
			out = append(out, r...)
		}
	}
	return out, nil
}

// Foreigns reports whether the backend must call Foreign.
func (x *Store) Foreigns() bool { return x.fbusy != nil }

// idleGPUs is the GPUs of COLL node i's groups that run for themselves
// (run, positions in groups): their ranks, and with relays every GPU of
// their servers; kept per group id.
func (x *Store) idleGPUs(id int64, groups [][]int32, run []int32, relays bool) []int32 {
	if g, ok := x.igpus[id]; ok {
		return g
	}
	t := x.in.Topology
	seen := map[int32]bool{}
	var out []int32
	add := func(g int32) {
		if !seen[g] {
			seen[g] = true
			out = append(out, g)
		}
	}
	var servers map[int32]bool
	for _, k := range run {
		for _, r := range groups[k] {
			if r < 0 || int(r) >= t.GPUs {
				continue
			}
			add(r)
			if relays {
				if servers == nil {
					servers = map[int32]bool{}
				}
				servers[t.Nodes[r].Server] = true
			}
		}
	}
	if servers != nil {
		for g := 0; g < t.GPUs; g++ {
			if servers[t.Nodes[g].Server] {
				add(int32(g))
			}
		}
	}
	x.igpus[id] = out
	return out
}

// idle reports whether no stream transfer is in flight on gpus.
func (x *Store) idle(gpus []int32) bool {
	for _, g := range gpus {
		if x.fbusy[g] != 0 {
			return false
		}
	}
	return true
}

// metSince reports whether a stream transfer, or a node other than set
// s that a transfer may overlap (occupy), started on gpus since at.
func (x *Store) metSince(s int32, gpus []int32, at des.Time) bool {
	for _, g := range gpus {
		if x.flast[g] > at || (x.flast[g] == at && x.flastBy[g] != s) {
			return true
		}
	}
	return false
}

// occupy counts set s, a node some of whose groups run for themselves
// because another node may overlap them, in flight on gpus until it ends
// (idleEnded): such a node, as a transfer, makes the others there busy,
// and meets those reused (meet), whose flows TakeMet hands on.
func (x *Store) occupy(s int32, gpus []int32) error {
	x.sets[s].occ = gpus
	for _, g := range gpus {
		x.fbusy[g]++
		x.flast[g], x.flastBy[g] = x.clock(), s
		if len(x.idleSets) > 0 {
			r, err := x.meet(g)
			if err != nil {
				return err
			}
			x.metReady = append(x.metReady, r...)
		}
	}
	return nil
}

// TakeMet is the flows of reused nodes that the last Expand's node met
// (occupy), ready now; valid until the next Expand.
func (x *Store) TakeMet() []int32 {
	if len(x.metReady) == 0 {
		return nil
	}
	r := slices.Clone(x.metReady)
	x.metReady = x.metReady[:0]
	return r
}

// idleEnded ends set s's occupancy and watch (approxidle.go), if any.
func (x *Store) idleEnded(s int32) {
	set := &x.sets[s]
	for _, g := range set.occ {
		if x.fbusy[g] > 0 {
			x.fbusy[g]--
		}
	}
	set.occ = nil
	x.unwatchIdle(s)
}

// relaysOf reports whether a collective on groups may relay through
// other GPUs of their servers (as fabricsym.go's resources).
func relaysOf(pxn bool, algo string, spansServers bool) bool {
	a := strings.ToLower(algo)
	return (pxn && spansServers) || strings.Contains(a, "nvls") || strings.Contains(a, "pxn")
}

// idleState is a node standing as a delay of the time kept for its
// shape (UseApproxReuseIdle) while a stream transfer may yet start on
// its GPUs: those GPUs, the delay's end and span, its groups that run
// for themselves, and once a transfer met it, the share of their bytes
// left (scale: 0 while it stands as a delay alone).
type idleState struct {
	gpus      []int32
	end, span des.Time
	groups    [][]int32
	scale     float64
}

// watchIdle has set s, a node that took the kept time span as a delay,
// watched for a transfer starting on its GPUs: its groups run (run: their
// positions, rep the one standing for its siblings) are those that meet
// one.
func (x *Store) watchIdle(s int32, gpus []int32, span des.Time, run []int32, rep int32) {
	set := &x.sets[s]
	groups, err := x.groupsOf(x.in.Collectives[x.in.Flow(set.coll).Coll].Group)
	if err != nil || span <= 0 {
		return
	}
	var sub [][]int32
	for k, g := range run {
		if int32(k) != rep {
			sub = append(sub, groups[g])
		}
	}
	if len(sub) == 0 {
		return
	}
	set.idle = idleState{gpus: gpus, end: x.clock() + span, span: span, groups: sub}
	x.idleSets = append(x.idleSets, s)
}

// unwatchIdle drops set s, which ended, from those watched.
func (x *Store) unwatchIdle(s int32) {
	if x.sets[s].idle.gpus == nil {
		return
	}
	x.sets[s].idle = idleState{}
	if k := slices.Index(x.idleSets, s); k >= 0 {
		x.idleSets = slices.Delete(x.idleSets, k, k+1)
	}
}

// meet runs, from now, the groups of each watched node on GPU g that
// still stands as a delay alone, with their transfers cut to the share
// of the delay left: a transfer starting there meets their load, and
// they its (the node ends when both the delay and they have). It
// returns the flows ready now.
func (x *Store) meet(g int32) ([]int32, error) {
	mark := len(x.ready)
	for _, s := range x.idleSets {
		set := &x.sets[s]
		if set.idle.scale > 0 || !slices.Contains(set.idle.gpus, g) {
			continue
		}
		left := set.idle.end - x.clock()
		if left <= 0 {
			continue
		}
		set.idle.scale = float64(left) / float64(set.idle.span)
		set.copies, set.fabric, set.repAt, set.rep, set.rcopies, set.rot = 0, false, -1, nil, 0, false
		set.chans.on = false
		clear(set.ports)
		clear(set.next)
		x.runSet = -1
		x.materialized++
		rec := x.in.Collectives[x.in.Flow(set.coll).Coll]
		p, err := x.x.Start(rec, set.idle.groups, set.emit)
		if err != nil {
			return nil, x.in.FlowError(set.coll, "collective", fmt.Errorf("COLL node %d: %v", x.in.DAG.ID(set.coll), err))
		}
		x.sets[s].p = p
	}
	out := slices.Clone(x.ready[mark:])
	x.ready = x.ready[:mark]
	return out, nil
}

// IdleReused is how many nodes a pipeline transfer may overlap took a
// kept time (UseApproxReuseIdle), and how many of them a transfer met,
// so that their groups ran from then.
func (x *Store) IdleReused() (nodes, met int64) { return x.idleReused, x.materialized }

// cutToShare cuts flow f of a node a transfer met (meet) to the share sc
// of the node's delay left: a transfer's bytes and every time a flow
// carries (a transfer's latency and pace, a delay node's span), so its
// groups run alone take that share of the kept time. Bytes alone left the
// calibrated transport's paced AllToAll steps whole: at 1152 GPUs
// (SimAI's example, ga 12) the critical rank's exposed EP came out 6.4%
// over the exact run's and PP 17.8% under (0.1% and 0.2% now).
func cutToShare(f *flowset.Flow, sc float64) {
	scale := func(v int64) int64 { return max(1, int64(float64(v)*sc)) }
	switch f.Kind {
	case flowset.Transfer:
		f.Size = scale(f.Size)
		if f.Lat > 0 {
			f.Lat = des.Time(scale(int64(f.Lat)))
		}
		if f.PaceNs > 0 {
			f.PaceNs = uint32(scale(int64(f.PaceNs)))
		}
	case flowset.Delay:
		f.Size = scale(f.Size)
	}
}
