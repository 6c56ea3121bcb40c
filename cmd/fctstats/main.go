// Command fctstats reports what a simulated run did: per-collective
// completion time with nccl-tests' algbw and busbw, FCT and slowdown
// percentiles per flow size and connection type, run-versus-run
// comparisons, and CDF and timeline plots. It reads fabricsim flow traces
// (Arrow on stdin, .arrow and .parquet files) and SimAI's fct.txt.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/fabricsim/fabricsim/internal/cli"
	"github.com/fabricsim/fabricsim/internal/outfile"
	"github.com/fabricsim/fabricsim/internal/progress"
	"github.com/fabricsim/fabricsim/pkg/plot"
	"github.com/fabricsim/fabricsim/pkg/stats"
	"github.com/fabricsim/fabricsim/pkg/units"
)

type command struct {
	progress.Quiet
	meter        *progress.Meter `kong:"-"`
	Compare      bool            `help:"Compare two runs: exactly two FILES, A (the reference) then B. Reports per-collective completion-time ratios B / A (collectives matched by collective_id) and the mean squared error of flow latencies in us^2, flows matched by flow_id, or, when either file is a SimAI fct.txt, by (src, dst, size) in start order; and that of their latency curves (see --curve-bin)."`
	Iteration    bool            `help:"Report a training iteration (a trace of simccl-decompose --workload): per rank, compute, exposed communication per group type (DP, DP_EP, TP, EP, PP) and bubble, which add up to the iteration; the critical rank, the mean, and the critical rank's layers. A trace of several jobs (simccl-decompose --merge) gets one report per job. With --compare, FILES are a trace and a SimAI EndToEnd.csv (or two traces): ratios fabricsim / SimAI (B / A for two traces)."`
	Solo         []string        `placeholder:"JOB=TRACE" help:"With --iteration: compare job JOB of the trace (a mix of jobs, simccl-decompose --merge) with its iteration in TRACE, the same job's stream run alone on the same fabric and backend: each report says its slowdown (iteration in the mix / alone; JSON: solo_iteration_ns, slowdown), and table and markdown end with the slowdown per job. Repeatable, or comma-separated."`
	Format       string          `default:"table" enum:"table,markdown,csv,json,parquet,nccl-tests,simai-e2e,chrome-trace" help:"Output: table (for people), markdown, csv (one table, see --table), json (everything, one object per input per line; with --compare one object), parquet (the --table table, to --out; its key/value metadata: fabricsim.schema fabricsim.fctstats-table/v1, fabricsim.producer, fabricsim.table, fabricsim.sources as a JSON array of the inputs, fabricsim.partial true or false), nccl-tests (per input, the collectives as nccl-tests prints them: size, count, type, redop, root, time, algbw, busbw, #wrong, then its average bus bandwidth line; with --plot, busbw against size), simai-e2e (the iteration report in SimAI's EndToEnd.csv layout, µs; implies --iteration), chrome-trace (the iteration as Chrome/Perfetto trace JSON for ui.perfetto.dev: a process per rank with compute, waiting, collective and flow tracks; implies --iteration)."`
	DType        string          `name:"dtype" default:"float" help:"nccl-tests format: the element type for the count and type columns (int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, f8e4m3, f8e5m2)."`
	Reference    []string        `placeholder:"FILE.csv" help:"nccl-tests format with --plot: add a published curve (examples/reference/*.csv: size_bytes,time_us,algbw_gbps,busbw_gbps after # comment lines); repeatable."`
	Table        string          `default:"collectives" enum:"collectives,summary,buckets,flows,totals,iteration,layers,slowdown,tiers,top,jobs,latencies" help:"Table that csv and parquet write: collectives (one row per collective), summary (identical collectives together), buckets (FCT and slowdown percentiles per size bucket and conn_type), flows (one row per flow: the source file, every trace column and the slowdown, streamed); with --compare: totals (one row: flows matched, latency MSE, latency-curve MSE, bytes and makespans of both runs); with --iteration: iteration (one row per rank; the default) or layers (the critical rank's layers), and with --solo slowdown (one row per job: iteration_ns, solo_iteration_ns, slowdown); with --links: tiers (one row per tier and group type, plus the tier's total as group_type all; the default), top (the --top hottest directed links) or, for a file of several jobs, jobs (one row per job and tier); with --requests: latencies (one row per latency). buckets and flows not with --compare."`
	Window       string          `placeholder:"FROM:TO" help:"With --compare: compare the latencies of flows that start in this window only (e.g. 8ms:10ms), as the hybrid-PDES paper measures its error over a run's last 2 ms. With --latency-curves: shade this window on the plot (e.g. the span a surrogate replaced)."`
	CurveBin     units.Duration  `name:"curve-bin" default:"100us" placeholder:"TIME" help:"With --compare: the bin of the latency curves, the mean latency of the flows that end in each bin of the window (or of the runs) in each run, and their error over the bins both runs have flows in, as the hybrid-PDES paper plots and scores its runs."`
	Out          string          `short:"o" placeholder:"FILE" help:"Write the output to FILE instead of stdout."`
	Plot         string          `placeholder:"FILE" help:"Draw the CDF of flow slowdowns (fct / ideal fct) to FILE.png or FILE.svg: one line per conn_type for one input, one per input otherwise. With --format nccl-tests: bus bandwidth against size, one line per input and per --reference. With --iteration: each rank's iteration coloured by compute phase, exposed communication per group type and bubble."`
	Label        []string        `placeholder:"NAME" help:"With --plot: the legend's name for each input, in the order of FILES (default: the file name); repeatable."`
	Timeline     bool            `help:"With --plot: add a panel per input showing when each source node (rank) had flows in flight, per conn_type."`
	Curves       bool            `name:"latency-curves" help:"With --plot: draw instead each input's latency curve, the mean latency of the flows delivered in each --curve-bin against time, one line per input, as the hybrid-PDES paper's Figure 3 compares its runs."`
	MaxRows      int             `name:"max-rows" default:"40" help:"table and markdown: list at most this many collectives one by one (0: all). The other tables are always complete."`
	Param        []string        `placeholder:"KEY=VALUE" help:"csv and parquet tables (not flows): add a column KEY holding VALUE on every row (an integer, a number or text), e.g. a sweep point's parameters; repeatable."`
	Concat       bool            `help:"Gather a sweep: FILES are CSV tables (fctstats --format csv, one per point, with --param columns) of the same columns; write them as one table (--format csv or parquet) and, with --plot, draw each --y column against --x."`
	X            string          `help:"With --concat --plot: the column along the x axis (log2 when it spans a factor of 8 or more); COLUMN=TITLE names it for people. Axes take their unit from the column's suffix (_ns, _us, _ms, _s, _bytes), scaled to the data."`
	Y            []string        `help:"With --concat --plot: the columns to draw against --x, one panel each (and per workload when --x values read WORKLOAD/NAME); COLUMN=TITLE names one for people."`
	Group        string          `placeholder:"COLUMN" help:"With --concat --plot and a text --x: draw the rows of each value of text column COLUMN (a job) in a colour and shape of their own, side by side in each --x slot, with a legend; a slowdown column gets a dashed line at 1. COLUMN=TITLE names it for people."`
	Links        string          `placeholder:"FILE" help:"Report a per-link load file (flowsim-analytical --link-loads, formats/links.md; - reads stdin) instead of traces: per tier, host side first (gpu-edge, edge-gpu, edge-agg, ...), and group type, the directed links that carried bytes, the bytes (KiB, MiB, GiB) and their mean and max utilization (busy time / makespan, in %); then the --top hottest directed links with the group types and ops that make up their bytes and the jobs that sent them (\"jobs a, b\": jobs sharing the link; JSON: jobs). csv and parquet write --table tiers or top, in raw units (bytes, ns, utilization as a fraction; top with jobs and n_jobs when the file has jobs); with --plot, utilization per tier stacked by group type with each tier's maximum, and the hottest links as bars. A file of several jobs also gets each job's load per tier (JSON: job_tiers), drawn as a heat map of jobs by tier."`
	Requests     string          `placeholder:"FILE" help:"Report an inference serving run (simccl-serve's per-request Parquet, formats/requests.md; - reads stdin) instead of traces: TTFT, TPOT, KV transfer and end-to-end latency percentiles (p50, p90, p99, max, mean), throughput in output tokens/s and tokens/s, and the KV transfers' share of the requests' end-to-end time. csv and parquet write --table latencies (ns); with --plot, the latencies' CDFs (ms, log scale) and each request's TTFT against its arrival."`
	Top          int             `default:"10" placeholder:"N" help:"With --links: how many of the hottest directed links to list and draw (0: all)."`
	AllowPartial bool            `name:"allow-partial" help:"Report a partial trace (its run stopped early: fabricsim.complete=false) instead of refusing it: every output says PARTIAL (the table's first line, a # line in nccl-tests, partial and unfinished_flows in JSON and as csv and parquet columns, the source column of --table flows, plot titles), and each collective the stop cut says so (status cut, its unfinished flows in cut_flows, a cut count in the summary table; a lower bound >= for its time, no bandwidth, left out of the summary's times). Not with --iteration's simai-e2e, chrome-trace or --compare, which have no place to say it."`
	Files        []string        `arg:"" optional:"" placeholder:"FILE" help:"Traces (.parquet, .arrow, Arrow IPC stream) or SimAI fct.txt files, told apart by content; - or nothing reads stdin."`

	partial bool // an input was a partial trace (with --allow-partial): plots say so
}

