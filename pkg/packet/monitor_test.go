package packet

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/fabricsim/fabricsim/formats/monitor"
	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// CNPs a queue pair received after the last sample before it finished are
// not reported for the next flow that reuses its slot: here an incast
// finishes between samples, then an uncongested flow takes a freed slot
// and is alive at the next sample.
func TestMonitorCNPsStayWithTheirFlow(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.DCNSingleToR, GPUs: 16, GPUType: "A100", NICBW: 100e9})
	cfg := DefaultConfig()
	for _, kv := range []string{"KMIN_MAP=1 25000000000 5", "KMAX_MAP=1 25000000000 50", "QP_MON_INTERVAL=5000"} {
		if err := cfg.SetKV(kv); err != nil {
			t.Fatal(err)
		}
	}
	var specs []flowSpec
	var incast []int64
	for i := int32(8); i < 16; i++ {
		incast = append(incast, int64(len(specs)))
		specs = append(specs, flowSpec{i, 0, 4 << 20, nil})
	}
	// 128 MiB at 100 Gbps: about 10.7 ms, alive at the 5 ms sample.
	lone := int64(len(specs))
	specs = append(specs, flowSpec{1, 9, 128 << 20, incast}) // across the ToR
	s, fl := newSim(t, tp, cfg, cc.ModeDCQCN, specs)
	dir := t.TempDir()
	m, err := OpenMonitors(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.mon = m
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if s.Stats().CNPs == 0 {
		t.Fatal("the incast got no CNPs")
	}
	if end := fl.End[incast[0]]; end >= cfg.QPMonPs || fl.End[lone] <= cfg.QPMonPs {
		t.Fatalf("the incast must end before the 5 ms sample, the lone flow after: %d and %d ps", end, fl.End[lone])
	}
	rows, err := parquet.ReadFile[monitor.CNP](filepath.Join(dir, "cnp.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.FlowID == lone {
			t.Fatalf("%d CNPs reported for the uncongested flow at %d ns", r.CNPs, r.TimeNs)
		}
	}
}

// A monitor file that cannot be created fails OpenMonitors, and the ones
// created before it are closed (complete Parquet files), not leaked.
func TestOpenMonitorsCloses(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "pfc.parquet"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenMonitors(dir); err == nil {
		t.Fatal("pfc.parquet is a directory: OpenMonitors must fail")
	}
	for _, name := range []string{"qlen", "host_bw", "qp_rate", "cnp"} {
		if _, err := parquet.ReadFile[monitor.CNP](filepath.Join(dir, name+".parquet")); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The CNP count is of the CNPs DCQCN takes: with MIN_TIME_BETWEEN_CNPS
// longer than the run, a pair takes its first CNP only, so an 8-to-1
// incast counts at most 8, where every marked ACK counted before (rv11a).
func TestDCQCNCNPCountSpaced(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.DCNSingleToR, GPUs: 16, GPUType: "A100", NICBW: 100e9})
	var specs []flowSpec
	for i := int32(8); i < 16; i++ {
		specs = append(specs, flowSpec{i, 0, 1 << 20, nil})
	}
	for _, c := range []struct {
		gap      string
		min, max uint64
	}{{"0", 9, math.MaxUint64}, {"1000000", 1, uint64(len(specs))}} {
		cfg := DefaultConfig()
		for _, kv := range []string{"KMIN_MAP=1 25000000000 5", "KMAX_MAP=1 25000000000 50", "MIN_TIME_BETWEEN_CNPS=" + c.gap} {
			if err := cfg.SetKV(kv); err != nil {
				t.Fatal(err)
			}
		}
		s, _ := newSim(t, tp, cfg, cc.ModeDCQCN, specs)
		if err := s.Run(); err != nil {
			t.Fatal(err)
		}
		if n := s.Stats().CNPs; n < c.min || n > c.max {
			t.Errorf("MIN_TIME_BETWEEN_CNPS %s us: %d CNPs, want %d to %d", c.gap, n, c.min, c.max)
		}
	}
}
