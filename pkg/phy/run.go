package phy

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/fabricsim/fabricsim/pkg/dag"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/flowset"
)

// Options configure a physical run.
type Options struct {
	Workers  int           // processes to launch (ranks are spread over them by server)
	StepSize int64         // bytes per FIFO step (NCCL Simple: 512 KiB)
	Exec     string        // the binary to start workers with (phyrun itself)
	Timeout  time.Duration // the whole run
	// WorkerArgs builds a worker's command line from the coordinator's
	// address and the worker id.
	WorkerArgs func(addr string, id int) []string
	// Progress, when set, is called as flows finish with the DAG's nodes
	// done of total (a few thousand events a second: no sampling needed).
	Progress func(done, total int)
}

// timing is one flow's measured timing, in ns since the run started, and
// a transfer's ideal FCT from the calibration; Run reports it in ps, as
// every backend does (flowset.Result).
type timing struct {
	Start, End, Ideal int64
}

// Calibration is what one uncontended transfer between two workers
// measured: it sets each flow's ideal FCT.
type Calibration struct {
	BytesPerNs float64
	LatencyNs  int64
}

type event struct {
	m     *ctl
	delay int32 // >= 0: a delay node's timer fired
	err   error
}

// Run executes the DAG of set over real TCP transfers between worker
// processes and returns the timing of every flow (by DAG index), in ps
// since the run started.
func Run(set *flowset.Set, opt Options) ([]flowset.Result, Calibration, error) {
	if opt.Workers < 1 {
		return nil, Calibration{}, fmt.Errorf("need at least one worker")
	}
	if opt.StepSize <= 0 {
		opt.StepSize = 512 << 10
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, Calibration{}, err
	}
	defer ln.Close()
	token, err := NewToken()
	if err != nil {
		return nil, Calibration{}, err
	}
	var seedBytes [8]byte
	if _, err := rand.Read(seedBytes[:]); err != nil {
		return nil, Calibration{}, err
	}
	events := make(chan event, 1024)
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			if p.Process != nil {
				p.Process.Kill()
				p.Wait()
			}
		}
	}()
	for id := 0; id < opt.Workers; id++ {
		cmd := exec.Command(opt.Exec, opt.WorkerArgs(ln.Addr().String(), id)...)
		cmd.Stderr = os.Stderr
		cmd.Env = append(os.Environ(), TokenEnv+"="+token)
		if err := cmd.Start(); err != nil {
			return nil, Calibration{}, fmt.Errorf("starting worker %d: %v", id, err)
		}
		procs = append(procs, cmd)
	}
	deadline := time.Now().Add(opt.Timeout)
	conns, addrs, err := gather(ln, opt.Workers, token, joinTimeout)
	if err != nil {
		return nil, Calibration{}, err
	}
	for _, c := range conns {
		if err := c.send(&ctl{T: "peers", Peers: addrs, Seed: binary.LittleEndian.Uint64(seedBytes[:]), Max: opt.StepSize}); err != nil {
			return nil, Calibration{}, err
		}
	}
	for id, c := range conns {
		go func(id int, c *ctlConn) {
			for {
				m, err := c.recv()
				if err != nil {
					// Name the worker and its process; its own last words,
					// if any, are on stderr above.
					events <- event{delay: -1, err: fmt.Errorf("worker %d (pid %d) disconnected: %v", id, procs[id].Process.Pid, err)}
					return
				}
				events <- event{m: m, delay: -1}
			}
		}(id, c)
	}
	defer func() {
		for _, c := range conns {
			c.send(&ctl{T: "quit"})
		}
	}()
	r := &runner{set: set, opt: opt, conns: conns, events: events, deadline: deadline,
		res: make([]timing, set.Flows())}
	cal, err := r.calibrate()
	if err != nil {
		return nil, Calibration{}, err
	}
	r.cal = cal
	err = r.run()
	res := make([]flowset.Result, len(r.res))
	for i, t := range r.res {
		res[i] = flowset.Result{Start: des.Time(t.Start) * 1000, End: des.Time(t.End) * 1000, Ideal: des.Time(t.Ideal) * 1000}
	}
	return res, cal, err
}