const description = `Report collective completion times, bandwidths and flow completion statistics of simulated runs.

Per collective: completion time (last end - first start of its rows, delay nodes included),
algbw = size / time in GB/s (1 GB = 1e9 B) and busbw = algbw x nccl-tests' factor (AllReduce
2(n-1)/n; AllGather, ReduceScatter, AllToAll (n-1)/n; Broadcast, Reduce, SendRecv 1; n =
nranks); identical collectives are also summarised together. Per flow size bucket (powers of
two) and conn_type: FCT and slowdown (fct / ideal fct) p50, p95, p99 and max, nearest-rank
percentiles, delay nodes excluded. SimAI fct.txt files have no collectives, so they get the
flow statistics only.

Examples:
  topogen --gpus 16 | ncclpath | simccl-decompose --workload examples/workloads/micro_allreduce.txt --tp 8 | flowsim-analytical | fctstats
  fctstats run.parquet --plot run.png --timeline
  fctstats --compare fluid.parquet packet.parquet
  fctstats --compare packet.parquet simai/fct.txt --format json
  fctstats --latency-curves --plot curves.png hf.parquet hybrid.parquet   (mean latency per 100 us against time)
  fctstats run.parquet --format csv --table summary > summary.csv
  fctstats run.parquet --format csv --table flows > flows.csv        (one row per flow)
  fctstats run.parquet --format parquet --out collectives.parquet
  fctstats --iteration run.parquet
  fctstats --iteration run.parquet --format simai-e2e > EndToEnd.csv
  fctstats --iteration --compare run.parquet simai/EndToEnd.csv
  fctstats run.parquet --format chrome-trace > iteration.json   (open in ui.perfetto.dev)
  fctstats run.parquet --format csv --param chunk_bytes=8192 > point.csv   (a sweep point's table)
  fctstats --concat points/*.csv --format parquet --out sweep.parquet --plot sweep.png --x chunk_bytes --y time_ns
  fctstats --format nccl-tests busbw.parquet fluid.parquet --plot busbw.png --reference examples/reference/dgx-h100_allreduce-nvls_plateau_nccl-tests-212.csv
  fctstats --links loads.parquet --plot loads.png   (which tier is hot, and for which group type)
  fctstats --requests requests.parquet --plot serving.png   (simccl-serve: TTFT, TPOT, throughput, KV transfer share)`

