package tests

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/internal/progress"
)

// progressDrawn matches what a progress bar leaves on stderr: carriage
// returns and ANSI escape sequences (erase line, and so on).
var progressDrawn = regexp.MustCompile("\r|\x1b\\[")

// Every long-running program draws progress when asked (FABRICSIM_PROGRESS,
// here with no delay so that short runs draw), saying what it knows; in a
// pipe, and under --quiet even when asked, stderr holds only its ordinary
// lines: no carriage return, no escape sequence, nothing on stdout changes.
func TestProgressOnlyWhenAsked(t *testing.T) {
	top := mustRun(t, nil, "topogen", "--gpus", "16")
	// 45 k flows, 1.5 M packet events: past every program's sampling
	// (2^20 events, 4096 flows or completions, 16384 rows).
	flows := mustRun(t, top, "simccl-decompose", "--op", "allreduce", "--size", "64MiB", "--transport", "preset=none") // 45072 flows
	tr := mustRun(t, flows, "flowsim-analytical")
	small := mustRun(t, mustRun(t, nil, "topogen", "--gpus", "8"), "simccl-decompose", "--op", "allreduce", "--size", "1MiB")
	loads := filepath.Join(t.TempDir(), "loads.parquet")
	mustRun(t, mustRun(t, top, "simccl-decompose", "--op", "allreduce", "--size", "64MiB", "--granularity", "collective"),
		"flowsim-analytical", "--model", "busbw", "--link-loads", loads)
	asked := []string{progress.Env + "=0s"}
	for _, c := range []struct {
		stdin []byte
		prog  string
		args  []string
		want  []string // in the progress drawn
	}{
		{top, "simccl-decompose", []string{"--op", "allreduce", "--size", "64MiB"}, []string{"simccl-decompose: ", "flows", "/1)"}},
		{flows, "flowsim-analytical", nil, []string{"flowsim-analytical: simulated ", "/45072"}},
		{flows, "flowsim-packet", nil, []string{"flowsim-packet: simulated ", "Mevents/s", "/45072"}},
		{tr, "fctstats", nil, []string{"fctstats: reading <stdin>", "/45072"}},
		{nil, "fctstats", []string{"--links", loads}, []string{"fctstats: reading " + loads}},
		{small, "phyrun", []string{"--launch", "local:1"}, []string{"phyrun: ", "flows"}},
	} {
		plain := runEnv(t, nil, c.stdin, c.prog, c.args...)
		drawn := runEnv(t, asked, c.stdin, c.prog, c.args...)
		quiet := runEnv(t, asked, c.stdin, c.prog, append([]string{"--quiet"}, c.args...)...)
		for _, r := range []result{plain, drawn, quiet} {
			if r.code != 0 {
				t.Fatalf("%s %v: exit %d: %s", c.prog, c.args, r.code, r.stderr)
			}
		}
		for name, r := range map[string]result{"in a pipe": plain, "with --quiet": quiet} {
			if progressDrawn.Match(r.stderr) {
				t.Errorf("%s %s: progress on stderr: %q", c.prog, name, r.stderr)
			}
		}
		if !progressDrawn.Match(drawn.stderr) {
			t.Errorf("%s: no progress drawn when asked: %q", c.prog, drawn.stderr)
			continue
		}
		for _, w := range c.want {
			if !bytes.Contains(drawn.stderr, []byte(w)) {
				t.Errorf("%s: progress lacks %q: %q", c.prog, w, drawn.stderr)
			}
		}
		// Erased before the summary line, which stays as in a pipe.
		lines := strings.Split(strings.TrimRight(string(drawn.stderr), "\n"), "\n")
		last := lines[len(lines)-1]
		if i := strings.LastIndex(last, "\x1b[2K\r"); i < 0 || progressDrawn.MatchString(last[i+len("\x1b[2K\r"):]) {
			t.Errorf("%s: progress not erased before the last line: %q", c.prog, last)
		}
		if c.prog != "phyrun" && c.prog != "flowsim-analytical" && c.prog != "flowsim-packet" && !bytes.Equal(plain.stdout, drawn.stdout) {
			t.Errorf("%s: stdout differs with progress drawn", c.prog)
		}
	}
}

// --quiet is accepted by every program, and changes nothing it writes.
func TestQuietEveryProgram(t *testing.T) {
	top := mustRun(t, nil, "topogen", "--gpus", "16")
	flows := mustRun(t, top, "simccl-decompose", "--op", "allreduce", "--size", "1MiB")
	tr := mustRun(t, flows, "flowsim-analytical", "--model", "busbw")
	for _, c := range []struct {
		stdin []byte
		prog  string
		args  []string
	}{
		{nil, "topogen", []string{"--gpus", "16"}},
		{top, "ncclpath", nil},
		{top, "simccl-decompose", []string{"--op", "allreduce", "--size", "1MiB"}},
		{flows, "flowsim-analytical", []string{"--model", "busbw"}},
		{flows, "flowsim-packet", nil},
		{tr, "fctstats", nil},
		{flows, "phyrun", []string{"--launch", "local:1"}},
	} {
		r := run(t, c.stdin, c.prog, append([]string{"--quiet"}, c.args...)...)
		if r.code != 0 {
			t.Errorf("%s --quiet: exit %d: %s", c.prog, r.code, r.stderr)
			continue
		}
		if len(r.stdout) == 0 && c.prog != "ncclpath" {
			t.Errorf("%s --quiet: nothing on stdout", c.prog)
		}
		if c.prog == "topogen" || c.prog == "simccl-decompose" || c.prog == "fctstats" {
			if want := mustRun(t, c.stdin, c.prog, c.args...); !bytes.Equal(r.stdout, want) {
				t.Errorf("%s --quiet: stdout differs", c.prog)
			}
		}
	}
}