type runner struct {
	set      *flowset.Set
	dag      *dag.Run // this run's DAG state: the set is never written
	opt      Options
	conns    []*ctlConn
	events   chan event
	deadline time.Time
	epoch    int64
	res      []timing
	cal      Calibration
	work     []int32
	// pace is the NCCL transport's limit on a connection's steps (the
	// stream's pace_ps), as the simulators apply it: a paced transfer
	// holds its connection's next one until pace_ps after it began
	// sending. Its times are ns since epoch, as des.Time (ps) x 1000.
	pace flowset.Pacer
}

// worker hosts a node: a rank's (or NVSwitch's) server, spread round robin.
func (r *runner) worker(node int32) int {
	s := r.set.Topology.Nodes[node].Server
	if s < 0 {
		s = 0
	}
	return int(s) % len(r.conns)
}

// wait returns the next event, or an error at the deadline or when a
// worker failed.
func (r *runner) wait() (event, error) {
	select {
	case ev := <-r.events:
		if ev.err != nil {
			return ev, ev.err
		}
		if ev.m != nil && ev.m.T == "fail" {
			return ev, r.blame(fmt.Errorf("worker %d: %s", ev.m.ID, ev.m.Err))
		}
		return ev, nil
	case <-time.After(time.Until(r.deadline)):
		return event{}, fmt.Errorf("the run exceeded its timeout of %s", r.opt.Timeout)
	}
}

// deadWorkerGrace is how long a worker's failure waits for news of a
// worker that died: a peer that loses its connection often reports before
// the coordinator sees the dead process's control connection close.
const deadWorkerGrace = 250 * time.Millisecond

// blame returns the error of a worker that disconnected within
// deadWorkerGrace, naming the peer's report after it, else failure.
func (r *runner) blame(failure error) error {
	timeout := time.After(deadWorkerGrace)
	for {
		select {
		case ev := <-r.events:
			if ev.err != nil {
				return fmt.Errorf("%v (%v)", ev.err, failure)
			}
		case <-timeout:
			return failure
		}
	}
}

// calibrate times one 16 MiB and several 1-byte transfers between the
// first two workers (or within one): the bandwidth and latency of an idle
// path. The latency is the fastest ping: a single sample on a busy machine
// carries scheduling delays the path itself does not have.
func (r *runner) calibrate() (Calibration, error) {
	dst := 1 % len(r.conns)
	id := int32(0)
	timeOne := func(size int64) (int64, error) {
		id-- // calibration transfers have negative ids, one each
		start := time.Now().UnixNano()
		if err := r.conns[0].send(&ctl{T: "send", Flow: id, Dst: dst, Size: size, Step: r.opt.StepSize}); err != nil {
			return 0, err
		}
		for {
			ev, err := r.wait()
			if err != nil {
				return 0, err
			}
			if ev.m != nil && ev.m.Flow == id && ev.m.T == "sent" {
				return max(ev.m.At-start, 1), nil
			}
		}
	}
	if _, err := timeOne(1); err != nil { // opens the connection
		return Calibration{}, err
	}
	lat := int64(math.MaxInt64)
	for range 8 {
		t, err := timeOne(1)
		if err != nil {
			return Calibration{}, err
		}
		lat = min(lat, t)
	}
	big := int64(16 << 20)
	t, err := timeOne(big)
	if err != nil {
		return Calibration{}, err
	}
	return Calibration{BytesPerNs: float64(big) / float64(max(t-lat, 1)), LatencyNs: lat}, nil
}

func (r *runner) now() int64 { return time.Now().UnixNano() - r.epoch }