func main() {
	var c command
	cli.Main("fctstats", description, &c, c.run)
}

func (c *command) run() error {
	if c.Format == "simai-e2e" || c.Format == "chrome-trace" {
		c.Iteration = true
	}
	if c.Iteration && c.Table == stats.TableCollectives {
		c.Table = stats.TableIteration
	}
	if c.Links != "" && c.Table == stats.TableCollectives {
		c.Table = stats.TableTiers
	}
	if c.Requests != "" && c.Table == stats.TableCollectives {
		c.Table = stats.TableLatencies
	}
	if err := c.check(); err != nil {
		return err
	}
	c.meter = c.Meter("fctstats")
	c.meter.Unit("rows")
	defer c.meter.Stop()
	if c.Links != "" {
		return c.linkLoads()
	}
	if c.Requests != "" {
		return c.serving()
	}
	if c.Concat {
		return c.concat()
	}
	if c.Iteration {
		return c.iteration()
	}
	if c.Table == stats.TableFlows && (c.Format == "csv" || c.Format == "parquet") {
		return c.flowTable()
	}
	files := c.Files
	if len(files) == 0 {
		files = []string{"-"}
	}
	keep := c.Compare || c.Timeline || c.Curves
	runs := make([]*stats.Run, 0, len(files))
	var curves []stats.Curve
	for _, f := range files {
		run, err := c.analyze(f, keep)
		if err != nil {
			return err
		}
		if c.Curves {
			curves = append(curves, run.LatencyCurve(int64(c.CurveBin)/1000))
			if !c.Compare {
				run.DropFlows() // one run's rows at a time, not every input's
			}
		}
		runs = append(runs, run)
	}
	var cmp *stats.Comparison
	if c.Compare {
		var err error
		from, to, err := c.window()
		if err != nil {
			return err
		}
		if cmp, err = stats.CompareWindow(runs[0], runs[1], from, to, int64(c.CurveBin)/1000); err != nil {
			return err
		}
	}
	if err := c.write(runs, cmp); err != nil {
		return err
	}
	if c.Plot != "" {
		switch {
		case c.Format == "nccl-tests":
			return c.busbwPlot(runs)
		case c.Curves:
			for i := range curves {
				curves[i].Name = c.label(i, curves[i].Name)
			}
			from, to, _ := c.window() // checked in validate
			return c.writePlot([]*gplot.Plot{plot.LatencyCurves("Latency curves", curves, from, to, "window "+c.Window)}, []vg.Length{vg.Inch * 4.5})
		}
		return c.plot(runs, cmp)
	}
	return nil
}

