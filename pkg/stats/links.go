package stats

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/formats/links"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/pkg/topo"
	"github.com/fabricsim/fabricsim/pkg/units"
)

// Tables of the link-load report (fctstats --links) for CSV and Parquet.
const (
	TableTiers = "tiers" // per tier and group type
	TableTop   = "top"   // the hottest directed links
	TableJobs  = "jobs"  // per job and tier (a file of several jobs)
)

// GroupAll is the group_type of a tier's row that totals every group type.
const GroupAll = "all"

// LinkLoads is what a links file (formats/links.md) says, summed per tier
// and group type and per directed link. Utilization is a fraction of the
// run's makespan (busy time / makespan), the run's average, not its peak.
type LinkLoads struct {
	Source      string             `json:"source"`
	Backend     string             `json:"backend"`
	Routing     string             `json:"routing"`
	Granularity string             `json:"granularity"`
	MakespanNs  int64              `json:"makespan_ns"`
	Topology    trace.TopologyMeta `json:"topology"`
	Rows        int                `json:"rows"`  // rows of the file
	Links       int                `json:"links"` // directed links carrying bytes
	Bytes       int64              `json:"bytes"`
	// FailedFlows and UndeliveredBytes: a run whose failed links left
	// flows no path (formats/links.md); its loads are of what moved.
	FailedFlows      int64 `json:"failed_flows,omitempty"`
	UndeliveredBytes int64 `json:"undelivered_bytes,omitempty"`
	// Tiers: per tier, from the host side up, a row for all group types
	// (group_type "all") and one per group type.
	Tiers []TierLoad `json:"tiers"`
	// Top: the hottest directed links, most utilized first.
	Top []LinkLoad `json:"top"`
	// JobTiers: per job and tier, the job's load (a file of several jobs;
	// none otherwise).
	JobTiers []JobTierLoad `json:"job_tiers,omitempty"`

	dirs []*LinkLoad // every directed link, hottest first
}

// TierLoad is the load of one tier (src role -> dst role), of one group
// type or of all together, over the directed links that carried its bytes.
type TierLoad struct {
	Tier      string `json:"tier"`
	SrcRole   string `json:"src_role"`
	DstRole   string `json:"dst_role"`
	Kind      string `json:"kind"`       // link kinds in the tier, "+"-joined when several
	GroupType string `json:"group_type"` // "all", or TP, DP, EP, PP, DP_EP, none
	Links     int64  `json:"links"`      // directed links carrying this group type's bytes
	Bytes     int64  `json:"bytes"`
	BusyNs    int64  `json:"busy_ns"`
	// Share of the tier's bytes (1 for "all").
	Share float64 `json:"share"`
	// UtilMean and UtilMax: this group type's utilization of a directed
	// link, mean and max over Links.
	UtilMean float64 `json:"util_mean"`
	UtilMax  float64 `json:"util_max"`
	// UtilTierMean is this group type's part of the tier's mean
	// utilization: its busy share summed over the tier's links carrying
	// any bytes, divided by their number. The group types' values add up
	// to the "all" row's UtilMean (the stacked bars of the plot).
	UtilTierMean float64 `json:"util_tier_mean"`
}

// LinkLoad is one directed link's load over the run.
type LinkLoad struct {
	Link        int32   `json:"link"`
	Src         int32   `json:"src"`
	Dst         int32   `json:"dst"`
	SrcRole     string  `json:"src_role"`
	DstRole     string  `json:"dst_role"`
	Tier        string  `json:"tier"`
	Kind        string  `json:"kind"`
	BWbps       float64 `json:"bw_bps"`
	Bytes       int64   `json:"bytes"`
	BusyNs      int64   `json:"busy_ns"`
	Utilization float64 `json:"utilization"`
	// Mix names the group types and ops that make up most of its bytes:
	// "DP allreduce 80%, EP alltoall 20%".
	Mix string `json:"mix"`
	// Parts: its bytes per group type and op, most first (JSON only).
	Parts []LinkPart `json:"parts"`
	// Jobs: the jobs whose bytes it carried, by name (JSON only; none
	// in a file without jobs): more than one is where jobs collide.
	Jobs []string `json:"jobs,omitempty"`
}

