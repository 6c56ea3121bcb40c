package tests

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

type sweepRow struct {
	ChunkBytes int64   `parquet:"chunk_bytes"`
	TimeNs     int64   `parquet:"time_ns"`
	FlowBytes  int64   `parquet:"flow_bytes"`
	WallS      float64 `parquet:"wall_s"`
}

// runSweep runs the chunk sweep (three or four points) and checks the
// gathered Parquet: one row per chunk size, the same bytes moved at every
// point, and smaller chunks slower (each MSCCL step waits for the last).
func runSweep(t *testing.T, out string, points int, args ...string) {
	t.Helper()
	limit := strconv.Itoa(8192 << (points - 1))
	cmd := exec.Command("make", append([]string{"-s", "-C", "pipelines/chunk-sweep", "OUT=" + out, "BIN=" + binDir, "LIMIT=" + limit, "SIZE=4MiB"}, args...)...)
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make: %v\n%s", err, b)
	}
	rows, err := parquet.ReadFile[sweepRow](filepath.Join(out, "sweep.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(rows, func(a, b sweepRow) int { return int(a.ChunkBytes - b.ChunkBytes) })
	if len(rows) != points || rows[0].ChunkBytes != 8192 || rows[points-1].ChunkBytes != 8192<<(points-1) {
		t.Fatalf("rows %+v, want %d chunk sizes from 8 KiB", rows, points)
	}
	for i, r := range rows {
		// An 8-GPU ring AllReduce of 4 MiB sends 2 x 7/8 x 4 MiB per GPU.
		if r.FlowBytes != 8*7<<20 || r.WallS <= 0 || (i > 0 && r.TimeNs >= rows[i-1].TimeNs) {
			t.Errorf("chunk %d: %+v", r.ChunkBytes, r)
		}
	}
	if st, err := os.Stat(filepath.Join(out, "sweep.png")); err != nil || st.Size() == 0 {
		t.Fatalf("no plot: %v", err)
	}
}

// Seed 002's chunk sweep as a Makefile, points two at a time; made again,
// it has nothing to do.
func TestChunkSweep(t *testing.T) {
	out := t.TempDir()
	runSweep(t, out, 3, "-j", "2")
	again := exec.Command("make", "-C", "pipelines/chunk-sweep", "OUT="+out, "BIN="+binDir, "LIMIT=32768", "SIZE=4MiB")
	again.Dir = ".."
	if b, err := again.CombinedOutput(); err != nil || !strings.Contains(string(b), "Nothing to be done") {
		t.Errorf("second make: %v\n%s", err, b)
	}
}

// The same sweep through a real single-node Slurm (make slurm-check, part
// of make test): four points as a job array, then the gather job.
func TestChunkSweepSlurm(t *testing.T) {
	if os.Getenv("FABRICSIM_SLURM") != "1" {
		t.Skip("make slurm-check runs it (FABRICSIM_SLURM=1)")
	}
	if os.Getuid() != 0 {
		t.Skip("slurm check skipped: setting up Slurm needs root (apt, munged, slurmctld, slurmd)")
	}
	setup := exec.Command("./pipelines/slurm-setup.sh")
	setup.Dir = ".."
	if b, err := setup.CombinedOutput(); err != nil {
		if setup.ProcessState != nil && setup.ProcessState.ExitCode() == 3 {
			t.Skipf("slurm check skipped: %s", strings.TrimSpace(string(b)))
		}
		t.Fatalf("slurm-setup: %v\n%s", err, b)
	}
	runSweep(t, t.TempDir(), 4, "SLURM=1")
}

type surrogateRow struct {
	Mode       string  `parquet:"mode"`
	FlowsA     int64   `parquet:"flows_a"`
	Matched    int64   `parquet:"flows_matched"`
	MSE        float64 `parquet:"mse_us2"`
	CurveBins  int64   `parquet:"curve_bins"`
	CurveMSE   float64 `parquet:"curve_mse_us2"`
	BytesA     int64   `parquet:"flow_bytes_a"`
	BytesB     int64   `parquet:"flow_bytes_b"`
	WindowFrom int64   `parquet:"window_from_ns"`
	WallS      float64 `parquet:"wall_s"`
	LoopS      float64 `parquet:"window_loop_s"`
	CPUS       float64 `parquet:"window_cpu_s"`
	Events     int64   `parquet:"window_events"`
}

// Seed 003's experiment, shortened to 1 ms at 50% load: three modes, each
// compared with high fidelity over the last 0.2 ms (two bins of the
// latency curves); high fidelity against itself has no error, the
// surrogates move about the same bytes in fewer events. (At 1 ms the
// surrogate window's times are noise, checked only to be there.)
func TestSurrogatePipeline(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	cmd := exec.Command("make", "-s", "-C", "pipelines/surrogate", "-j", "2", "OUT="+out, "BIN="+binDir,
		"END=1ms", "SURROGATE=300us:800us", "WINDOW=800us:1ms", "TRACK=100us", "RATE=50%")
	cmd.Dir = ".."
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make: %v\n%s", err, b)
	}
	if !strings.Contains(string(b), "surrogate speedup") {
		t.Fatalf("no table:\n%s", b)
	}
	if st, err := os.Stat(filepath.Join(out, "latency.png")); err != nil || st.Size() == 0 {
		t.Errorf("no latency curves plot: %v", err)
	}
	rows, err := parquet.ReadFile[surrogateRow](filepath.Join(out, "sweep.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]surrogateRow{}
	for _, r := range rows {
		modes[r.Mode] = r
	}
	hf := modes["hf"]
	// The window's 200 us are two of the latency curves' 100 us bins.
	if len(rows) != 3 || hf.MSE != 0 || hf.Matched == 0 || hf.WindowFrom != 800000 || hf.CurveBins != 2 || hf.CurveMSE != 0 || hf.CPUS <= 0 {
		t.Fatalf("rows %+v", rows)
	}
	for _, m := range []string{"lite", "hybrid"} {
		r := modes[m]
		if r.Matched == 0 || r.CurveBins != 2 || math.IsNaN(r.CurveMSE) || r.WallS <= 0 || r.LoopS <= 0 || r.Events <= 0 || r.Events >= hf.Events || math.Abs(float64(r.BytesB-hf.BytesB)) > 0.05*float64(hf.BytesB) {
			t.Errorf("%s: %+v (hf moved %d bytes)", m, r, hf.BytesB)
		}
	}
}
