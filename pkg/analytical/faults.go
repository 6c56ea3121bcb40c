package analytical

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/route"
	"github.com/fabricsim/fabricsim/pkg/topo"
	"github.com/fabricsim/fabricsim/pkg/units"
)

// Faults are the fabric's degraded and failed links during a run: what
// flowsim-packet's LINK_DOWN does, for the analytical models. A link is
// named by its two nodes, as LINK_DOWN names it ("A-B", either order).
//
// A scaled link has its bandwidth multiplied by its factor for the whole
// run, in both directions (a degraded optic, a link trained at a lower
// rate): every model, every granularity sees the slower link, ideal FCTs
// included. A link down from time t leaves routing then, as packet's
// routing converges at once: flows sending over it move to a new path
// (ECMP over the equal-cost paths that remain, hashed anew as packet
// rehashes its queue pairs) with the bytes they have left; a flow left
// with no path fails (trace status "failed") with what it delivered, and
// its dependants go on. At collective granularity the COLL nodes released
// afterwards are priced on the fabric without it; under fluid the ones in
// flight are re-priced for the work they have left (busbw keeps their
// time); one whose traffic has no path left fails.
type Faults struct {
	Scale []LinkScale
	Down  []LinkDown
}

// LinkScale multiplies a link's nominal bandwidth by Factor from At on.
type LinkScale struct {
	Link   int32
	Name   string // as given, for messages
	Factor float64
	At     des.Time
}

// LinkDown fails a link at At.
type LinkDown struct {
	Link int32
	Name string
	At   des.Time
}

// findLink is the index of the link between nodes a and b ("A-B").
func findLink(t *topo.Topology, s string) (int32, error) {
	as, bs, ok := strings.Cut(s, "-")
	if !ok {
		return 0, fmt.Errorf("%q is not a link: name it by its two nodes, A-B (node ids, as LINK_DOWN)", s)
	}
	a, err1 := strconv.ParseInt(strings.TrimSpace(as), 10, 32)
	b, err2 := strconv.ParseInt(strings.TrimSpace(bs), 10, 32)
	if err1 != nil || err2 != nil || a < 0 || b < 0 {
		return 0, fmt.Errorf("%q is not a link: name it by its two nodes, A-B (node ids, as LINK_DOWN)", s)
	}
	for i, l := range t.Links {
		if (int64(l.A) == a && int64(l.B) == b) || (int64(l.A) == b && int64(l.B) == a) {
			return int32(i), nil
		}
	}
	return 0, fmt.Errorf("no link between nodes %d and %d in the topology (%d nodes)", a, b, len(t.Nodes))
}

// ParseLinkDown reads "A-B@TIME" (TIME with its unit, e.g. 2ms; @0s or
// no @: down from the start) against topology t.
func ParseLinkDown(t *topo.Topology, s string) (LinkDown, error) {
	name, at, hasAt := strings.Cut(s, "@")
	li, err := findLink(t, name)
	if err != nil {
		return LinkDown{}, err
	}
	d := LinkDown{Link: li, Name: strings.TrimSpace(name)}
	if hasAt {
		ps, err := units.ParseDuration(strings.TrimSpace(at))
		if err != nil {
			return LinkDown{}, err
		}
		d.At = des.Time(ps)
	}
	return d, nil
}

// ParseLinkScale reads "A-B=FACTOR" or "A-B=FACTOR@TIME", FACTOR
// positive (0.5: half the nominal bandwidth), TIME with its unit (from
// then on; without: from the start), against topology t.
func ParseLinkScale(t *topo.Topology, s string) (LinkScale, error) {
	name, fs, ok := strings.Cut(s, "=")
	if !ok {
		return LinkScale{}, fmt.Errorf("%q: expected A-B=FACTOR or A-B=FACTOR@TIME, e.g. 3-70=0.5@2ms", s)
	}
	var at des.Time
	if f, when, ok := strings.Cut(fs, "@"); ok {
		ps, err := units.ParseDuration(strings.TrimSpace(when))
		if err != nil {
			return LinkScale{}, err
		}
		fs, at = f, des.Time(ps)
	}
	li, err := findLink(t, name)
	if err != nil {
		return LinkScale{}, err
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(fs), 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) {
		return LinkScale{}, fmt.Errorf("factor %q: expected a positive number (0.5 halves the link; a link down is --link-down)", fs)
	}
	return LinkScale{Link: li, Name: strings.TrimSpace(name), Factor: f, At: at}, nil
}

