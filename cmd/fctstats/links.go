package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/fabricsim/fabricsim/formats/links"
	"github.com/fabricsim/fabricsim/internal/cli"
	"github.com/fabricsim/fabricsim/pkg/plot"
	"github.com/fabricsim/fabricsim/pkg/stats"
)

// checkLinks rejects flags that do not go with --links, or need it.
func (c *command) checkLinks() error {
	linksTable := c.Table == stats.TableTiers || c.Table == stats.TableTop || c.Table == stats.TableJobs
	if c.Links == "" {
		if linksTable {
			return cli.Usagef("--table %s is a table of the link-load report: add --links FILE", c.Table)
		}
		return nil
	}
	switch {
	case !linksTable:
		return cli.Usagef("--links writes the tables tiers, top and jobs, not %s", c.Table)
	case len(c.Files) > 0:
		return cli.Usagef("--links FILE reads one links file; it takes no trace FILES (give them to another fctstats run)")
	case c.Compare || c.Iteration || c.Concat || c.Timeline || c.Curves:
		return cli.Usagef("--links is a report of its own: it does not take --compare, --iteration, --concat, --timeline or --latency-curves")
	case c.Format != "table" && c.Format != "markdown" && c.Format != "csv" && c.Format != "json" && c.Format != "parquet":
		return cli.Usagef("--links writes --format table, markdown, csv, json or parquet, not %s", c.Format)
	case c.Top < 0:
		return cli.Usagef("--top must be 0 (all) or more, not %d", c.Top)
	}
	return nil
}

// linkLoads runs the --links report.
func (c *command) linkLoads() error {
	var (
		m    links.Meta
		rows []links.Row
		err  error
		name = c.Links
	)
	// A link file holds one row per directed link and group type: a spinner
	// naming the phase is all a long read needs (no row count is announced).
	c.meter.Phase("reading " + name)
	if c.Links == "-" {
		rc, n, oerr := cli.OpenInput("", "pipe a links file in or name it: fctstats --links loads.parquet")
		if oerr != nil {
			return oerr
		}
		name = n
		m, rows, err = links.ReadFrom(name, rc)
		rc.Close()
	} else {
		m, rows, err = links.Read(c.Links)
	}
	if err != nil {
		return err
	}
	c.meter.Phase(fmt.Sprintf("adding up %d link rows", len(rows)))
	ll := stats.AnalyzeLinks(name, m, rows, c.Top)
	c.meter.Hide()
	err = c.output(func(w io.Writer) error {
		switch c.Format {
		case "table":
			ll.WriteText(w)
			return nil
		case "markdown":
			ll.WriteMarkdown(w)
			return nil
		case "json":
			enc := json.NewEncoder(w)
			enc.SetEscapeHTML(false)
			return enc.Encode(ll)
		}
		return c.joinTables(w, 1, func(int) (*stats.DataTable, error) { return ll.DataTable(c.Table) })
	})
	if err != nil || c.Plot == "" {
		return err
	}
	return c.writePlot(plot.Links(ll))
}