// JobsText words Jobs as the text table does: "jobs a, b", "job a", or
// "" without jobs.
func (l *LinkLoad) JobsText() string {
	switch len(l.Jobs) {
	case 0:
		return ""
	case 1:
		return "job " + l.Jobs[0]
	}
	return "jobs " + strings.Join(l.Jobs, ", ")
}

// LinkPart is what one group type and op put on a directed link.
type LinkPart struct {
	GroupType   string  `json:"group_type"`
	Op          string  `json:"op"`
	Bytes       int64   `json:"bytes"`
	BusyNs      int64   `json:"busy_ns"`
	Utilization float64 `json:"utilization"`
}

// Label is the link as the plot and tables name it: "edge 131 -> agg 260".
func (l *LinkLoad) Label() string {
	return fmt.Sprintf("%s %d -> %s %d", l.SrcRole, l.Src, l.DstRole, l.Dst)
}

// GroupUtil is the utilization of the link by group type g, and whether
// g sent bytes over it.
func (l *LinkLoad) GroupUtil(g string) (float64, bool) {
	u, ok := 0.0, false
	for _, p := range l.Parts {
		if p.GroupType == g {
			u, ok = u+p.Utilization, true
		}
	}
	return u, ok
}

// GroupTypes lists the group types of the report (GroupAll excepted), in
// the one order used everywhere (TP, EP, PP, DP, DP_EP, the others by
// name, then none).
func (ll *LinkLoads) GroupTypes() []string {
	var gs []string
	for _, t := range ll.Tiers {
		if t.GroupType != GroupAll && !slices.Contains(gs, t.GroupType) {
			gs = append(gs, t.GroupType)
		}
	}
	slices.SortFunc(gs, groupOrder)
	return gs
}

// AnalyzeLinks sums a links file's rows per tier and group type and per
// directed link, and keeps the top hottest directed links (0: all).
func AnalyzeLinks(source string, m links.Meta, rows []links.Row, top int) *LinkLoads {
	ll := &LinkLoads{Source: source, Backend: m.Backend, Routing: m.Routing, Granularity: m.Granularity,
		MakespanNs: m.MakespanNs, Topology: m.Topology, Rows: len(rows), FailedFlows: m.FailedFlows, UndeliveredBytes: m.UndeliveredBytes}
	type dirKey struct{ link, src int32 }
	byDir := map[dirKey]*LinkLoad{}
	for i := range rows {
		r := &rows[i]
		k := dirKey{r.Link, r.Src}
		d := byDir[k]
		if d == nil {
			d = &LinkLoad{Link: r.Link, Src: r.Src, Dst: r.Dst, SrcRole: r.SrcRole, DstRole: r.DstRole,
				Tier: r.Tier, Kind: r.Kind, BWbps: r.BWbps}
			byDir[k] = d
			ll.dirs = append(ll.dirs, d)
		}
		d.Bytes += r.Bytes
		d.BusyNs += r.BusyNs
		d.Utilization += r.Utilization
		if r.Job != "" && !slices.Contains(d.Jobs, r.Job) {
			d.Jobs = append(d.Jobs, r.Job)
		}
		d.Parts = append(d.Parts, LinkPart{GroupType: r.GroupType, Op: r.Op, Bytes: r.Bytes, BusyNs: r.BusyNs, Utilization: r.Utilization})
		ll.Bytes += r.Bytes
	}
	ll.Links = len(ll.dirs)
	for _, d := range ll.dirs {
		// A file may repeat a (group type, op) on a link: merge them.
		slices.SortFunc(d.Parts, func(a, b LinkPart) int {
			return cmp.Or(strings.Compare(a.GroupType, b.GroupType), strings.Compare(a.Op, b.Op))
		})
		parts := d.Parts[:0]
		for _, p := range d.Parts {
			if n := len(parts); n > 0 && parts[n-1].GroupType == p.GroupType && parts[n-1].Op == p.Op {
				parts[n-1].Bytes += p.Bytes
				parts[n-1].BusyNs += p.BusyNs
				parts[n-1].Utilization += p.Utilization
				continue
			}
			parts = append(parts, p)
		}
		d.Parts = parts
		slices.SortStableFunc(d.Parts, func(a, b LinkPart) int { return cmp.Compare(b.Bytes, a.Bytes) })
		d.Mix = mix(d)
		slices.Sort(d.Jobs)
	}
	slices.SortFunc(ll.dirs, func(a, b *LinkLoad) int {
		return cmp.Or(cmp.Compare(b.Utilization, a.Utilization), cmp.Compare(b.Bytes, a.Bytes),
			cmp.Compare(a.Link, b.Link), cmp.Compare(a.Src, b.Src))
	})
	n := len(ll.dirs)
	if top > 0 {
		n = min(n, top)
	}
	ll.Top = make([]LinkLoad, n)
	for i := range n {
		ll.Top[i] = *ll.dirs[i]
	}
	ll.Tiers = tierLoads(ll.dirs)
	ll.JobTiers = jobTierLoads(rows, ll)
	return ll
}

