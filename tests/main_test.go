// Package tests runs the built programs end to end, the way users call them:
// through pipes, with their exit codes and messages.
package tests

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/fabricsim/fabricsim/formats/trace"
)

var binDir string

// TestMain builds the programs into a temporary directory, unless
// FABRICSIM_TEST_BIN names a directory that make test has just built them
// into (linking every program again took about 14 s of CPU per test
// binary: go test ./... and the Slurm step each start one). Only make sets
// it, right after make build, so a plain go test never runs stale programs.
func TestMain(m *testing.M) {
	if dir := os.Getenv("FABRICSIM_TEST_BIN"); dir != "" {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join("..", dir) // relative to the repository, as make's bin
		}
		abs, err := filepath.Abs(dir)
		if err == nil {
			_, err = os.Stat(filepath.Join(abs, "flowsim-packet"))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "FABRICSIM_TEST_BIN:", err)
			os.Exit(1)
		}
		binDir = abs
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "fabricsim-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-o", dir+"/", "./cmd/...")
	build.Dir = ".."
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the programs:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result of running a pipeline.
type result struct {
	stdout, stderr []byte
	code           int
	// maxRSSKB is the process's peak resident memory, or the test
	// process's own peak when that was higher: the kernel charges a child
	// its parent's peak at exec (Go execs from a vfork-shared memory).
	maxRSSKB int64
}

// run executes one program with args and stdin.
func run(t testing.TB, stdin []byte, prog string, args ...string) result {
	t.Helper()
	return runEnv(t, nil, stdin, prog, args...)
}

// runEnv is run with environment variables (KEY=VALUE) added to ours.
func runEnv(t testing.TB, env []string, stdin []byte, prog string, args ...string) result {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, prog), args...)
	cmd.Dir = ".."
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", prog, err)
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = int64(ru.Maxrss) // KB on Linux
	}
	return result{out.Bytes(), errb.Bytes(), code, rss}
}

// mustRun runs a program and fails the test unless it exits 0.
func mustRun(t testing.TB, stdin []byte, prog string, args ...string) []byte {
	t.Helper()
	r := run(t, stdin, prog, args...)
	if r.code != 0 {
		t.Fatalf("%s %s: exit %d: %s", prog, strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// mustPipe runs programs joined by pipes, as a shell pipeline would, with
// stdin into the first, and returns the last one's output; it fails the
// test unless each exits 0. The streams between them never enter the test
// process: a flow-granularity stream of GPT-13B and its trace are 100 and
// 255 MB, which buffered here cost seconds of CPU.
func mustPipe(t testing.TB, stdin []byte, stages ...[]string) []byte {
	t.Helper()
	cmds := make([]*exec.Cmd, len(stages))
	errs := make([]bytes.Buffer, len(stages))
	var out bytes.Buffer
	var ends []*os.File // the pipes' ends, which only the programs keep
	for i, s := range stages {
		cmds[i] = exec.Command(filepath.Join(binDir, s[0]), s[1:]...)
		cmds[i].Dir = ".."
		cmds[i].Stderr = &errs[i]
		if i == 0 {
			cmds[i].Stdin = bytes.NewReader(stdin)
		} else {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			cmds[i-1].Stdout, cmds[i].Stdin = w, r
			ends = append(ends, r, w)
		}
	}
	cmds[len(cmds)-1].Stdout = &out
	started := 0
	for _, c := range cmds {
		if err := c.Start(); err != nil {
			t.Error(err)
			break
		}
		started++
	}
	// Closed here, a pipe ends when its programs do: a reader that fails
	// stops its writer, which could otherwise block for good.
	for _, f := range ends {
		f.Close()
	}
	var failed []string
	for i, c := range cmds[:started] {
		if err := c.Wait(); err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v: %s", strings.Join(stages[i], " "), err, errs[i].Bytes()))
		}
	}
	if failed != nil {
		t.Fatalf("pipeline failed: %s", strings.Join(failed, "; "))
	}
	return out.Bytes()
}

// oneLineError asserts exit status code with a single stderr line containing want.
func oneLineError(t *testing.T, r result, code int, want ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d; stderr: %s", r.code, code, r.stderr)
	}
	msg := strings.TrimRight(string(r.stderr), "\n")
	if code == 1 && strings.Contains(msg, "\n") {
		t.Errorf("error spans several lines:\n%s", msg)
	}
	if strings.Contains(msg, "panic") || strings.Contains(msg, "goroutine") {
		t.Errorf("panic trace: %s", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("stderr %q lacks %q", msg, w)
		}
	}
}

// eachRow calls f on each row of a trace, read one at a time: the traces
// of big runs hold millions of rows, which readTrace holds all at once
// (seconds of CPU, mostly the kernel's for the memory). f must not keep
// the row.
func eachRow(t *testing.T, data []byte, f func(*trace.Row)) {
	t.Helper()
	r, err := trace.NewReader(bytes.NewReader(data), "trace")
	if err != nil {
		t.Fatal(err)
	}
	var row trace.Row
	for {
		err := r.Next(&row)
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		f(&row)
	}
}

// readTrace reads a trace with formats/trace, independently of fctstats.
func readTrace(t *testing.T, data []byte) ([]trace.Row, trace.Meta) {
	t.Helper()
	r, err := trace.NewReader(bytes.NewReader(data), "trace")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := trace.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return rows, r.Meta()
}