// active reports whether there is any fault.
func (fs *Faults) active() bool { return fs != nil && (len(fs.Scale) > 0 || len(fs.Down) > 0) }

// Topology is t with the links scaled from the start (t itself without).
func (fs *Faults) Topology(t *topo.Topology) *topo.Topology {
	if fs == nil || !slices.ContainsFunc(fs.Scale, func(s LinkScale) bool { return s.At == 0 }) {
		return t
	}
	c := *t
	c.Links = slices.Clone(t.Links)
	for _, s := range fs.Scale {
		if s.At == 0 {
			c.Links[s.Link].BWbps = t.Links[s.Link].BWbps * s.Factor
		}
	}
	return &c
}

// params names the faults in the trace's params (nothing without any,
// so a run without faults keeps its trace byte for byte).
func (fs *Faults) params(p map[string]any) {
	if fs == nil {
		return
	}
	if len(fs.Scale) > 0 {
		var v []string
		for _, s := range fs.Scale {
			at := ""
			if s.At > 0 {
				at = "@" + units.FormatDuration(int64(s.At))
			}
			v = append(v, s.Name+"="+strconv.FormatFloat(s.Factor, 'g', -1, 64)+at)
		}
		p["link_scale"] = strings.Join(v, ",")
	}
	if len(fs.Down) > 0 {
		var v []string
		for _, d := range fs.Down {
			v = append(v, d.Name+"@"+units.FormatDuration(int64(d.At)))
		}
		p["link_down"] = strings.Join(v, ",")
	}
}

// failures is the engine's record of failed links and flows.
type failures struct {
	down    int      // links down so far
	noted   bool     // busbwFaultNote said its piece
	names   []string // their names
	flows   map[int32]bool
	count   int   // failed trace rows
	lost    int64 // bytes they never delivered
	first   error
	scratch []int32
}

// FlowsFailed is what Run returns, with its result, when failed links
// left transfers without a path: every other flow finished, their rows say
// status "failed".
type FlowsFailed struct {
	Count int
	Lost  int64 // bytes never delivered
	First error
}

func (e *FlowsFailed) Error() string {
	if e.Count == 1 {
		return e.First.Error()
	}
	return fmt.Sprintf("%v (and %d more flows failed)", e.First, e.Count-1)
}

// scheduleFaults takes the links down from the start out of routing and
// schedules the other failures and the later changes of bandwidth.
func (e *engine) scheduleFaults() error {
	for k, s := range e.opt.Faults.Scale {
		if s.At > 0 {
			e.q.Push(s.At, evScale, s.Link, int64(k))
		}
	}
	for _, d := range e.opt.Faults.Down {
		if d.At == 0 {
			if err := e.linkDown(d.Link); err != nil {
				return err
			}
			continue
		}
		e.q.Push(d.At, evLinkDown, d.Link, 0)
	}
	return nil
}

// linkDown fails link li now: routing forgets it, and what sends over it
// moves to another path or fails.
func (e *engine) linkDown(li int32) error {
	if err := e.r.Fail(li); err != nil {
		return err
	}
	e.fail.down++
	l := e.in.Topology.Links[li]
	e.fail.names = append(e.fail.names, fmt.Sprintf("%d-%d", l.A, l.B))
	if e.price != nil {
		clear(e.price.cache) // priced over routes that may cross it
	}
	if e.share != nil {
		if err := e.share.reprice(e); err != nil {
			return err
		}
	}
	return e.rerouteFlows(li)
}

// crosses reports whether slot s sends over link li.
func (f *fluid) crosses(s *slot, li int32) bool {
	for _, l := range s.path {
		if f.private {
			l = f.owner[l].link
		}
		if l.Link() == li {
			return true
		}
	}
	return false
}

