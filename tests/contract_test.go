package tests

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/pkg/analytical"
	"github.com/fabricsim/fabricsim/pkg/backend"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/packet"
	"github.com/fabricsim/fabricsim/pkg/phy"
)

// The backend contract: a flow set is read-only during a run (release
// times, the DAG's progress and the row writer's cache are each run's
// own), so one set in memory serves several runs in one process. Fluid
// twice on one set gives the same rows, and fluid then packet on one set
// give what each gives on a set of its own, packet twice the same, at flow
// and (expanded) collective granularity; phyrun's workers on the same set
// report every flow and leave it as fluid found it. All run through
// backend.Backend, reporting each flow once.
func TestBackendsShareOneSet(t *testing.T) {
	topology := mustRun(t, nil, "topogen", "--gpus", "16")
	for _, tc := range []struct {
		name   string
		extra  []string
		expand bool
	}{
		{"flows", nil, false},
		{"collectives expanded", []string{"--granularity", "collective"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := mustRun(t, topology, "simccl-decompose", append([]string{"--op", "allreduce", "--size", "4MiB", "--group", "dp", "--tp", "8"}, tc.extra...)...)
			load := func() *flowset.Set {
				t.Helper()
				r, err := stream.NewReader(bytes.NewReader(data), "ar16")
				if err != nil {
					t.Fatal(err)
				}
				set, err := flowset.Read(r)
				if err != nil {
					t.Fatal(err)
				}
				return set
			}
			// Each backend runs through the one contract; rows come from
			// its results by the one row writer, in index order.
			run := func(b backend.Backend, set *flowset.Set) []trace.Row {
				t.Helper()
				res := make([]flowset.Result, set.Flows())
				seen := make([]bool, set.Flows())
				if err := b.Run(set, func(i int32, r flowset.Result) error {
					if seen[i] {
						t.Errorf("%T: flow %d reported twice", b, i)
					}
					res[i], seen[i] = r, true
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				var rows []trace.Row
				w := set.Rows()
				for i := int32(0); int(i) < set.Flows(); i++ {
					if seen[i] {
						rows = append(rows, w.Row(i, res[i]))
					}
				}
				return rows
			}
			fluid := func(set *flowset.Set) []trace.Row {
				return run(backend.Analytical{Options: analytical.Options{Model: analytical.Fluid, Expand: tc.expand}}, set)
			}
			pkt := func(set *flowset.Set) []trace.Row {
				return run(backend.Packet{Options: packet.Options{Config: packet.DefaultConfig(), Seed: 1, Expand: tc.expand}}, set)
			}

			shared := load()
			records := func() []flowset.Flow {
				var fs []flowset.Flow
				for i := int32(0); int(i) < shared.Flows(); i++ {
					fs = append(fs, *shared.Flow(i))
				}
				return fs
			}
			before := records()
			first := fluid(shared)
			if len(first) != shared.Flows() {
				t.Fatalf("fluid: %d rows for %d flows", len(first), shared.Flows())
			}
			// Every flow waits on the ones before it in the ring, so a
			// later run that saw the first's progress would end at once.
			if again := fluid(shared); !slices.Equal(again, first) {
				t.Errorf("fluid twice on one set: the second run's rows differ from the first's")
			}
			pShared := pkt(shared)
			if len(pShared) != shared.Flows() {
				t.Fatalf("packet: %d flows finished of %d", len(pShared), shared.Flows())
			}
			if pFresh := pkt(load()); !slices.Equal(pShared, pFresh) {
				t.Errorf("packet after fluid on one set: rows differ from packet on a fresh set")
			}
			if fFresh := fluid(load()); !slices.Equal(fFresh, first) {
				t.Errorf("fluid on a fresh set: rows differ from fluid on the shared one")
			}
			if again := fluid(shared); !slices.Equal(again, first) {
				t.Errorf("fluid after packet on one set: rows differ from fluid's first run")
			}
			if again := pkt(shared); !slices.Equal(again, pShared) {
				t.Errorf("packet twice on one set: the second run's rows differ from the first's")
			}
			if !tc.expand { // phyrun runs flow-granularity sets
				// Real transfers between two worker processes: their times
				// are measured, so only the contract is checked, then that
				// the set still gives fluid's rows.
				ph := run(backend.Phy{Options: phy.Options{Workers: 2, Exec: filepath.Join(binDir, "phyrun"), Timeout: time.Minute,
					WorkerArgs: phy.WorkerArgs}}, shared)
				if len(ph) != shared.Flows() {
					t.Errorf("phy: %d flows reported of %d", len(ph), shared.Flows())
				}
				for _, r := range ph {
					if r.StartNs < 0 || r.EndNs < r.StartNs {
						t.Fatalf("phy: flow %d from %d to %d ns", r.FlowID, r.StartNs, r.EndNs)
					}
				}
				if again := fluid(shared); !slices.Equal(again, first) {
					t.Errorf("fluid after phy on one set: rows differ from fluid's first run")
				}
			}
			if !slices.Equal(records(), before) {
				t.Errorf("the runs wrote into the set's flow records")
			}
			var end int64
			for _, r := range pShared {
				if r.EndNs <= 0 || r.StartNs < 0 {
					t.Fatalf("packet: flow %d unfinished (start %d, end %d ns)", r.FlowID, r.StartNs, r.EndNs)
				}
				end = max(end, r.EndNs)
			}
			// Both backends moved the same 4 MiB AllReduce: a ring over
			// 2 DP ranks at 400 Gbps takes at least 2(n-1)/n * S / B.
			if low := int64(4<<20) * 8 / 400; end < low {
				t.Errorf("packet ended at %d ns, before the %d ns the bytes need", end, low)
			}
		})
	}
}