// busbwPlot draws the runs' bus bandwidth against size with the
// reference curves.
func (c *command) busbwPlot(runs []*stats.Run) error {
	var series []plot.BusbwSeries
	title := "Bus bandwidth"
	for i, r := range runs {
		rows, err := r.NCCLTests(c.DType, units.DTypes[c.DType])
		if err != nil {
			return err
		}
		name := filepath.Base(r.Source)
		if r.Backend != "" {
			name = r.Backend + " (" + name + ")"
		}
		name = c.label(i, name)
		series = append(series, plot.BusbwSeries{Name: name, Rows: rows})
		if len(r.Collectives) > 0 && title == "Bus bandwidth" {
			co := r.Collectives[0]
			title = fmt.Sprintf("%s bus bandwidth, %s", co.Op, units.Plural(int64(co.NRanks), "rank"))
			if t := r.Topology; t != nil {
				title += fmt.Sprintf(" (%s, %d GPUs)", t.Family, t.GPUs)
			}
		}
	}
	for _, path := range c.Reference {
		ref, err := stats.ReadReference(path)
		if err != nil {
			return err
		}
		series = append(series, plot.BusbwSeries{Name: ref.Label, Rows: ref.Rows, Reference: true})
	}
	return c.writePlot([]*gplot.Plot{plot.Busbw(title, series)}, []vg.Length{vg.Inch * 5.5})
}

// writePlot writes panels to --plot, which appears only when complete.
func (c *command) writePlot(plots []*gplot.Plot, heights []vg.Length) error {
	if c.partial {
		for _, p := range plots {
			p.Title.Text = "PARTIAL (a run stopped early): " + p.Title.Text
		}
	}
	format, _ := plot.Format(c.Plot)
	f, err := outfile.Create(c.Plot)
	if err != nil {
		return err
	}
	if err := f.Finish(plot.Write(f, format, plots, heights)); err != nil {
		return fmt.Errorf("%s: %v", c.Plot, err)
	}
	return nil
}

