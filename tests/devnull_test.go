package tests

import (
	"bytes"
	"testing"
)

// A run whose summary line is all one wants writes its trace to /dev/null,
// which has no extension to choose a container by: every backend takes it
// (it was refused, "unknown trace extension"), and its summary line still
// comes.
func TestTraceOutToDevNull(t *testing.T) {
	t.Parallel()
	st := mustPipe(t, nil, []string{"topogen", "--gpus", "16"}, []string{"simccl-decompose", "--op", "allreduce", "--size", "1MiB", "--group", "dp", "--tp", "8"})
	for _, prog := range []string{"flowsim-analytical", "flowsim-packet"} {
		r := run(t, st, prog, "-o", "/dev/null")
		if r.code != 0 || len(r.stdout) != 0 || !bytes.Contains(r.stderr, []byte("simulated")) {
			t.Errorf("%s -o /dev/null: exit %d, %d bytes on stdout, stderr %s", prog, r.code, len(r.stdout), r.stderr)
		}
	}
}

// /dev/stdout (like /dev/fd/N or a FIFO) has no extension either: a pipe
// takes the Arrow stream, the same bytes as with no -o (it was refused,
// "unknown trace extension").
func TestTraceOutToDevStdout(t *testing.T) {
	t.Parallel()
	st := mustPipe(t, nil, []string{"topogen", "--gpus", "16"}, []string{"simccl-decompose", "--op", "allreduce", "--size", "1MiB", "--group", "dp", "--tp", "8"})
	for _, prog := range []string{"flowsim-analytical", "flowsim-packet"} {
		want := mustRun(t, st, prog)
		r := run(t, st, prog, "-o", "/dev/stdout")
		if r.code != 0 || len(want) == 0 || !bytes.Equal(r.stdout, want) {
			t.Errorf("%s -o /dev/stdout: exit %d, %d bytes on stdout, want the %d of no -o: %s", prog, r.code, len(r.stdout), len(want), r.stderr)
		}
	}
}
