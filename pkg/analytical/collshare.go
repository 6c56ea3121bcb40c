package analytical

import (
	"math"
	"slices"

	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/route"
)

// collShare is the fluid model at collective granularity. Alone, a COLL
// node takes its time under busbw: NCCL's model time plus what the fabric
// adds (collload.go), and at that speed it keeps each link l busy a share
// u_l of the time, from its traffic on its group and sibling groups.
// Collectives in flight at once share the links: each runs at a speed x
// (1 = alone) such that on every link sum(x u_l) <= 1, max-min fair in x
// (progressive filling). Two collectives that each fill the same NICs run
// at half speed, as processor sharing would; a light one next to a heavy
// one slows by the share it holds. Only links whose total share exceeds 1
// ("hot" links) can bind, so a solve looks at those alone, and collectives
// that touch none run at full speed. Pipeline transfers, which stay flows
// at this granularity, do not share links with COLL nodes.
type collShare struct {
	load *collLoad
	jobs []*shareJob // in flight, in order of start (a fixed order keeps float sums and runs deterministic)
	sum  []float64   // per directed link: total share u of the jobs in flight
	hot  int         // links with sum > 1
	last des.Time    // when the jobs' remaining work was last brought up to date
	// solve's scratch, per directed link
	free, want []float64
	seen       []bool
}

type shareJob struct {
	flow  int32
	links []route.DirLink
	u     []float64 // share of each link at full speed
	left  float64   // ps of work at full speed still to do
	alone float64   // ps of all its work at full speed
	x     float64   // speed, 1 = alone
	gen   int64     // completion events of older generations are stale
	done  bool      // frozen during a solve
	speed float64   // solve's result
}

// hotShare is where a link's total share starts to bind (float sums of
// exactly filling jobs may land a hair above 1).
const hotShare = 1 + 1e-9

func newCollShare(load *collLoad, links int) *collShare {
	return &collShare{load: load, sum: make([]float64, links),
		free: make([]float64, links), want: make([]float64, links), seen: make([]bool, links)}
}

// advance charges the work done since s.last at the current speeds.
func (s *collShare) advance(now des.Time) {
	if dt := float64(now - s.last); dt > 0 {
		for _, j := range s.jobs {
			j.left -= j.x * dt
		}
	}
	s.last = now
}

// start puts COLL node i in flight.
func (s *collShare) start(e *engine, i int32) {
	f := e.in.Flow(i)
	d := s.load.demandOf(f)
	alone := float64(s.load.aloneWith(f, d))
	j := &shareJob{flow: i, left: alone, alone: alone, x: 1}
	j.setShares(d, f.Size)
	s.advance(e.now)
	s.jobs = append(s.jobs, j)
	s.addShares(j, 1)
	s.solve(e)
}

// setShares sets the job's links and its share u of each at full speed
// from its demand d (none for an unpriced one).
func (j *shareJob) setShares(d *demand, size int64) {
	j.links, j.u = nil, nil
	if d == nil || j.alone <= 0 {
		return
	}
	j.links = d.links
	j.u = make([]float64, len(d.links))
	peak := 0.0
	for k, ps := range d.ps {
		j.u[k] = ps * float64(size) / j.alone
		peak = max(peak, j.u[k])
	}
	// NCCL's model may be a little faster than the links' raw rate
	// allows; alone the collective still takes exactly its time.
	if peak > 1 {
		for k := range j.u {
			j.u[k] /= peak
		}
	}
}

// done handles a completion event: stale ones report false; otherwise the
// job leaves and the others may speed up.
func (s *collShare) done(e *engine, i int32, gen int64) bool {
	k := slices.IndexFunc(s.jobs, func(j *shareJob) bool { return j.flow == i })
	if k < 0 || s.jobs[k].gen != gen {
		return false
	}
	j := s.jobs[k]
	s.advance(e.now)
	s.jobs = slices.Delete(s.jobs, k, k+1)
	s.addShares(j, -1)
	s.solve(e)
	return true
}

// addShares adds (sign 1) or removes (-1) a job's shares from the links.
func (s *collShare) addShares(j *shareJob, sign float64) {
	for k, l := range j.links {
		was := s.sum[l] > hotShare
		s.sum[l] += sign * j.u[k]
		if sign < 0 && s.sum[l] < 1e-12 {
			s.sum[l] = 0 // no drift left behind on an idle link
		}
		if now := s.sum[l] > hotShare; now != was {
			if now {
				s.hot++
			} else {
				s.hot--
			}
		}
	}
}

// solve sets every job's speed by progressive filling over the hot links
// and reschedules the jobs whose speed changed.
func (s *collShare) solve(e *engine) {
	var bound []*shareJob
	for _, j := range s.jobs {
		j.done, j.speed = true, 1
		if s.hot == 0 {
			continue
		}
		for _, l := range j.links {
			if s.sum[l] > hotShare {
				j.done = false
				bound = append(bound, j)
				break
			}
		}
	}
	// Each round raises the level of the unfrozen jobs until a hot link
	// fills, and freezes the jobs on it.
	for left := len(bound); left > 0; {
		var touched []route.DirLink
		for _, j := range bound {
			for k, l := range j.links {
				if s.sum[l] <= hotShare {
					continue
				}
				if !s.seen[l] {
					s.seen[l] = true
					s.free[l], s.want[l] = 1, 0
					touched = append(touched, l)
				}
				if j.done {
					s.free[l] -= j.speed * j.u[k]
				} else {
					s.want[l] += j.u[k]
				}
			}
		}
		level := 1.0
		for _, l := range touched {
			if s.want[l] > 0 {
				level = min(level, max(s.free[l], 0)/s.want[l])
			}
		}
		for _, j := range bound {
			if j.done {
				continue
			}
			full := level >= 1
			for _, l := range j.links {
				if !full && s.seen[l] && s.want[l] > 0 && max(s.free[l], 0)/s.want[l] <= level*(1+1e-12) {
					full = true
				}
			}
			if full {
				j.done = true
				// A floor keeps float noise from stalling a job forever.
				j.speed = max(min(level, 1), 1e-9)
				left--
			}
		}
		for _, l := range touched {
			s.seen[l] = false
		}
	}
	for _, j := range s.jobs {
		if j.speed != j.x || j.gen == 0 {
			j.x = j.speed
			j.gen++
			s.schedule(e, j)
		}
	}
}

// schedule pushes job j's completion at its current speed.
func (s *collShare) schedule(e *engine, j *shareJob) {
	d := math.Ceil(max(j.left, 0) / j.x)
	at := des.Never // beyond the clock's range: saturate as Time.Add does
	if d < float64(des.Never) {
		at = e.now.Add(des.Time(d))
	}
	e.q.Push(at, evCollDone, j.flow, j.gen)
}
