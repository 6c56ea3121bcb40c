package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/fabricsim/fabricsim/formats/simaie2e"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/internal/cli"
	"github.com/fabricsim/fabricsim/pkg/plot"
	"github.com/fabricsim/fabricsim/pkg/stats"
)

// checkIteration rejects flags that do not go with --iteration, or need it.
func (c *command) checkIteration() error {
	iterTable := c.Table == stats.TableIteration || c.Table == stats.TableLayers || c.Table == stats.TableSlowdown
	if !c.Iteration {
		if len(c.Solo) > 0 {
			return cli.Usagef("--solo compares iterations: add --iteration")
		}
		if iterTable {
			return cli.Usagef("--table %s is a table of the iteration report: add --iteration", c.Table)
		}
		return nil
	}
	switch {
	case !iterTable:
		return cli.Usagef("--iteration writes the tables iteration and layers, not %s", c.Table)
	case c.Format == "nccl-tests":
		return cli.Usagef("--format nccl-tests reports collectives; it does not go with --iteration")
	case c.Timeline:
		return cli.Usagef("--timeline does not go with --iteration: its --plot is already a timeline")
	case c.Table == stats.TableSlowdown && len(c.Solo) == 0:
		return cli.Usagef("--table slowdown compares a mix with its jobs alone: give --solo JOB=TRACE")
	case len(c.Solo) > 0 && c.Compare:
		return cli.Usagef("--solo does not go with --compare")
	case (c.Format == "simai-e2e" || c.Format == "chrome-trace") && (c.Compare || len(c.Files) > 1):
		return cli.Usagef("--format %s writes one trace's iteration: give one file, without --compare", c.Format)
	}
	return nil
}

// iteration runs the --iteration report.
func (c *command) iteration() error {
	files := c.Files
	if len(files) == 0 {
		files = []string{"-"}
	}
	opt := stats.IterationOptions{KeepSegments: c.Plot != "" || c.Format == "chrome-trace", KeepSpans: c.Format == "chrome-trace"}
	if c.Compare {
		return c.compareIteration(files, opt)
	}
	its := make([]*stats.Iteration, 0, len(files))
	for _, f := range files {
		// A trace of several jobs (simccl-decompose --merge) reports each
		// job's iteration; one trace file, one job each for the formats
		// that write one iteration.
		in, err := c.openInput(f)
		if err != nil {
			return err
		}
		all, err := stats.AnalyzeIterations(in, opt)
		in.Close()
		if err != nil {
			return err
		}
		its = append(its, all...)
	}
	if err := c.applySolo(its, opt); err != nil {
		return err
	}
	if len(its) > 1 && (c.Format == "simai-e2e" || c.Format == "chrome-trace") {
		return fmt.Errorf("%s: a trace of %d jobs: --format %s writes one job's iteration", files[0], len(its), c.Format)
	}
	err := c.output(func(w io.Writer) error {
		switch c.Format {
		case "table", "markdown":
			for _, it := range its {
				if c.Format == "table" {
					it.WriteText(w)
				} else {
					it.WriteMarkdown(w)
				}
			}
			if len(c.Solo) > 0 {
				stats.WriteSlowdowns(w, its, c.Format == "markdown")
			}
			return nil
		case "json":
			enc := json.NewEncoder(w)
			enc.SetEscapeHTML(false)
			for _, it := range its {
				if err := enc.Encode(it); err != nil {
					return err
				}
			}
			return nil
		case "simai-e2e":
			return its[0].WriteSimAIE2E(w)
		case "chrome-trace":
			return its[0].WriteChromeTrace(w)
		}
		if c.Table == stats.TableSlowdown {
			return c.joinTables(w, 1, func(int) (*stats.DataTable, error) {
				return c.markPartial(stats.SlowdownTable(files[0], its, c.AllowPartial), nil)(its[0].UnfinishedFlows)
			})
		}
		return c.joinTables(w, len(its), func(i int) (*stats.DataTable, error) {
			return c.markPartial(its[i].DataTable(c.Table))(its[i].UnfinishedFlows)
		})
	})
	if err != nil || c.Plot == "" {
		return err
	}
	plots := make([]*gplot.Plot, 0, len(its))
	heights := make([]vg.Length, 0, len(its))
	for i, it := range its {
		plots = append(plots, plot.Iteration(it, "Iteration per rank: "+c.label(i, it.Source)))
		heights = append(heights, plot.IterationHeight(it))
	}
	return c.writePlot(plots, heights)
}

