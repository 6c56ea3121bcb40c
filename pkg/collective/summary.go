package collective

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/units"
)

// WriteSummary prints one line per distinct collective (same label, op,
// size, group type and plan), with how many groups ran it, and the totals
// of its rows: transfers, not the delay and join nodes around them.
func WriteSummary(w io.Writer, colls []Coll) error {
	type key struct {
		label, op, group, algo, proto string
		size                          int64
		ch                            int
	}
	type row struct {
		k        key
		n        int
		ranks    int
		flows    int64
		wire     int64
		predicts int64
	}
	idx := map[key]int{}
	var rows []row
	var flows, wire int64
	n := 0
	for _, c := range colls {
		if c.Compute {
			continue
		}
		n++
		flows += c.Flows
		wire += c.WireBytes
		k := key{c.Rec.Label, c.Rec.Op, c.GroupType, c.Rec.Algorithm, c.Rec.Protocol, c.Rec.Size, c.Rec.Channels}
		i, ok := idx[k]
		if !ok {
			i = len(rows)
			idx[k] = i
			rows = append(rows, row{k: k, ranks: len(c.Ranks), predicts: c.Rec.PredictedPs})
		}
		rows[i].n++
		rows[i].flows += c.Flows
		rows[i].wire += c.WireBytes
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "collective\top\tsize\tgroup\tgroups x ranks\talgorithm\tprotocol\tchannels\tflows\twire bytes\tpredicted\t")
	for _, r := range rows {
		pred := "-"
		if r.predicts > 0 {
			pred = des.Time(r.predicts).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d x %d\t%s\t%s\t%d\t%d\t%d\t%s\t\n", r.k.label, r.k.op, units.FormatSize(r.k.size), r.k.group,
			r.n, r.ranks, r.k.algo, r.k.proto, r.k.ch, r.flows, r.wire, pred)
	}
	fmt.Fprintf(tw, "total\t\t\t\t%d collectives\t\t\t\t%d\t%d\t\t\n", n, flows, wire)
	return tw.Flush()
}
