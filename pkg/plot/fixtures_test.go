package plot

// Fixtures, as pkg/stats' tests make them: a hand-made trace, iteration
// and link-load file with numbers easy to check by hand.

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/links"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/internal/handtraces"
	"github.com/fabricsim/fabricsim/pkg/stats"
)

// encode writes rows as a trace in container c.
func encode(t *testing.T, rows []trace.Row, c trace.Container) []byte {
	t.Helper()
	b, err := handtraces.Encode(rows, c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func analyzeBytes(t *testing.T, data []byte, name string, keep bool) *stats.Run {
	t.Helper()
	in, err := stats.NewInput(bytes.NewReader(data), name)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	run, err := stats.Analyze(in, stats.Options{KeepFlows: keep})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func handTrace() []trace.Row { return handtraces.Flows() }

func handIterationRows() []trace.Row { return handtraces.Iteration() }

// handIteration analyses handIterationRows, written as a trace.
func handIteration(t *testing.T, opt stats.IterationOptions) *stats.Iteration {
	t.Helper()
	in, err := stats.NewInput(bytes.NewReader(encode(t, handIterationRows(), trace.ArrowStream)), "hand")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	it, err := stats.AnalyzeIteration(in, opt)
	if err != nil {
		t.Fatal(err)
	}
	return it
}

func twoTier() (links.Meta, []links.Row) { return handtraces.TwoTierLinks() }

func csvFiles(files map[string]string) func(string) (io.ReadCloser, error) {
	return func(name string) (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(files[name])), nil }
}