// mix words the parts that make up most of a link's bytes: the largest
// three, and how much the rest holds.
func mix(d *LinkLoad) string {
	var b strings.Builder
	rest := d.Bytes
	for i, p := range d.Parts {
		if i == 3 {
			fmt.Fprintf(&b, ", %d more %s", len(d.Parts)-i, percent(float64(rest)/float64(d.Bytes)))
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		name := p.GroupType
		if p.Op != p.GroupType { // "none none" says it once
			name += " " + p.Op
		}
		fmt.Fprintf(&b, "%s %s", name, percent(float64(p.Bytes)/float64(d.Bytes)))
		rest -= p.Bytes
	}
	return b.String()
}

// percent words a fraction as a whole percentage, "<1%" for a sliver.
func percent(f float64) string {
	switch {
	case math.IsNaN(f):
		return "-"
	case f > 0 && f < 0.005:
		return "<1%"
	}
	return strconv.FormatFloat(f*100, 'f', 0, 64) + "%"
}

// tierOrder sorts tiers from the host side to the top of the fabric: by
// the higher of the two roles' tiers, then the lower, the way up before
// the way down, then by name. Roles pkg/topo does not know come last.
func tierOrder(a, b *TierLoad) int {
	level := func(role string) int {
		if t, ok := topo.RoleTier(role); ok {
			return t
		}
		return math.MaxInt32
	}
	key := func(t *TierLoad) (hi, lo, down int) {
		s, d := level(t.SrcRole), level(t.DstRole)
		if s > d {
			down = 1
		}
		return max(s, d), min(s, d), down
	}
	ah, al, ad := key(a)
	bh, bl, bd := key(b)
	return cmp.Or(cmp.Compare(ah, bh), cmp.Compare(al, bl), cmp.Compare(ad, bd), strings.Compare(a.Tier, b.Tier))
}

// groupOrder puts the group types in one order everywhere: TP, EP, PP,
// DP, DP_EP, the others by name, then none.
func groupOrder(a, b string) int {
	rank := func(g string) int {
		switch g {
		case "TP":
			return 0
		case "EP":
			return 1
		case "PP":
			return 2
		case "DP":
			return 3
		case "DP_EP":
			return 4
		case links.None:
			return 6
		}
		return 5
	}
	return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a, b))
}

