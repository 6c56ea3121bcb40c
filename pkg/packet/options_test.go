package packet

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/route"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// chain is a 1 MiB transfer between two servers' GPUs, then one back once
// it has arrived.
func chain(t *testing.T) *flowset.Set {
	t.Helper()
	return flowSet(t, gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 16}), []stream.Flow{
		{ID: 0, Src: 0, Dst: 8, Size: 1 << 20, ConnType: stream.ConnP2P},
		{ID: 1, Src: 8, Dst: 0, Size: 1 << 20, ConnType: stream.ConnP2P, Deps: []int64{0}},
	})
}

// flowSet is flows on topology tp as a stream reader gives them.
func flowSet(t *testing.T, tp *topo.Topology, flows []stream.Flow) *flowset.Set {
	t.Helper()
	var buf bytes.Buffer
	w, err := stream.NewWriter(&buf, "test")
	if err != nil {
		t.Fatal(err)
	}
	w.Topology(tp)
	for i := range flows {
		w.Flow(&flows[i])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := stream.NewReader(&buf, "test")
	if err != nil {
		t.Fatal(err)
	}
	set, err := flowset.Read(r)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// RunResults reports what New, the fields and Run give, flow by flow in
// index order; a run stopped between the two flows reports the first only,
// with the same result, and says it stopped; a surrogate it refuses is a
// SurrogateError.
func TestRunResults(t *testing.T) {
	set := chain(t)
	type got struct {
		i int32
		r flowset.Result
	}
	collect := func(opt Options) ([]got, error) {
		var out []got
		_, err := RunResults(set, opt, func(i int32, r flowset.Result) error {
			out = append(out, got{i, r})
			return nil
		})
		return out, err
	}
	opt := Options{Config: DefaultConfig(), Seed: 1}
	all, err := collect(opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].i != 0 || all[1].i != 1 {
		t.Fatalf("reported %+v; want flows 0 and 1 in order", all)
	}
	// Flow 1 starts once flow 0's last byte has arrived (its receive
	// completion; flow 0 ends at the last ACK): at least 1 MiB at GPU 0's
	// NIC line rate after flow 0 started.
	var bw float64
	for _, l := range set.Topology.Links {
		if l.Kind == "nic" && (l.A == 0 || l.B == 0) {
			bw = l.BWbps
		}
	}
	if bw == 0 {
		t.Fatal("no NIC link at GPU 0")
	}
	wire := des.Time(float64(1<<20*8) / bw * 1e12)
	if a, b := all[0].r, all[1].r; a.End < a.Start+wire || b.Start < a.Start+wire || b.End < b.Start+wire {
		t.Fatalf("flow 0 %+v, flow 1 %+v: each takes at least %s, flow 1 starting after flow 0's bytes arrived", a, b, wire)
	}

	r, err := route.New(set.Topology)
	if err != nil {
		t.Fatal(err)
	}
	fl := FromSet(set)
	s, err := New(set.Topology, r, DefaultConfig(), fl, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	if want := []got{{0, fl.Result(0)}, {1, fl.Result(1)}}; !slices.Equal(all, want) {
		t.Errorf("RunResults %+v; New and Run %+v", all, want)
	}

	stopped := opt
	stopped.Config.StopPs = int64(all[0].r.End) + 1
	part, err := collect(stopped)
	var inc *Incomplete
	if !errors.As(err, &inc) {
		t.Fatalf("stopped at %d ps: error %v; want Incomplete", stopped.Config.StopPs, err)
	}
	if len(part) != 1 || part[0] != all[0] {
		t.Errorf("stopped after flow 0 ended: reported %+v; want flow 0 only, as %+v", part, all[0])
	}

	bad := opt
	bad.Surrogate = &Surrogate{StartPs: 10, EndPs: 5}
	var se *SurrogateError
	if _, err := collect(bad); !errors.As(err, &se) {
		t.Errorf("a surrogate window ending before it starts: error %v; want a SurrogateError", err)
	}
}

// Options.Busy is asked once as a partitioned run starts, and true runs the
// single loop (the same results, no parallel statistics); it is not asked
// of a single-loop run. MonitorDir makes the monitor files, which Run
// closes.
func TestOptionsBusyAndMonitorDir(t *testing.T) {
	set := chain(t)
	run := func(opt Options) (*Sim, []flowset.Result) {
		t.Helper()
		s, err := NewRun(set, opt)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Run(); err != nil {
			t.Fatal(err)
		}
		return s, []flowset.Result{s.Flows().Result(0), s.Flows().Result(1)}
	}
	asked := 0
	busy := func(single bool) func() bool { return func() bool { asked++; return single } }
	_, one := run(Options{Config: DefaultConfig(), Seed: 1, Busy: busy(true)})
	if asked != 0 {
		t.Fatalf("a single-loop run asked Busy %d times", asked)
	}
	s, fallback := run(Options{Config: DefaultConfig(), Seed: 1, Partitions: 2, Threads: 2, Busy: busy(true)})
	if asked != 1 || s.ParallelStats() != nil || !slices.Equal(fallback, one) {
		t.Fatalf("busy: asked %d times, parallel stats %v, results %+v; want once, none, %+v", asked, s.ParallelStats(), fallback, one)
	}
	s, parts := run(Options{Config: DefaultConfig(), Seed: 1, Partitions: 2, Threads: 2, Busy: busy(false)})
	if asked != 2 || s.ParallelStats() == nil || !slices.Equal(parts, one) {
		t.Fatalf("idle: asked %d times, parallel stats %v, results %+v; want twice, some, %+v", asked, s.ParallelStats(), parts, one)
	}

	dir := filepath.Join(t.TempDir(), "mon")
	s, _ = run(Options{Config: DefaultConfig(), Seed: 1, MonitorDir: dir})
	if !s.ownMon {
		t.Fatal("MonitorDir: the run does not hold its monitors")
	}
	for _, f := range []string{"qlen.parquet", "host_bw.parquet", "qp_rate.parquet", "cnp.parquet", "pfc.parquet"} {
		// Parquet ends with its footer's magic once closed.
		if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || len(b) < 8 || string(b[len(b)-4:]) != "PAR1" {
			t.Errorf("%s: %v, %d bytes: not closed", f, err, len(b))
		}
	}
}
