package packet

import (
	"errors"
	"io"
	"os"

	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/route"
)

// Options is everything a packet run takes besides its flow set, as one
// value (analytical.Options' counterpart): NewRun and RunResults read it.
type Options struct {
	Config Config
	Seed   uint64 // ECMP hashing, RED marking, link errors
	// SendLatPs is added before each transfer starts moving data.
	SendLatPs int64
	// Expand runs a collective-granularity set's COLL nodes as their flows
	// (Flows.Expand), holding at most MemoryLimit bytes of them (0: no limit).
	Expand      bool
	MemoryLimit int64
	NoSymmetry  bool // with Expand: run every sibling group
	// Partitions and Threads: the parallel run (0 parts: the single loop).
	// Every Partitions gives the single loop's trace (partition.go).
	Partitions, Threads int
	// Busy, if set, is asked once as a partitioned run starts (one that
	// can be partitioned): true runs the single loop instead, the same
	// trace (flowsim-packet asks whether the cores are free).
	Busy      func() bool
	Surrogate *Surrogate // hybrid simulation, when set
	Monitors  *Monitors  // written during the run; the caller closes them
	// MonitorDir, without Monitors: NewRun makes the directory and the
	// monitor files in it once the run is set up, and Run closes them.
	MonitorDir  string
	Loop        *LoopWindow           // measured during the run
	ParallelLog io.Writer             // a CSV line a window of a partitioned run (windowLog)
	OnWarning   func(string)          // warnings that arise while running
	Progress    func(int, int, int64) // done, total, now (ps): every million events
}

// SurrogateError is NewRun's error for an Options.Surrogate it refuses.
type SurrogateError struct{ Err error }

func (e *SurrogateError) Error() string { return "surrogate: " + e.Err.Error() }
func (e *SurrogateError) Unwrap() error { return e.Err }

// NewRun builds a run of set under opt, ready for Run. The set is only
// read: the run's state (release times, the DAG's progress) is its own, so
// several runs may share one set. Warnings of the setup are in
// Sim.Warnings; the results, after Run, in Flows().
func NewRun(set *flowset.Set, opt Options) (*Sim, error) {
	r, err := route.New(set.Topology)
	if err != nil {
		return nil, err
	}
	flows := FromSet(set)
	if opt.Expand {
		flows.Expand(opt.MemoryLimit)
	}
	if opt.Config.PushTies && (opt.Partitions > 1 || opt.Threads > 1) {
		return nil, errors.New("TIE_ORDER push: a partitioned run orders the events of one instant by the nodes that made them (TIE_ORDER maker); push order is the single loop's")
	}
	s, err := New(set.Topology, r, opt.Config, flows, opt.Seed)
	if err != nil {
		return nil, err
	}
	s.sendLatPs, s.noSymmetry = opt.SendLatPs, opt.NoSymmetry
	s.parts, s.threads, s.busy = opt.Partitions, opt.Threads, opt.Busy
	s.onWarning, s.progress, s.loopWin = opt.OnWarning, opt.Progress, opt.Loop
	s.pv.log = opt.ParallelLog
	if opt.Surrogate != nil {
		if err := s.SetSurrogate(*opt.Surrogate); err != nil {
			return nil, &SurrogateError{err}
		}
	}
	s.mon = opt.Monitors
	if opt.Monitors == nil && opt.MonitorDir != "" {
		// Last, so that a refused setup leaves no files behind.
		if err := os.MkdirAll(opt.MonitorDir, 0o755); err != nil {
			return nil, err
		}
		if s.mon, err = OpenMonitors(opt.MonitorDir); err != nil {
			return nil, err
		}
		s.ownMon = true
	}
	return s, nil
}

// Flows is the run's flow table: after Run, each flow's result.
func (s *Sim) Flows() *Flows { return s.flows }

// Finished reports whether flow i started and ended: a run that stopped
// early (SIMULATOR_STOP_TIME, a deadlock) leaves some unfinished.
func (f *Flows) Finished(i int32) bool { return f.StartPs(i) >= 0 && f.End[i] >= 0 }

// RunResults runs set under opt and reports each finished flow's result
// (by DAG index, in index order, after the run): the contract every
// backend keeps (flowset.Result, written as rows by flowset.Rows), as
// analytical.RunResults. A run that failed flows (FlowsFailed) or stopped
// early (Incomplete) reports what finished, then returns that error.
func RunResults(set *flowset.Set, opt Options, emit func(i int32, r flowset.Result) error) (Stats, error) {
	s, err := NewRun(set, opt)
	if err != nil {
		return Stats{}, err
	}
	runErr := s.Run()
	var failed *FlowsFailed
	var incomplete *Incomplete
	if runErr != nil && !errors.As(runErr, &failed) && !errors.As(runErr, &incomplete) {
		return s.Stats(), runErr
	}
	fl := s.flows
	for i := int32(0); i < int32(set.Flows()); i++ {
		if fl.Finished(i) {
			if err := emit(i, fl.Result(i)); err != nil {
				return s.Stats(), err
			}
		}
	}
	return s.Stats(), runErr
}