// rerouteFlows moves the flows sending over link li to new paths with the
// bits they have left, or fails them.
func (e *engine) rerouteFlows(li int32) error {
	f := e.fl
	ids := e.fail.scratch[:0]
	for id := range f.slots {
		if s := &f.slots[id]; s.live && f.crosses(s, li) {
			ids = append(ids, int32(id))
		}
	}
	e.fail.scratch = ids
	for _, id := range ids {
		s := &f.slots[id]
		bits := s.bits
		if r := f.hot[id].rate; r > 0 {
			bits = max(s.bits-r*float64(e.now-s.at)*1e-12, 0)
		}
		i, ideal := s.flow, s.ideal
		fl := e.flow(i)
		left := int64(math.Ceil(bits / 8))
		if e.links != nil { // the bytes left go elsewhere, or nowhere
			old := slices.Clone(s.path)
			if f.private {
				for k, c := range old {
					old[k] = f.owner[c].link
				}
			}
			var w []float32
			if len(s.w) > 0 {
				w = slices.Clone(s.w)
			}
			e.links.AddPath(fl, old, w, -left)
		}
		f.remove(id)
		hash := route.FlowHash(fl.Src, fl.Dst, e.opt.ECMPKey.ID(fl.ID, fl.Channel)*64, e.opt.Seed^0xfa11) // as packet rehashes a moved queue pair
		path, err := e.r.AppendPathPort(e.path[:0], fl.Src, fl.Dst, hash, -1)
		e.path = path
		var w []float32
		if err == nil && !e.opt.Routing.Hashed() {
			e.key = e.steps.of(fl.Coll)
			path, w, err = e.sprayed(fl)
		}
		if err != nil {
			if !errors.Is(err, route.ErrNoPath) {
				return e.flowError(i, "dst", fmt.Errorf("flow %d: %v", fl.ID, err))
			}
			if err := e.failFlow(i, fl.Size-left, ideal, err); err != nil {
				return err
			}
			continue
		}
		if e.links != nil {
			e.links.AddPath(fl, path, w, left)
		}
		if f.private {
			path = f.privatePath(e.steps.of(fl.Coll), path)
		}
		f.add(i, path, w, 0, e.r.Latency(e.path), ideal, e.now)
		f.slots[f.added[len(f.added)-1]].bits = bits
	}
	return nil
}

// failFlow ends transfer i now for want of a path, having delivered
// delivered bytes (ideal: its ideal FCT, 0 when it never had a path): its
// dependants go on, its row says status failed (an expanded flow's, its
// COLL node's).
func (e *engine) failFlow(i int32, delivered int64, ideal des.Time, why error) error {
	row := i
	if i >= e.n {
		row = e.ex.Coll(i)
	}
	if e.fail.flows == nil {
		e.fail.flows = map[int32]bool{}
	}
	if !e.fail.flows[row] {
		e.fail.flows[row] = true
		e.fail.count++
		if e.fail.first == nil {
			what := fmt.Sprintf("flow %d (%d -> %d)", e.flow(i).ID, e.flow(i).Src, e.flow(i).Dst)
			if f := e.in.Flow(row); f.Kind == flowset.Coll {
				what = fmt.Sprintf("flow %d (COLL node of collective %d)", f.ID, f.Coll)
			}
			e.fail.first = fmt.Errorf("%s failed at %s: link %s went down and left it no path (%v)",
				what, e.now, strings.Join(e.fail.names, ", "), why)
		}
	}
	e.fail.lost += max(e.flow(i).Size-delivered, 0)
	if e.flow(i).Kind == flowset.Transfer { // its same-source dependants go once it is over
		if err := e.sent(i); err != nil {
			return err
		}
	}
	e.after(0, evComplete, i, int64(ideal))
	return nil
}

// failed is the run's failure, nil when every flow delivered.
func (e *engine) failed() error {
	if e.fail.count == 0 {
		return nil
	}
	return &FlowsFailed{Count: e.fail.count, Lost: e.fail.lost, First: e.fail.first}
}

// collFails reports whether COLL node i, released now, has traffic that
// no path carries any more; it then fails whole.
func (e *engine) collFails(i int32) (bool, error) {
	if e.fail.down == 0 || e.price == nil {
		return false, nil
	}
	f := e.in.Flow(i)
	if _, err := e.price.tryDemand(f); err != nil && errors.Is(err, route.ErrNoPath) {
		return true, e.failColl(i, 0, err)
	}
	return false, nil
}