func (r *runner) run() error {
	set := r.set
	r.dag = set.DAG.NewRun()
	d := r.dag
	r.epoch = time.Now().UnixNano()
	r.work = append(r.work[:0], set.DAG.Ready()...)
	if err := r.drain(); err != nil {
		return err
	}
	var release []int32
	for d.Done() < d.Len() {
		ev, err := r.wait()
		if err != nil {
			return err
		}
		if ev.delay >= 0 {
			r.res[ev.delay].End = r.now()
			release = d.Complete(ev.delay, release[:0])
			r.work = append(r.work, release...)
		} else if m := ev.m; m.Flow >= 0 {
			at := m.At - r.epoch
			switch m.T {
			case "recv":
				// The receiver's own next steps start when the data is in.
				if d.IsDone(m.Flow) {
					break // the sender's report overtook the receiver's
				}
				dst := set.Flow(m.Flow).Dst
				release = d.ReleaseEarly(m.Flow, func(j int32) bool { return set.Flow(j).Src == dst }, release[:0])
				r.work = append(r.work, release...)
			case "sent":
				r.res[m.Flow].End = at
				r.holdNext(m.Flow)
				release = d.Complete(m.Flow, release[:0])
				r.work = append(r.work, release...)
			}
		}
		if err := r.drain(); err != nil {
			return err
		}
		if r.opt.Progress != nil {
			r.opt.Progress(d.Done(), d.Len())
		}
	}
	return nil
}

// holdNext hands a paced transfer i's pace to its connection's next
// transfer among its dependants (flowset.Pacer.Mark), before Complete
// releases them: a visit through ReleaseEarly that releases none.
func (r *runner) holdNext(i int32) {
	f := r.set.Flow(i)
	if f.PaceNs == 0 {
		return
	}
	r.pace.Sent(i, f)
	r.dag.ReleaseEarly(i, func(j int32) bool {
		r.pace.Mark(j, r.set.Flow(j))
		return false
	}, nil)
	r.pace.Clear()
}

// drain starts the flows released so far.
func (r *runner) drain() error {
	var release []int32
	for len(r.work) > 0 {
		i := r.work[0]
		r.work = r.work[1:]
		f := r.set.Flow(i)
		r.res[i].Start = r.now()
		switch {
		case f.Kind == flowset.Delay:
			ch, idx := r.events, i
			time.AfterFunc(time.Duration(f.Size/1000), func() { ch <- event{delay: idx} })
			continue
		case f.Kind == flowset.Join: // done at once
			r.res[i].End = r.res[i].Start
			release = r.dag.Complete(i, release[:0])
			r.work = append(r.work, release...)
			continue
		}
		// The step latency includes the path's own, which the calibration
		// measured: the sender waits for the rest (waitUntil: timers alone
		// would round microseconds up to a millisecond).
		wait := max(f.Lat.Ns()-r.cal.LatencyNs, 0)
		r.res[i].Ideal = wait + r.cal.LatencyNs + int64(float64(f.Size)/r.cal.BytesPerNs)
		src, dst := r.worker(f.Src), r.worker(f.Dst)
		at := r.epoch + r.res[i].Start + wait
		if t := int64(r.pace.Take(i)) / 1000; t > 0 {
			at = max(at, r.epoch+t)
		}
		r.pace.Began(i, f, des.Time(at-r.epoch)*1000)
		nodes := r.set.Topology.Nodes
		local := nodes[f.Src].Server >= 0 && nodes[f.Src].Server == nodes[f.Dst].Server
		if err := r.conns[src].send(&ctl{T: "send", Flow: i, Dst: dst, Size: f.Size, Step: r.opt.StepSize, At: at, Copy: local}); err != nil {
			return fmt.Errorf("worker %d: %v", src, err)
		}
	}
	return nil
}

// WorkerArgs is the default worker command line for phyrun.
func WorkerArgs(addr string, id int) []string {
	return []string{"--worker", "--coord", addr, "--worker-id", strconv.Itoa(id)}
}