// compareIteration compares a trace's iteration with SimAI's EndToEnd.csv
// (ratios fabricsim / SimAI, whichever comes first) or with another
// trace's (B / A).
func (c *command) compareIteration(files []string, opt stats.IterationOptions) error {
	var sides [2]*simaie2e.File
	var simai [2]bool
	for i, f := range files {
		e, err := readE2E(f)
		if err != nil {
			return err
		}
		if e != nil {
			sides[i], simai[i] = e, true
			continue
		}
		it, err := c.analyzeIteration(f, opt)
		if err != nil {
			return err
		}
		sides[i] = it.E2E()
	}
	if simai[0] && simai[1] {
		return cli.Usagef("--iteration --compare needs at least one fabricsim trace; both files are SimAI EndToEnd.csv")
	}
	ours, theirs := sides[1], sides[0]
	if simai[1] {
		ours, theirs = sides[0], sides[1]
	}
	cmp := stats.CompareE2E(ours, theirs)
	return c.output(func(w io.Writer) error {
		switch c.Format {
		case "table":
			cmp.WriteText(w)
			return nil
		case "markdown":
			cmp.WriteMarkdown(w)
			return nil
		case "json":
			enc := json.NewEncoder(w)
			enc.SetEscapeHTML(false)
			return enc.Encode(cmp)
		}
		return c.joinTables(w, 1, func(int) (*stats.DataTable, error) { return cmp.DataTable(c.Table) })
	})
}

// readE2E reads path as SimAI's EndToEnd.csv when it is one, else
// returns nil (stdin is never one: it carries traces).
func readE2E(path string) (*simaie2e.File, error) {
	if path == "-" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, trace.PathError(path, err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	head, _ := br.Peek(16)
	if !simaie2e.IsE2E(head) {
		return nil, nil
	}
	return simaie2e.Read(br, path)
}

func (c *command) analyzeIteration(path string, opt stats.IterationOptions) (*stats.Iteration, error) {
	in, err := c.openInput(path)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	return stats.AnalyzeIteration(in, opt)
}

// output runs write on --out (or stdout), buffered; after a failed write
// or close nothing is left at --out.
func (c *command) output(write func(io.Writer) error) (err error) {
	// The report may go to the terminal the progress is drawn on.
	if c.Out == "" && cli.IsTerminal(os.Stdout) {
		c.meter.Stop()
	}
	c.meter.Hide()
	out, done, err := cli.CreateOutput(c.Out, "")
	if err != nil {
		return err
	}
	defer func() { err = done(err) }()
	bw := bufio.NewWriterSize(out, 64<<10)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing the report: %v", err)
	}
	return nil
}

// joinTables writes the n tables table(i) gives as one CSV or Parquet
// table (they share columns: the same --table of each input).
func (c *command) joinTables(w io.Writer, n int, table func(i int) (*stats.DataTable, error)) error {
	var dt *stats.DataTable
	for i := range n {
		t, err := table(i)
		if err != nil {
			return cli.Usagef("--table: %v", err)
		}
		if dt == nil {
			dt = t
		} else {
			dt.Append(t)
		}
	}
	for _, p := range c.Param {
		k, v, _ := strings.Cut(p, "=")
		if err := dt.AddParam(k, v); err != nil {
			return cli.Usagef("%v", err)
		}
	}
	return c.writeTable(w, dt)
}

// writeTable writes a table as --format says (csv or parquet).
func (c *command) writeTable(w io.Writer, dt *stats.DataTable) error {
	if c.Format == "csv" {
		return dt.WriteCSV(w)
	}
	return dt.WriteParquet(w, c.tableMeta())
}

