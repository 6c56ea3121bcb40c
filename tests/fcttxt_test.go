package tests

import (
	"bytes"
	"testing"
)

// SimAI's fct.txt has flows but no collective ids: as nccl-tests' table it
// printed no row and "Avg bus bandwidth : 0", exit 0, which reads as a
// result. It is refused in one line, as --iteration refuses it; the
// formats that describe flows still read it.
func TestNCCLTestsRefusesSimAIFCT(t *testing.T) {
	t.Parallel()
	fct := writeFile(t, "fct.txt", "0b000001 0b000101 10024 100 87382 564400 21788 16302\n0b000101 0b000201 10025 100 87382 564400 21788 16302\n")
	oneLineError(t, run(t, nil, "fctstats", "--format", "nccl-tests", fct), 1, "fct.txt", "nccl-tests", "no collective ids")
	if out := mustRun(t, nil, "fctstats", fct); !bytes.Contains(out, []byte("2 flows")) {
		t.Errorf("fctstats' table of fct.txt:\n%s", out)
	}
}

// --format chrome-trace and simai-e2e are views of the iteration report;
// on a trace without compute phases their refusal named only --iteration,
// a flag the user had not given.
func TestIterationViewsNameTheirFormat(t *testing.T) {
	t.Parallel()
	tr := mustPipe(t, nil, []string{"topogen", "--gpus", "16"}, []string{"simccl-decompose", "--op", "allreduce", "--size", "1MiB", "--group", "dp", "--tp", "8"}, []string{"flowsim-analytical"})
	for _, f := range []string{"chrome-trace", "simai-e2e"} {
		oneLineError(t, run(t, tr, "fctstats", "--format", f), 1, "no compute rows", "--format chrome-trace or simai-e2e")
	}
}