// tierLoads sums the directed links per tier and group type.
func tierLoads(dirs []*LinkLoad) []TierLoad {
	type tierAgg struct {
		all    TierLoad
		kinds  []string
		groups map[string]*TierLoad
	}
	tiers := map[string]*tierAgg{}
	var order []*tierAgg
	for _, d := range dirs {
		t := tiers[d.Tier]
		if t == nil {
			t = &tierAgg{all: TierLoad{Tier: d.Tier, SrcRole: d.SrcRole, DstRole: d.DstRole, GroupType: GroupAll},
				groups: map[string]*TierLoad{}}
			tiers[d.Tier] = t
			order = append(order, t)
		}
		if !slices.Contains(t.kinds, d.Kind) {
			t.kinds = append(t.kinds, d.Kind)
		}
		add := func(l *TierLoad, bytes, busy int64, u float64) {
			l.Links++
			l.Bytes += bytes
			l.BusyNs += busy
			l.UtilMean += u // a sum until divided below
			l.UtilMax = max(l.UtilMax, u)
		}
		add(&t.all, d.Bytes, d.BusyNs, d.Utilization)
		type sum struct {
			bytes, busy int64
			u           float64
		}
		per := map[string]*sum{}
		for _, p := range d.Parts {
			s := per[p.GroupType]
			if s == nil {
				s = &sum{}
				per[p.GroupType] = s
			}
			s.bytes += p.Bytes
			s.busy += p.BusyNs
			s.u += p.Utilization
		}
		for g, s := range per {
			l := t.groups[g]
			if l == nil {
				l = &TierLoad{Tier: d.Tier, SrcRole: d.SrcRole, DstRole: d.DstRole, GroupType: g}
				t.groups[g] = l
			}
			add(l, s.bytes, s.busy, s.u)
		}
	}
	slices.SortFunc(order, func(a, b *tierAgg) int { return tierOrder(&a.all, &b.all) })
	var out []TierLoad
	for _, t := range order {
		slices.Sort(t.kinds)
		kind := strings.Join(t.kinds, "+")
		n := float64(t.all.Links)
		t.all.Kind, t.all.Share, t.all.UtilTierMean = kind, 1, t.all.UtilMean/n
		t.all.UtilMean /= n
		out = append(out, t.all)
		var gs []string
		for g := range t.groups {
			gs = append(gs, g)
		}
		slices.SortFunc(gs, groupOrder)
		for _, g := range gs {
			l := t.groups[g]
			l.Kind = kind
			l.Share = float64(l.Bytes) / float64(t.all.Bytes)
			l.UtilTierMean = l.UtilMean / n
			l.UtilMean /= float64(l.Links)
			out = append(out, *l)
		}
	}
	return out
}

// DataTable returns the tiers, top or jobs table.
func (ll *LinkLoads) DataTable(name string) (*DataTable, error) {
	dt, err := ll.dataTable(name)
	if err != nil || ll.FailedFlows == 0 {
		return dt, err
	}
	// A failed run's table says so on every row, as a flow trace's
	// partial tables do.
	for _, c := range []struct {
		name string
		v    int64
	}{{"failed_flows", ll.FailedFlows}, {"undelivered_bytes", ll.UndeliveredBytes}} {
		if err := dt.AddParam(c.name, strconv.FormatInt(c.v, 10)); err != nil {
			return nil, err
		}
	}
	return dt, nil
}

func (ll *LinkLoads) dataTable(name string) (*DataTable, error) {
	switch name {
	case TableTiers:
		return newDataTable(ll.Source, ll.Tiers), nil
	case TableTop:
		dt := newDataTable(ll.Source, ll.Top)
		if slices.ContainsFunc(ll.Top, func(l LinkLoad) bool { return len(l.Jobs) > 0 }) {
			// A file of several jobs: which jobs each link carried, and how
			// many ("+"-joined, as a tier's kinds).
			names, counts := make([]cell, len(ll.Top)), make([]cell, len(ll.Top))
			for i, l := range ll.Top {
				names[i], counts[i] = cell{s: strings.Join(l.Jobs, "+")}, cell{i: int64(len(l.Jobs))}
			}
			dt.addColumn("jobs", reflect.String, names)
			dt.addColumn("n_jobs", reflect.Int64, counts)
		}
		return dt, nil
	case TableJobs:
		if len(ll.JobTiers) == 0 {
			return nil, fmt.Errorf("%s has no jobs (its job column is empty): no table %s", ll.Source, TableJobs)
		}
		return newDataTable(ll.Source, ll.JobTiers), nil
	}
	return nil, fmt.Errorf("the link-load report has the tables tiers, top and jobs, not %q", name)
}

// Human units of the report: the unit units.SizeScale and TimeScale pick
// (as every plot's axes), to three significant digits, utilization in
// percent.
func humanBytes(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	sc := units.SizeScale(float64(n))
	return sig3(float64(n)/sc.Div) + " " + sc.Unit
}

