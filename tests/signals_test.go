package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A program stopped by SIGTERM, SIGINT or SIGHUP while writing --out
// removes its temporary file (simccl-decompose once left 150-260 MB
// `.<out>.<rand>.tmp` files, flowsim-analytical an empty one) and still
// dies by that signal, as its caller expects. Each run is signalled as
// soon as its temporary file appears, long before it could finish.
func TestSignalRemovesTemporaryOutput(t *testing.T) {
	dir := t.TempDir()
	topo := filepath.Join(dir, "topo.stream")
	mustRun(t, nil, "topogen", "--gpus", "128", "-o", topo)
	// About 150k messages: seconds of fluid simulation.
	flows := filepath.Join(dir, "flows.stream")
	mustRun(t, nil, "simccl-decompose", "--pattern", "uniform", "--msg-size", "4KiB", "--rate", "50%", "--duration", "100us", topo, "-o", flows)
	progs := []struct {
		name string
		args []string // the output is $OUT
	}{
		// About 1.6e6 messages (under the 5e7 refused): written for far
		// longer than the test waits.
		{"simccl-decompose", []string{"simccl-decompose", "--pattern", "uniform", "--msg-size", "4KiB", "--rate", "50%", "--duration", "2ms", topo, "-o", "$OUT"}},
		{"flowsim-analytical", []string{"flowsim-analytical", flows, "-o", "$OUT.parquet"}},
	}
	for _, p := range progs {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
			out := t.TempDir()
			cmd := command(p.args, filepath.Join(out, "out"))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if !waitForTemp(out, 5*time.Second) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("%s: no temporary output appeared in %s (stderr %q)", p.name, out, stderr.String())
			}
			cmd.Process.Signal(sig)
			err := cmd.Wait()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != sig {
				t.Errorf("%s on %v: %v, want killed by the signal (stderr %q)", p.name, sig, err, stderr.String())
			}
			if left, _ := os.ReadDir(out); len(left) > 0 {
				t.Errorf("%s on %v left %s behind", p.name, sig, left[0].Name())
			}
		}
	}

	// Started with SIGHUP ignored (nohup), a program keeps it ignored: the
	// hangup does not stop the run, a later SIGTERM still cleans up.
	out := t.TempDir()
	a := withOut(progs[0].args, filepath.Join(out, "out"))
	cmd := exec.Command("sh", append([]string{"-c", `trap "" HUP; exec "$@"`, "sh", filepath.Join(binDir, a[0])}, a[1:]...)...)
	cmd.Dir = ".."
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !waitForTemp(out, 5*time.Second) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("nohup: no temporary output appeared")
	}
	cmd.Process.Signal(syscall.SIGHUP)
	time.Sleep(200 * time.Millisecond)
	if cmd.ProcessState != nil || cmd.Process.Signal(syscall.Signal(0)) != nil {
		t.Error("an ignored SIGHUP stopped the run")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	if left, _ := os.ReadDir(out); len(left) > 0 {
		t.Errorf("nohup: SIGTERM left %s behind", left[0].Name())
	}
}

// command runs a program of binDir with $OUT replaced by out.
func command(args []string, out string) *exec.Cmd {
	a := withOut(args, out)
	cmd := exec.Command(filepath.Join(binDir, a[0]), a[1:]...)
	cmd.Dir = ".."
	return cmd
}

func withOut(args []string, out string) []string {
	a := make([]string, len(args))
	for i, s := range args {
		a[i] = strings.ReplaceAll(s, "$OUT", out)
	}
	return a
}

// waitForTemp waits until dir holds a file (the output's temporary file).
func waitForTemp(dir string, limit time.Duration) bool {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if e, _ := os.ReadDir(dir); len(e) > 0 {
			return true
		}
	}
	return false
}
