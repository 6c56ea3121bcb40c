package analytical

import (
	"math"

	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/flowset"
)

// collShare is the fluid model at collective granularity. A COLL node
// stands for a collective on every group of its pipeline stage at once, so
// what it holds is the stage's network: its NICs when the collective spans
// servers, its NVLink when it stays inside them. Collectives running at
// the same time on one stage share that resource equally (processor
// sharing), each never faster than alone, where it takes NCCL's model time
// (its delay_ps). Different stages and the two resources do not slow each
// other: links beyond the NICs (leaf uplinks, spines) are not modelled at
// this granularity, nor pipeline transfers' share of the NICs.
type collShare struct {
	res   map[shareKey]*shareRes
	jobs  map[int32]*shareJob // by flow index
	inter map[int64]bool      // group id: spans servers
}

type shareKey struct {
	rank  int32 // the stage's representative
	inter bool
}

type shareRes struct {
	jobs []int32
	last des.Time // when the jobs' remaining work was last brought up to date
}

type shareJob struct {
	res  *shareRes
	left float64 // ps of work at full speed still to do
	gen  int64   // completion events of older generations are stale
}

func newCollShare() *collShare {
	return &collShare{res: map[shareKey]*shareRes{}, jobs: map[int32]*shareJob{}, inter: map[int64]bool{}}
}

// spansServers reports whether flow f's collective runs over several servers.
func (s *collShare) spansServers(in *flowset.Set, f *flowset.Flow) bool {
	c := in.Collectives[f.Coll]
	if c == nil {
		return false
	}
	v, ok := s.inter[c.Group]
	if ok {
		return v
	}
	if g := in.Groups[c.Group]; g != nil && len(g.Ranks) > 0 {
		per := int32(max(in.Topology.GPUsPerServer, 1))
		for _, r := range g.Ranks {
			if r/per != g.Ranks[0]/per {
				v = true
				break
			}
		}
	}
	s.inter[c.Group] = v
	return v
}

// advance charges the work done on r since r.last at its current share.
func (s *collShare) advance(r *shareRes, now des.Time) {
	if n := len(r.jobs); n > 0 {
		done := float64(now-r.last) / float64(n)
		for _, j := range r.jobs {
			s.jobs[j].left -= done
		}
	}
	r.last = now
}

// reschedule pushes each job's completion at its current share.
func (s *collShare) reschedule(e *engine, r *shareRes) {
	n := float64(len(r.jobs))
	for _, j := range r.jobs {
		job := s.jobs[j]
		job.gen++
		d := math.Ceil(max(job.left, 0) * n)
		at := des.Never // beyond the clock's range: saturate as Time.Add does
		if d < float64(des.Never) {
			at = e.now.Add(des.Time(d))
		}
		e.q.Push(at, evCollDone, j, job.gen)
	}
}

// start puts COLL node i on its stage's resource.
func (s *collShare) start(e *engine, i int32) {
	f := e.in.Flow(i)
	k := shareKey{rank: f.Src, inter: s.spansServers(e.in, f)}
	r := s.res[k]
	if r == nil {
		r = &shareRes{}
		s.res[k] = r
	}
	s.advance(r, e.now)
	r.jobs = append(r.jobs, i)
	s.jobs[i] = &shareJob{res: r, left: float64(f.Lat)}
	s.reschedule(e, r)
}

// done handles a completion event: stale ones report false; otherwise the
// job leaves its resource, whose other jobs speed up.
func (s *collShare) done(e *engine, i int32, gen int64) bool {
	job := s.jobs[i]
	if job == nil || job.gen != gen {
		return false
	}
	r := job.res
	s.advance(r, e.now)
	for k, j := range r.jobs {
		if j == i {
			r.jobs = append(r.jobs[:k], r.jobs[k+1:]...)
			break
		}
	}
	delete(s.jobs, i)
	s.reschedule(e, r)
	return true
}