func sig3(v float64) string {
	switch {
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case v < 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

func pct(u float64) string { return numf(Num(u*100), 2) }

func humanNs(ns int64) string {
	sc := units.TimeScale(float64(ns))
	return sig3(float64(ns)/sc.Div) + " " + sc.Unit
}

// headline is the one-line description of the report.
func (ll *LinkLoads) headline() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: link loads of %s, %s routing, %s granularity", ll.Source, ll.Backend, ll.Routing, ll.Granularity)
	if t := ll.Topology; t.Family != "" {
		fmt.Fprintf(&b, ", %s %d GPUs", t.Family, t.GPUs)
	}
	fmt.Fprintf(&b, ": makespan %s, %d directed links carried %s (%d rows)", humanNs(ll.MakespanNs), ll.Links, humanBytes(ll.Bytes), ll.Rows)
	if ll.FailedFlows > 0 {
		b.WriteString("; " + ll.failedNote())
	}
	return b.String()
}

// failedNote says that the run failed, for every report of it.
func (ll *LinkLoads) failedNote() string {
	return fmt.Sprintf("FAILED: %d flows were not delivered (%s never delivered; failed links left them no path): these are the loads of what moved",
		ll.FailedFlows, humanBytes(ll.UndeliveredBytes))
}

// Title names the backend, routing and makespan, as the plot's title.
func (ll *LinkLoads) Title() string {
	s := fmt.Sprintf("Link loads: %s, %s routing, makespan %s", ll.Backend, ll.Routing, humanNs(ll.MakespanNs))
	if t := ll.Topology; t.Family != "" {
		s += fmt.Sprintf(" (%s, %d GPUs)", t.Family, t.GPUs)
	}
	if ll.FailedFlows > 0 {
		s = "FAILED run: " + s // the count is in the report's headline: a longer title is cut
	}
	return s
}

func (ll *LinkLoads) tables() []*textTable {
	t := &textTable{
		title: "Load per tier, host side first (directed links carrying bytes; utilization = busy time / makespan, mean and max over those links)",
		head:  []string{"tier", "kind", "group", "links", "bytes", "share", "util mean %", "util max %"},
		align: "lllrrrrr",
	}
	for i := 0; i < len(ll.Tiers); {
		all := ll.Tiers[i]
		j := i + 1
		for j < len(ll.Tiers) && ll.Tiers[j].GroupType != GroupAll {
			j++
		}
		groups := ll.Tiers[i+1 : j]
		i = j
		if len(groups) == 1 { // a tier of one group type: one row says it
			all.GroupType, groups = groups[0].GroupType, nil
		}
		t.rows = append(t.rows, []string{all.Tier, all.Kind, all.GroupType, count(all.Links), humanBytes(all.Bytes), "", pct(all.UtilMean), pct(all.UtilMax)})
		for _, l := range groups {
			t.rows = append(t.rows, []string{"", "", "  " + l.GroupType, count(l.Links), humanBytes(l.Bytes), percent(l.Share), pct(l.UtilMean), pct(l.UtilMax)})
		}
	}
	h := &textTable{
		title: fmt.Sprintf("Hottest directed links (%d of %d)", len(ll.Top), ll.Links),
		head:  []string{"#", "tier", "link", "from -> to", "bandwidth", "bytes", "util %", "made of"},
		align: "rlrlrrrl",
	}
	for i := range ll.Top {
		l := &ll.Top[i]
		made := l.Mix
		if j := l.JobsText(); j != "" {
			made += "; " + j
		}
		h.rows = append(h.rows, []string{count(i + 1), l.Tier, count(l.Link), l.Label(), gbpsBW(l.BWbps), humanBytes(l.Bytes), pct(l.Utilization), made})
	}
	if jt := ll.jobTable(); jt != nil {
		return []*textTable{t, h, jt}
	}
	return []*textTable{t, h}
}

// gbpsBW words a link bandwidth in Gbps.
func gbpsBW(bps float64) string {
	return strconv.FormatFloat(bps/1e9, 'f', -1, 64) + " Gbps"
}

// WriteText writes the report for a terminal.
func (ll *LinkLoads) WriteText(w io.Writer) {
	fmt.Fprintln(w, ll.headline())
	fmt.Fprintln(w)
	for _, t := range ll.tables() {
		t.writeText(w)
	}
}

// WriteMarkdown writes the report as GitHub-flavoured Markdown.
func (ll *LinkLoads) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "## %s\n\n", mdEscape(ll.headline()))
	for _, t := range ll.tables() {
		t.writeMarkdown(w)
	}
}
