package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A backend that cannot finish writing its trace file (here: the file-size
// limit, as a full disk would) exits 1 and leaves no partial file whose
// footer makes it look complete.
func TestNoPartialTrace(t *testing.T) {
	st := mustRun(t, mustRun(t, nil, "topogen", "--gpus", "16"), "simccl-decompose", "--op", "allreduce", "--size", "64MiB", "--group", "dp", "--tp", "8")
	for _, prog := range []string{"flowsim-analytical", "flowsim-packet", "phyrun"} {
		out := filepath.Join(t.TempDir(), "run.parquet")
		bin, err := filepath.Abs(filepath.Join(binDir, prog))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "-c", `ulimit -f 4; exec "$0" -o "$1"`, bin, out) // 4 KiB
		cmd.Dir = ".."
		cmd.Stdin = bytes.NewReader(st)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err = cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !bytes.Contains(stderr.Bytes(), []byte("file too large")) {
			t.Errorf("%s: %v, stderr %q", prog, err, stderr.String())
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s left %s behind (%v)", prog, out, err)
		}
	}
}
