package main

import (
	"encoding/json"
	"io"
	"os"

	"github.com/fabricsim/fabricsim/formats/requests"
	"github.com/fabricsim/fabricsim/internal/cli"
	"github.com/fabricsim/fabricsim/pkg/plot"
	"github.com/fabricsim/fabricsim/pkg/stats"
)

// checkRequests rejects flags that do not go with --requests.
func (c *command) checkRequests() error {
	if c.Requests == "" {
		if c.Table == stats.TableLatencies {
			return cli.Usagef("--table latencies is a table of the serving report: add --requests FILE")
		}
		return nil
	}
	switch {
	case c.Table != stats.TableLatencies:
		return cli.Usagef("--requests writes the table latencies, not %s", c.Table)
	case len(c.Files) > 0 || c.Links != "":
		return cli.Usagef("--requests FILE reads one request trace; it takes no trace FILES or --links")
	case c.Compare || c.Iteration || c.Concat || c.Timeline || c.Curves:
		return cli.Usagef("--requests is a report of its own: it does not take --compare, --iteration, --concat, --timeline or --latency-curves")
	case c.Format != "table" && c.Format != "csv" && c.Format != "json" && c.Format != "parquet":
		return cli.Usagef("--requests writes --format table, csv, json or parquet, not %s", c.Format)
	}
	return nil
}

// serving runs the --requests report.
func (c *command) serving() error {
	name := c.Requests
	if name == "-" && cli.IsTerminal(os.Stdin) {
		return cli.Usagef("no input: stdin is a terminal; pipe a request trace in or name it: fctstats --requests requests.parquet")
	}
	c.meter.Phase("reading " + name)
	m, rows, err := requests.Read(name)
	if err != nil {
		return err
	}
	rep := stats.AnalyzeServing(name, m, rows)
	c.meter.Hide()
	err = c.output(func(w io.Writer) error {
		switch c.Format {
		case "table":
			rep.WriteText(w)
			return nil
		case "json":
			enc := json.NewEncoder(w)
			enc.SetEscapeHTML(false)
			return enc.Encode(rep)
		}
		return c.joinTables(w, 1, func(int) (*stats.DataTable, error) { return rep.DataTable(), nil })
	})
	if err != nil || c.Plot == "" {
		return err
	}
	return c.writePlot(plot.Serving(rep))
}