// check rejects flag combinations that cannot work before any input is read.
func (c *command) check() error {
	stdin := 0
	for _, f := range c.Files {
		if f == "-" {
			stdin++
		}
	}
	if stdin > 1 {
		return cli.Usagef("stdin (-) can be read only once")
	}
	if c.Compare && len(c.Files) != 2 {
		return cli.Usagef("--compare takes exactly two files, A (reference) and B; got %d", len(c.Files))
	}
	if c.Compare && (c.Table == stats.TableFlows || c.Table == stats.TableBuckets) && (c.Format == "csv" || c.Format == "parquet") {
		return cli.Usagef("--table %s is not available with --compare (collectives or summary)", c.Table)
	}
	if c.Table == stats.TableFlows && (c.Format == "csv" || c.Format == "parquet") && c.Plot != "" {
		return cli.Usagef("--table flows streams the rows and draws nothing: run --plot separately")
	}
	if len(c.Param) > 0 && (c.Table == stats.TableFlows || (c.Format != "csv" && c.Format != "parquet")) {
		return cli.Usagef("--param adds columns to the csv and parquet tables other than flows")
	}
	for _, p := range c.Param {
		if k, _, ok := strings.Cut(p, "="); !ok || k == "" {
			return cli.Usagef("--param %q: want KEY=VALUE", p)
		}
	}
	if c.Concat {
		switch {
		case c.Format != "csv" && c.Format != "parquet":
			return cli.Usagef("--concat writes a csv or parquet table: give --format csv or parquet")
		case len(c.Files) == 0:
			return cli.Usagef("--concat needs the CSV tables to gather")
		case c.Plot != "" && (c.X == "" || len(c.Y) == 0):
			return cli.Usagef("--concat --plot draws --y columns against --x: give both")
		case c.Group != "" && c.Plot == "":
			return cli.Usagef("--group draws --y columns by --x in groups: give --plot")
		case c.Compare || c.Iteration:
			return cli.Usagef("--concat gathers tables; it does not take --compare or --iteration")
		}
	} else if c.X != "" || len(c.Y) > 0 || c.Group != "" {
		return cli.Usagef("--x, --y and --group are for --concat --plot")
	}
	if c.Window != "" && !c.Compare && !c.Curves {
		return cli.Usagef("--window restricts --compare's flow latencies (or is shaded on --latency-curves): give --compare")
	}
	if len(c.Label) > 0 && (c.Plot == "" || len(c.Label) > max(1, len(c.Files))) {
		return cli.Usagef("--label names the inputs in --plot's legend: give --plot and at most one --label per input (%d here)", max(1, len(c.Files)))
	}
	if c.Table == stats.TableTotals && !c.Compare {
		return cli.Usagef("--table totals is a comparison's: give --compare")
	}
	if _, _, err := c.window(); err != nil {
		return err
	}
	if c.CurveBin < 1000 {
		return cli.Usagef("--curve-bin %s: must be at least 1ns", units.FormatDuration(int64(c.CurveBin)))
	}
	if c.Curves && (c.Plot == "" || c.Timeline || c.Iteration || c.Format == "nccl-tests") {
		return cli.Usagef("--latency-curves draws --plot FILE.png|FILE.svg by itself: give --plot, without --timeline, --iteration or --format nccl-tests")
	}
	if c.Timeline && c.Plot == "" {
		return cli.Usagef("--timeline adds panels to --plot FILE.png|FILE.svg; give --plot")
	}
	if c.Plot != "" {
		if _, err := plot.Format(c.Plot); err != nil {
			return cli.Usagef("--plot %v", err)
		}
	}
	if _, ok := units.DTypes[c.DType]; !ok {
		return cli.Usagef("--dtype %q: one of %s", c.DType, strings.Join(units.DTypeNames(), ", "))
	}
	if len(c.Reference) > 0 && (c.Format != "nccl-tests" || c.Plot == "") {
		return cli.Usagef("--reference adds curves to the bus bandwidth plot: give --format nccl-tests and --plot")
	}
	if err := c.checkIteration(); err != nil {
		return err
	}
	if err := c.checkLinks(); err != nil {
		return err
	}
	if err := c.checkRequests(); err != nil {
		return err
	}
	if c.Format == "nccl-tests" && (c.Compare || c.Timeline) {
		return cli.Usagef("--format nccl-tests takes traces, not --compare or --timeline")
	}
	if c.MaxRows < 0 {
		return cli.Usagef("--max-rows must be 0 (all) or more, not %d", c.MaxRows)
	}
	if c.Format == "parquet" && c.Out == "" {
		if err := cli.CheckBinaryStdout("Parquet table (or give --out FILE.parquet)"); err != nil {
			return err
		}
	}
	return nil
}

