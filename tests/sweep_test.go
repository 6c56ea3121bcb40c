package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// Seed 002's chunk sweep as a Makefile, points two at a time: one row per
// chunk size in the gathered Parquet, the same bytes moved at every point,
// and smaller chunks slower (each MSCCL step waits for the last).
func TestChunkSweep(t *testing.T) {
	out := t.TempDir()
	cmd := exec.Command("make", "-s", "-C", "pipelines/chunk-sweep", "-j", "2", "OUT="+out, "BIN="+binDir, "LIMIT=32768", "SIZE=4MiB")
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make: %v\n%s", err, b)
	}
	rows, err := parquet.ReadFile[sweepRow](filepath.Join(out, "sweep.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(rows, func(a, b sweepRow) int { return int(a.ChunkBytes - b.ChunkBytes) })
	if len(rows) != 3 || rows[0].ChunkBytes != 8192 || rows[2].ChunkBytes != 32768 {
		t.Fatalf("rows %+v, want chunk sizes 8, 16 and 32 KiB", rows)
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
	// The same target again does nothing: every point is made.
	again := exec.Command("make", "-C", "pipelines/chunk-sweep", "OUT="+out, "BIN="+binDir, "LIMIT=32768", "SIZE=4MiB")
	again.Dir = ".."
	if b, err := again.CombinedOutput(); err != nil || !strings.Contains(string(b), "Nothing to be done") {
		t.Errorf("second make: %v\n%s", err, b)
	}
}
