package cli

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/units"
)

// CreateOutput writes -o FILE through to the file, and stdout is the
// destination without one.
func TestCreateOutput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.bin")
	w, done, err := CreateOutput(path, "stream")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(w, "data"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("the file is at its path before it is complete")
	}
	if err := done(nil); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "data" {
		t.Fatalf("file holds %q (%v)", b, err)
	}
	if err := done(nil); err == nil {
		t.Error("closing the file twice reports no error")
	}

	w, done, err = CreateOutput("", "")
	if err != nil || w != os.Stdout || done(nil) != nil {
		t.Fatalf("stdout: %v %v", w, err)
	}
	if _, _, err := CreateOutput(filepath.Join(t.TempDir(), "no", "such", "dir"), ""); err == nil {
		t.Error("no error for a file that cannot be created")
	}
}

// A flag naming a file that does not exist is bad input, as a positional
// input file is (exit 1, one line naming the flag and the file), not a
// usage mistake: simccl-decompose --workload, flowsim-packet --conf and
// topogen --from-simai exited 2 and sent the user to --help.
func TestMissingFlagFile(t *testing.T) {
	var cmd struct {
		Workload string `type:"existingfile"`
	}
	path := filepath.Join(t.TempDir(), "none.txt")
	var stderr strings.Builder
	code := run1("prog", "", &cmd, func() error { return nil }, []string{"--workload", path}, &stderr)
	msg := stderr.String()
	if code != 1 || strings.Count(msg, "\n") != 1 || strings.Contains(msg, "--help") ||
		!strings.Contains(msg, "--workload") || !strings.Contains(msg, path+": no such file") {
		t.Errorf("exit %d, stderr %q; want 1 and one line naming --workload and %s", code, msg, path)
	}
	// A directory given for the file: bad input as well (kong's exit 2).
	dir := t.TempDir()
	stderr.Reset()
	code = run1("prog", "", &cmd, func() error { return nil }, []string{"--workload", dir}, &stderr)
	msg = stderr.String()
	if code != 1 || strings.Count(msg, "\n") != 1 || strings.Contains(msg, "--help") ||
		!strings.Contains(msg, "--workload") || !strings.Contains(msg, dir) || !strings.Contains(msg, "is a directory") {
		t.Errorf("a directory: exit %d, stderr %q; want 1 and one line naming --workload and %s", code, msg, dir)
	}
}

// A negative value after a long flag reaches the flag's parser, which
// refuses it as bad input naming the flag (exit 1), where kong took it for
// an unknown short flag ("expected value value but got "-5Gbps" (short
// flag)", exit 2).
func TestNegativeFlagValue(t *testing.T) {
	var cmd struct {
		NICBW units.Bandwidth `name:"nic-bw"`
		Size  units.Size
	}
	for _, args := range [][]string{{"--nic-bw", "-5Gbps"}, {"--size", "-1MiB"}, {"--nic-bw", "-.5Gbps"}} {
		var stderr strings.Builder
		code := run1("prog", "", &cmd, func() error { return nil }, args, &stderr)
		msg := stderr.String()
		if code != 1 || strings.Count(msg, "\n") != 1 || strings.Contains(msg, "short flag") || !strings.Contains(msg, args[0]) || !strings.Contains(msg, args[1]) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and one line naming the flag and the value", args, code, msg)
		}
	}
	if got := negativeValues([]string{"--a", "-5", "--b=-1", "-v", "--", "--c", "-2"}); strings.Join(got, " ") != "--a=-5 --b=-1 -v -- --c -2" {
		t.Errorf("negativeValues: %q", got)
	}
}