// analyze reads one input completely.
func (c *command) analyze(path string, keepFlows bool) (*stats.Run, error) {
	in, err := c.openInput(path)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	return stats.Analyze(in, stats.Options{KeepFlows: keepFlows})
}

// openInput opens a trace or fct.txt; "-" is stdin. A partial trace is
// refused unless --allow-partial.
func (c *command) openInput(path string) (*stats.Input, error) {
	var in *stats.Input
	var err error
	if path != "-" {
		in, err = stats.Open(path)
	} else {
		rc, name, oerr := cli.OpenInput("", "pipe a trace in (flowsim-analytical | fctstats) or name files: fctstats run.parquet")
		if oerr != nil {
			return nil, oerr
		}
		in, err = stats.NewInput(rc, name)
	}
	if err != nil {
		return nil, err
	}
	c.partial = c.partial || in.Partial() > 0
	if c.meter != nil {
		var total int64
		if in.Meta != nil {
			total = in.Meta.Rows // 0: not announced, a spinner
		}
		detail := "reading " + in.Name
		in.OnRows = func(read int64) { c.meter.Set(read, total, detail) }
	}
	if !c.AllowPartial {
		err = in.CheckWhole()
	} else if in.Partial() > 0 && c.Iteration && (c.Compare || c.Format == "simai-e2e" || c.Format == "chrome-trace") {
		// SimAI's layout, the Chrome trace and the E2E comparison have no
		// field that could say PARTIAL.
		what := "--format " + c.Format
		if c.Compare {
			what = "--compare"
		}
		err = fmt.Errorf("%s: partial trace (%d flows never finished): --iteration %s has no place to mark it PARTIAL; use --format table, markdown, json or csv", in.Name, in.Partial(), what)
	}
	if err != nil {
		in.Close()
		return nil, err
	}
	return in, nil
}

func (c *command) write(runs []*stats.Run, cmp *stats.Comparison) error {
	// A Parquet stdout was checked with the flags, before reading the inputs.
	return c.output(func(bw io.Writer) error {
		switch c.Format {
		case "table", "markdown":
			if cmp != nil {
				if c.Format == "table" {
					cmp.WriteText(bw, c.MaxRows)
				} else {
					cmp.WriteMarkdown(bw, c.MaxRows)
				}
				return nil
			}
			for _, r := range runs {
				if c.Format == "table" {
					r.WriteText(bw, c.MaxRows)
				} else {
					r.WriteMarkdown(bw, c.MaxRows)
				}
			}
			return nil
		case "nccl-tests":
			for _, r := range runs {
				rows, err := r.NCCLTests(c.DType, units.DTypes[c.DType])
				if err != nil {
					return err
				}
				if err := r.WriteNCCLTests(bw, rows); err != nil {
					return err
				}
			}
			return nil
		case "json":
			enc := json.NewEncoder(bw)
			enc.SetEscapeHTML(false)
			if cmp != nil {
				return enc.Encode(struct {
					*stats.Comparison
					TotalsA stats.Totals `json:"totals_a"`
					TotalsB stats.Totals `json:"totals_b"`
				}{cmp, runs[0].Totals, runs[1].Totals})
			}
			for _, r := range runs {
				if err := enc.Encode(r); err != nil {
					return err
				}
			}
			return nil
		}
		// csv, parquet: one table, rows of every input together.
		if cmp != nil {
			return c.joinTables(bw, 1, func(int) (*stats.DataTable, error) {
				return c.markPartial(cmp.DataTable(c.Table))(cmp.UnfinishedFlowsA + cmp.UnfinishedFlowsB)
			})
		}
		return c.joinTables(bw, len(runs), func(i int) (*stats.DataTable, error) {
			table := runs[i].DataTable
			if c.AllowPartial {
				table = runs[i].PartialDataTable
			}
			return c.markPartial(table(c.Table))(runs[i].UnfinishedFlows)
		})
	})
}

