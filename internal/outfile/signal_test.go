package outfile

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const helperEnv = "FABRICSIM_OUTFILE_HELPER"

// fileSize is what the helper writes per output, in several writes so
// that a signal can land between them.
const fileSize = 256 << 10

// A process stopped by a signal while it writes outputs one after another
// leaves every output either whole under its name or not at all, and no
// temporary file: a signal may land during a write, a Commit or a rename.
// It dies by the signal.
func TestSignalLeavesOutputsWholeOrGone(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		return // the helper runs in TestSignalHelper
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 12 {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestSignalHelper$")
		cmd.Env = append(os.Environ(), helperEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The helper says when its first output is open (and the handler
		// installed); the signal then lands anywhere in the next ~40 ms.
		if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "open\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: helper said %q, %v", round, line, err)
		}
		time.Sleep(time.Duration(rng.IntN(40_000)) * time.Microsecond)
		sig := []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP}[round%3]
		cmd.Process.Signal(sig)
		cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != sig {
			t.Fatalf("round %d: helper ended %v, want killed by %v", round, cmd.ProcessState, sig)
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".tmp") {
				t.Fatalf("round %d (%v): %s left behind", round, sig, e.Name())
			}
			b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			if !bytes.Equal(b, content(e.Name())) {
				t.Fatalf("round %d (%v): %s holds %d bytes, not its whole content", round, sig, e.Name(), len(b))
			}
		}
	}
}

// TestSignalHelper writes outputs into the directory helperEnv names until
// a signal stops it.
func TestSignalHelper(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("the helper process of TestSignalLeavesOutputsWholeOrGone")
	}
	for i := 0; ; i++ {
		name := fmt.Sprintf("out-%d", i)
		f, err := Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			fmt.Println("open")
		}
		b := content(name)
		for len(b) > 0 {
			n := min(len(b), 16<<10)
			if _, err := f.Write(b[:n]); err != nil {
				t.Fatal(err)
			}
			b = b[n:]
		}
		if err := f.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// content is what the output named name holds when whole.
func content(name string) []byte {
	return bytes.Repeat([]byte(name+"\n"), fileSize/len(name))
}