// TableSchema names fctstats' Parquet tables in their fabricsim.schema,
// which no trace reader takes for a trace.
const TableSchema = "fabricsim.fctstats-table/v1"

// tableMeta is a Parquet table's key/value metadata, so that a table read
// alone says what it is, what wrote it from which inputs, and whether one
// of them was a partial run's.
func (c *command) tableMeta() map[string]string {
	var src []string
	files := append(append([]string{}, c.Files...), c.Links, c.Requests)
	for _, spec := range c.soloSpecs() { // a slowdown's solo runs
		_, f, _ := strings.Cut(spec, "=")
		files = append(files, f)
	}
	for _, f := range files {
		if f == "-" {
			f = "<stdin>"
		}
		if f != "" {
			src = append(src, f)
		}
	}
	if len(src) == 0 {
		src = []string{"<stdin>"}
	}
	sj, _ := json.Marshal(src) // strings always encode
	table := c.Table
	if c.Concat {
		table = "concat"
	}
	return map[string]string{"fabricsim.schema": TableSchema, "fabricsim.producer": cli.Producer("fctstats"),
		"fabricsim.table": table, "fabricsim.sources": string(sj), "fabricsim.partial": strconv.FormatBool(c.partial)}
}

// concat gathers sweep points' CSV tables into one table, and plots.
func (c *command) concat() error {
	dt, err := stats.ConcatCSV(c.Files, func(name string) (io.ReadCloser, error) { return os.Open(name) })
	if err != nil {
		return err
	}
	// A point of a partial run (its partial column, --allow-partial)
	// makes the plots and the table say so.
	c.partial = dt.AnyTrue("partial")
	if c.Plot != "" {
		plots, err := plot.Sweep(dt, c.X, c.Y)
		if c.Group != "" {
			plots, err = plot.GroupedDots(dt, c.X, c.Y, c.Group)
		}
		if err != nil {
			return cli.Usagef("%v", err)
		}
		if run := plot.RunTitle(dt); run != "" {
			for _, p := range plots {
				p.Title.Text += " (" + run + ")"
			}
		}
		heights := make([]vg.Length, len(plots))
		for i := range heights {
			heights[i] = vg.Inch * vg.Length(max(3, 4-0.25*float64(len(plots)))) // one panel per y (and group)
		}
		if err := c.writePlot(plots, heights); err != nil {
			return err
		}
	}
	return c.output(func(w io.Writer) error { return c.writeTable(w, dt) })
}

// soloSpecs are --solo's JOB=TRACE, the repeated and comma-separated ones.
func (c *command) soloSpecs() []string {
	var specs []string
	for _, s := range c.Solo {
		specs = append(specs, strings.Split(s, ",")...)
	}
	return specs
}

// applySolo reads --solo JOB=TRACE and compares each job's iteration in
// the mix with its iteration in TRACE.
func (c *command) applySolo(its []*stats.Iteration, opt stats.IterationOptions) error {
	for _, spec := range c.soloSpecs() {
		job, file, ok := strings.Cut(spec, "=")
		if !ok || job == "" || file == "" {
			return fmt.Errorf("--solo %q: expected JOB=TRACE, e.g. a=a-solo.parquet", spec)
		}
		k := slices.IndexFunc(its, func(it *stats.Iteration) bool { return it.Job == job })
		if k < 0 {
			var jobs []string
			for _, it := range its {
				jobs = append(jobs, strconv.Quote(it.Job))
			}
			return fmt.Errorf("--solo %s: the trace has no job %q (its jobs: %s)", spec, job, strings.Join(jobs, ", "))
		}
		in, err := c.openInput(file)
		if err != nil {
			return err
		}
		solo, err := stats.AnalyzeIterations(in, opt)
		in.Close()
		if err != nil {
			return err
		}
		it, err := stats.SoloOf(solo, job, file)
		if err != nil {
			return fmt.Errorf("--solo %s: %v", spec, err)
		}
		if err := its[k].SetSolo(it); err != nil {
			return fmt.Errorf("--solo %s: %v", spec, err)
		}
	}
	return nil
}