// flowTable streams every input's rows as the per-flow table.
func (c *command) flowTable() error {
	files := c.Files
	if len(files) == 0 {
		files = []string{"-"}
	}
	return c.output(func(w io.Writer) error {
		t := stats.NewFlowTableWriter(w, c.Format)
		for _, f := range files {
			in, err := c.openInput(f)
			if err != nil {
				return err
			}
			err = t.Add(in)
			in.Close()
			if err != nil {
				return err
			}
		}
		return t.Close(c.tableMeta())
	})
}

func (c *command) plot(runs []*stats.Run, cmp *stats.Comparison) error {
	var series []stats.Series
	title := "Flow slowdown CDF"
	if len(runs) == 1 {
		series = runs[0].SlowdownSeries()
		title += ": " + c.label(0, runs[0].Source)
	} else {
		for i, r := range runs {
			name := c.label(i, r.Source)
			if i >= len(c.Label) && r.Backend != "" {
				name += ", " + r.Backend // which model each curve is: the file's name may not say
			}
			if cmp != nil {
				name = string(rune('A'+i)) + " = " + name
			}
			series = append(series, stats.Series{Name: name, Values: r.AllSlowdowns()})
		}
	}
	plots := []*gplot.Plot{plot.CDF(title, series)}
	heights := []vg.Length{vg.Inch * 4.5}
	if c.Timeline {
		for i, r := range runs {
			plots = append(plots, plot.Timeline(r, "Flows in flight per source node: "+c.label(i, r.Source)))
			heights = append(heights, plot.TimelineHeight(r))
		}
		plot.ShareTimeAxis(plots[1:]) // runs compare by eye
	}
	return c.writePlot(plots, heights)
}

// markPartial adds, with --allow-partial, the columns partial (a
// boolean) and unfinished_flows to a table of inputs that had n unfinished
// flows: every table of the run gets them, so tables of whole and partial
// runs still join.
func (c *command) markPartial(dt *stats.DataTable, err error) func(n int64) (*stats.DataTable, error) {
	return func(n int64) (*stats.DataTable, error) {
		if err != nil || !c.AllowPartial {
			return dt, err
		}
		if err := dt.AddBool("partial", n > 0); err != nil {
			return nil, err
		}
		return dt, dt.AddParam("unfinished_flows", fmt.Sprint(n))
	}
}

// label is input i's name in plots: its --label, else def.
func (c *command) label(i int, def string) string {
	if i < len(c.Label) {
		return c.Label[i]
	}
	return def
}

// window reads --window FROM:TO into ns (0, 0 when not given).
func (c *command) window() (from, to int64, err error) {
	if c.Window == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(c.Window, ":")
	if !ok {
		return 0, 0, cli.Usagef("--window %q: expected FROM:TO, e.g. 8ms:10ms", c.Window)
	}
	fa, err := units.ParseDuration(a)
	if err == nil {
		to, err = units.ParseDuration(b)
	}
	if err != nil {
		return 0, 0, cli.Usagef("--window %q: %v", c.Window, err)
	}
	if fa < 0 || to <= fa {
		return 0, 0, cli.Usagef("--window %q: the end must come after the start", c.Window)
	}
	return fa / 1000, to / 1000, nil // ps to ns
}