// failColl ends COLL node i now, failed, having done a share done of its
// bytes.
func (e *engine) failColl(i int32, done float64, why error) error {
	f := e.in.Flow(i)
	return e.failFlow(i, int64(done*float64(f.Size)), f.Lat, why)
}

// reprice prices again, on the fabric as it is now, the COLL nodes in
// flight: each keeps the share of its work it has done, and the rest takes
// its new time; one with no path left fails.
func (s *collShare) reprice(e *engine) error {
	s.advance(e.now)
	var failed []*shareJob
	for _, j := range slices.Clone(s.jobs) {
		f := e.in.Flow(j.flow)
		d, err := s.load.tryDemand(f)
		if err != nil && errors.Is(err, route.ErrNoPath) {
			failed = append(failed, j)
			continue
		}
		s.addShares(j, -1)
		frac := 1.0
		if j.alone > 0 {
			frac = max(j.left, 0) / j.alone
		}
		alone := float64(s.load.aloneWith(f, d))
		j.alone, j.left = alone, frac*alone
		j.setShares(d, f.Size)
		s.addShares(j, 1)
		j.x = -1 // the solve reschedules its completion
	}
	for _, j := range failed {
		k := slices.Index(s.jobs, j)
		s.jobs = slices.Delete(s.jobs, k, k+1)
		s.addShares(j, -1)
		frac := 0.0
		if j.alone > 0 {
			frac = 1 - max(j.left, 0)/j.alone
		}
		if err := e.failColl(j.flow, frac, fmt.Errorf("its traffic has %w left", route.ErrNoPath)); err != nil {
			return err
		}
	}
	s.solve(e)
	return nil
}

// tryDemand is COLL node f's demand on the fabric as it is now, or the
// error that its traffic has no path (route.ErrNoPath), which demandOf
// would only warn of.
func (c *collLoad) tryDemand(f *flowset.Flow) (*demand, error) {
	co := c.in.Collectives[f.Coll]
	if co == nil {
		return nil, nil
	}
	if d, ok := c.cache[keyOf(co)]; ok {
		return d, nil
	}
	if _, err := c.price(co); err != nil && errors.Is(err, route.ErrNoPath) {
		clear(c.load) // price stopped half way through its scratch
		return nil, err
	}
	return c.demandOf(f), nil
}

// linkScale sets link li's bandwidth to its nominal one times factor from
// now on: the flows on it are re-solved (all of them, as a slower link may
// bind flows below the rates the incremental solve would keep), and at
// collective granularity the collectives are re-priced, as for a failure.
func (e *engine) linkScale(li int32, factor float64) error {
	bw := e.in.Topology.Links[li].BWbps * factor
	e.r.SetBandwidth(li, bw)
	f := e.fl
	for dir := int32(0); dir < 2; dir++ {
		dl := route.DirLink(2*li + dir)
		if !f.private {
			f.cap[dl] = bw
			f.seeds = append(f.seeds, dl)
			continue
		}
		f.realCap[dl] = bw
		var cs []route.DirLink
		for k, c := range f.copies {
			if k.link == dl {
				f.cap[c] = bw
				cs = append(cs, c)
			}
		}
		slices.Sort(cs) // the map's order is not the run's
		f.seeds = append(f.seeds, cs...)
	}
	f.theta = 0
	if e.price != nil {
		clear(e.price.cache)
	}
	if e.share != nil {
		return e.share.reprice(e)
	}
	return nil
}

// busbwFaultNote says, once, that busbw left the COLL nodes in flight at
// a fault at the time they were priced at: without it a busbw run with a
// mid-run fault would read as if every collective had seen it.
func (e *engine) busbwFaultNote() {
	if e.opt.Model != Busbw || e.opt.Expand || e.in.CollNodes == 0 || e.now == 0 || e.fail.noted {
		return
	}
	e.fail.noted = true
	e.res.Warnings = append(e.res.Warnings, fmt.Sprintf(
		"busbw: a link changed at %v; COLL nodes then in flight keep the time they were priced at (--model fluid re-prices them)", e.now))
}
