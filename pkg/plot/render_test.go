package plot

import (
	"bytes"
	"html"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/links"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/pkg/stats"
	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// renderSVG draws plots as fctstats writes them and returns the SVG's
// text, which holds every title, tick label and legend entry.
func renderSVG(t *testing.T, plots []*gplot.Plot) string {
	t.Helper()
	heights := make([]vg.Length, len(plots))
	for i := range heights {
		heights[i] = vg.Inch * 4
	}
	var b bytes.Buffer
	if err := Write(&b, "svg", plots, heights); err != nil {
		t.Fatal(err)
	}
	return html.UnescapeString(b.String())
}

// svgTexts are the strings an SVG draws.
func svgTexts(svg string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<text[^>]*>([^<]*)</text>`).FindAllStringSubmatch(svg, -1) {
		out = append(out, m[1])
	}
	return out
}

// checkTexts fails for each of want the SVG does not draw, and for every
// number drawn with trailing zeros ("2500.00") or with more than five
// digits before the point ("3000000": a raw unit).
func checkTexts(t *testing.T, name, svg string, want ...string) {
	t.Helper()
	texts := svgTexts(svg)
	for _, w := range want {
		found := false
		for _, s := range texts {
			found = found || s == w
		}
		if !found {
			t.Errorf("%s: no text %q in %q", name, w, texts)
		}
	}
	raw := regexp.MustCompile(`^-?(\d+\.\d*0|\d{6,}(\.\d+)?)$`)
	for _, s := range texts {
		if raw.MatchString(s) {
			t.Errorf("%s: tick label %q is not in a human unit", name, s)
		}
	}
}

// labelled counts a ticker's labelled ticks over [lo, hi].
func labelled(tk gplot.Ticker, lo, hi float64) []string {
	var out []string
	for _, x := range tk.Ticks(lo, hi) {
		if x.Label != "" {
			out = append(out, x.Label)
		}
	}
	return out
}

func TestHumanTicks(t *testing.T) {
	// A chunk sweep's 22.5 ms in ns: whole milliseconds, not "22500000.00".
	if got := labelled(humanTicks{1e6}, 0, 22.5e6); strings.Join(got, " ") != "0 5 10 15 20" {
		t.Errorf("ticks over 0-22.5 ms: %q", got)
	}
	// A plateau from 0 to 370 GB/s gets more than gonum's three labels.
	if got := labelled(humanTicks{1}, 0, 370); len(got) < 4 {
		t.Errorf("ticks over 0-370: %q, want at least 4", got)
	}
	if got := labelled(intTicks{}, -0.5, 1.5); strings.Join(got, " ") != "0 1" {
		t.Errorf("rank ticks over 2 ranks: %q", got)
	}
}

func TestCDFAndTimelineRender(t *testing.T) {
	run := analyzeBytes(t, encode(t, handTrace(), trace.ArrowStream), "hand", true)
	tl := Timeline(run, "timeline")
	svg := renderSVG(t, []*gplot.Plot{CDF("cdf", run.SlowdownSeries()), tl})
	checkTexts(t, "cdf+timeline", svg, "slowdown (FCT / ideal FCT, ratio)", "fraction of flows with a smaller slowdown",
		"all (23)", "NET (22)", "P2P (1)", "time (us)", "source node (GPU id = rank)", "DELAY", "NET", "P2P", "0", "3")
	// Sources 0-3: the y axis is theirs, with no headroom above.
	if tl.Y.Min != -0.5 || tl.Y.Max != 3.5 {
		t.Errorf("timeline y axis %v to %v, want -0.5 to 3.5 for nodes 0-3", tl.Y.Min, tl.Y.Max)
	}
}

func TestIterationPlotRender(t *testing.T) {
	it := handIteration(t, stats.IterationOptions{KeepSegments: true})
	p := Iteration(it, "iteration")
	svg := renderSVG(t, []*gplot.Plot{p})
	// 2 ranks x 400 us: TP 120 us (15%), EP 100 us (12.5%), DP 140 us.
	checkTexts(t, "iteration", svg, "time (us)", "rank", "exposed TP 15.0%", "exposed EP 12.5%", "exposed DP 17.5%", "bubble 10.0%")
	if p.Y.Max-p.Y.Min != 2 {
		t.Errorf("y axis %v to %v: two rows want a span of 2", p.Y.Min, p.Y.Max)
	}
}

func TestSweepPlotsRender(t *testing.T) {
	files := map[string]string{
		"a.csv": "case,chunk_bytes,time_ns,wall_s,uplink_mean\nalltoall/ecmp,4096,22500000,12.5,1.12\n",
		"b.csv": "case,chunk_bytes,time_ns,wall_s,uplink_mean\nalltoall/spray,1048576,21150000,30,1.00\n",
	}
	dt, err := stats.ConcatCSV([]string{"a.csv", "b.csv"}, csvFiles(files))
	if err != nil {
		t.Fatal(err)
	}
	plots, err := Sweep(dt, "chunk_bytes", []string{"time_ns", "wall_s"})
	if err != nil {
		t.Fatal(err)
	}
	checkTexts(t, "sweep", renderSVG(t, plots), "time against chunk size", "time (ms)", "wall (s)", "chunk size", "4KiB", "1MiB")
	plots, err = Sweep(dt, "case", []string{"time_ns", "uplink_mean"})
	if err != nil {
		t.Fatal(err)
	}
	checkTexts(t, "routing", renderSVG(t, plots), "time (ms)", "uplink mean", "case", "alltoall/ecmp", "alltoall/spray")
	// 1.00 to 1.12 from 0 would hide the difference; and no dot at the
	// frame (the old last bar was cut in half).
	if u := plots[1]; u.Y.Min < 0.9 || u.Y.Max > 1.2 || u.X.Min != -0.5 || u.X.Max != 1.5 {
		t.Errorf("uplink panel y %v-%v x %v-%v, want y fitted to 1.00-1.12 and x -0.5-1.5", u.Y.Min, u.Y.Max, u.X.Min, u.X.Max)
	}
	// Two workloads: a panel each, so the AllToAll's 6% is not lost on
	// an axis that also holds the AllReduce's much longer time.
	files["c.csv"] = "case,chunk_bytes,time_ns,wall_s,uplink_mean\nallreduce/ecmp,4096,90000000,1,1\n"
	if dt, err = stats.ConcatCSV([]string{"a.csv", "b.csv", "c.csv"}, csvFiles(files)); err != nil {
		t.Fatal(err)
	}
	if plots, err = Sweep(dt, "case", []string{"time_ns"}); err != nil || len(plots) != 2 {
		t.Fatalf("%d panels (%v), want one per workload", len(plots), err)
	}
	checkTexts(t, "routing by workload", renderSVG(t, plots), "time by case: alltoall (axis not from 0)", "time by case: allreduce (axis not from 0)", "ecmp", "spray")
	if a := plots[0]; a.Y.Min < 20e6 {
		t.Errorf("alltoall panel from %v ns: want it fitted to 21.15-22.5 ms", a.Y.Min)
	}
}

func TestLatencyAndBusbwRender(t *testing.T) {
	curves := []stats.Curve{
		{Name: "hf", BinNs: 100000, Ms: []float64{0.05, 0.15, 0.25}, Us: []float64{3, 4, 5}},
		{Name: "hybrid", BinNs: 100000, Ms: []float64{0.05, 0.15, 0.25}, Us: []float64{3, 4.5, 5.5}},
	}
	p := LatencyCurves("Latency curves", curves, 100000, 200000, "surrogate 100us:200us")
	checkTexts(t, "latency", renderSVG(t, []*gplot.Plot{p}), "hf", "hybrid", "surrogate 100us:200us",
		"mean latency of the flows delivered (us)", "time (us), bins of 100us")
	rows := []stats.NCCLTestsRow{{SizeBytes: 1 << 10, BusbwGBps: 10}, {SizeBytes: 1 << 20, BusbwGBps: 200}, {SizeBytes: 1 << 30, BusbwGBps: 370}}
	b := Busbw("busbw", []BusbwSeries{{Name: "flowsim-analytical", Rows: rows}})
	checkTexts(t, "busbw", renderSVG(t, []*gplot.Plot{b}), "bus bandwidth (GB/s)", "message size", "1MiB", "256MiB", "flowsim-analytical")
	if got := labelled(b.Y.Tick.Marker, b.Y.Min, b.Y.Max); len(got) < 4 {
		t.Errorf("busbw y ticks %q, want at least 4", got)
	}
}

// Timelines of runs of different lengths share one axis and one unit.
func TestShareTimeAxis(t *testing.T) {
	short := analyzeBytes(t, encode(t, handTrace(), trace.ArrowStream), "short", true)
	rows := handTrace()
	for i := range rows {
		rows[i].StartNs, rows[i].EndNs = rows[i].StartNs*100, rows[i].EndNs*100 // 3 ms
	}
	long := analyzeBytes(t, encode(t, rows, trace.ArrowStream), "long", true)
	a, b := Timeline(short, "short"), Timeline(long, "long")
	if a.X.Label.Text != "time (us)" || b.X.Label.Text != "time (ms)" {
		t.Fatalf("units before sharing: %q, %q", a.X.Label.Text, b.X.Label.Text)
	}
	ShareTimeAxis([]*gplot.Plot{a, b})
	if a.X.Label.Text != "time (ms)" || a.X.Max != b.X.Max || a.X.Min != b.X.Min {
		t.Errorf("shared axis: %q %v-%v against %q %v-%v", a.X.Label.Text, a.X.Min, a.X.Max, b.X.Label.Text, b.X.Min, b.X.Max)
	}
}

func TestPlots(t *testing.T) {
	run := analyzeBytes(t, encode(t, handTrace(), trace.ArrowStream), "hand", true)
	plots := []*gplot.Plot{CDF("cdf", run.SlowdownSeries()), Timeline(run, "timeline")}
	for _, format := range []string{"png", "svg"} {
		var b bytes.Buffer
		if err := Write(&b, format, plots, []vg.Length{vg.Inch * 4, TimelineHeight(run)}); err != nil {
			t.Fatal(err)
		}
		head := map[string]string{"png": "\x89PNG", "svg": "<?xml"}[format]
		if !bytes.HasPrefix(b.Bytes(), []byte(head)) || b.Len() < 1000 {
			t.Errorf("%s: %d bytes starting %q", format, b.Len(), b.Bytes()[:min(8, b.Len())])
		}
	}
	// Nothing to plot is still a picture, not an error.
	var b bytes.Buffer
	if err := Write(&b, "png", []*gplot.Plot{CDF("empty", nil)}, []vg.Length{vg.Inch * 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := Format("x.pdf"); err == nil {
		t.Error("pdf accepted")
	}
}

// The plot draws both panels with their axis titles, units and legends.
func TestLinkPlot(t *testing.T) {
	m, rows := twoTier()
	rows = append(rows, links.Row{Link: 9, Src: 1, Dst: 4, SrcRole: "gpu", DstRole: "edge", Tier: "gpu-edge", Kind: "nic",
		BWbps: 100e9, GroupType: links.None, Op: links.None, Bytes: 1000, BusyNs: 80, Utilization: 80e-6})
	ll := stats.AnalyzeLinks("two.parquet", m, rows, 10)
	plots, heights := Links(ll)
	var svg bytes.Buffer
	if err := Write(&svg, "svg", plots, heights); err != nil {
		t.Fatal(err)
	}
	out := html.UnescapeString(svg.String())
	for _, s := range []string{
		"Link loads: analytical-fluid, ecmp routing, makespan 1.00 ms (fat-tree, 4 GPUs)",
		"link utilization (%), mean over the tier's loaded links",
		"tier (role the bytes leave - role they enter), host side first",
		"DP (mean)", "EP (mean)", "no group (mean)", "max (most utilized link)",
		"gpu-edge", "edge-agg", "agg-edge", "edge-gpu",
		"Hottest directed links", "link utilization (%) over the run",
		"edge 4 -> agg 6", "gpu 0 -> edge 4",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("SVG lacks %q", s)
		}
	}
	var png bytes.Buffer
	if err := Write(&png, "png", plots, heights); err != nil || !bytes.HasPrefix(png.Bytes(), []byte("\x89PNG")) {
		t.Errorf("PNG: %v", err)
	}
	// Jobs: a third panel, the heat map of each job's part of each tier.
	for i := range rows {
		rows[i].Job = map[string]string{"DP": "a", "EP": "b"}[rows[i].GroupType]
	}
	plots, _ = Links(stats.AnalyzeLinks("jobs.parquet", m, rows, 10))
	if len(plots) != 3 {
		t.Fatalf("%d panels for a file of jobs, want 3", len(plots))
	}
	svgJobs := renderSVG(t, plots[2:])
	checkTexts(t, "job heat map", svgJobs, "Link utilization by job and tier (%: the job's part of the tier's mean over its loaded links)",
		"job", "a", "b", "gpu-edge", "edge-agg", "8.0%", "1.0%", "10.0%", "5.0%", "20.0%") // gpu-edge: 5 loaded links with the no-group one
	// No rows: both panels say so rather than fail.
	empty := stats.AnalyzeLinks("none.parquet", m, nil, 10)
	plots, heights = Links(empty)
	if err := Write(&svg, "svg", plots, heights); err != nil {
		t.Fatal(err)
	}
}

// Sweep draws a panel per y column; a text x gives dots, one per row,
// labelled with the row's value.
func TestSweepPlots(t *testing.T) {
	files := map[string]string{
		"a.csv": "source,time_ns,busbw_gbps,chunk_bytes,label\nx.parquet,100,1.5,8192,ring\n",
		"b.csv": "source,time_ns,busbw_gbps,chunk_bytes,label\ny.parquet,50,,16384,3\n",
	}
	dt, err := stats.ConcatCSV([]string{"a.csv", "b.csv"}, csvFiles(files))
	if err != nil {
		t.Fatal(err)
	}
	if err := dt.AddParam("rate", "0.5"); err != nil {
		t.Fatal(err)
	}
	if plots, err := Sweep(dt, "chunk_bytes", []string{"time_ns", "rate"}); err != nil || len(plots) != 2 {
		t.Fatalf("plots: %v", err)
	}
	// A text x gives dots, one per row, labelled with the row's value.
	plots, err := Sweep(dt, "label", []string{"time_ns"})
	if err != nil || len(plots) != 1 {
		t.Fatalf("bars: %v", err)
	}
	var labels []string
	for _, tk := range plots[0].X.Tick.Marker.Ticks(0, 1) {
		labels = append(labels, tk.Label)
	}
	if !reflect.DeepEqual(labels, []string{"ring", "3"}) {
		t.Fatalf("bar labels %q, want the rows' labels in order", labels)
	}
	if _, err := Sweep(dt, "label", []string{"source"}); err == nil {
		t.Fatal("bars of a text column")
	}
}

// A sweep's panels name the collective its points share (the chunk-sweep
// pipeline's titles said only "AllReduce time against chunk size"); what
// varies between points, or is missing, is left out.
func TestRunTitle(t *testing.T) {
	const head = "source,op,algorithm,group_type,coll_size_bytes,nranks,time_ns,chunk_bytes\n"
	for _, c := range []struct{ a, b, want string }{
		{"x,allreduce,msccl,TP,33554432,8,24871848,8192\n", "y,allreduce,msccl,TP,33554432,8,1026020,262144\n", "allreduce msccl TP 32MiB, 8 ranks"},
		{"x,allreduce,ring,DP,1024,16,10,1\n", "y,allreduce,tree,DP,4096,16,20,2\n", "allreduce DP, 16 ranks"},
		{"x,allgather,ring,TP,1024,8,10,1\n", "y,allreduce,ring,TP,1024,4,20,2\n", "ring TP 1KiB"},
	} {
		dt, err := stats.ConcatCSV([]string{"a.csv", "b.csv"}, csvFiles(map[string]string{"a.csv": head + c.a, "b.csv": head + c.b}))
		if err != nil {
			t.Fatal(err)
		}
		if got := RunTitle(dt); got != c.want {
			t.Errorf("%q %q: %q, want %q", c.a, c.b, got, c.want)
		}
	}
	dt, err := stats.ConcatCSV([]string{"a.csv"}, csvFiles(map[string]string{"a.csv": "chunk_bytes,time_ns\n1,2\n"}))
	if err != nil || RunTitle(dt) != "" {
		t.Errorf("no collective columns: %q, %v", RunTitle(dt), err)
	}
}

// A log axis of under three decades labels 2 and 5 x 10^k besides the
// powers of ten (a slowdown CDF from 1 to 20 was labelled "1" and "10"
// alone); a wider one keeps the powers of ten only.
func TestLogTicksLabels(t *testing.T) {
	labels := func(lo, hi float64) []string {
		var out []string
		for _, tk := range (logTicks{}).Ticks(lo, hi) {
			if tk.Label != "" && tk.Value >= lo && tk.Value <= hi { // the axis shows those
				out = append(out, tk.Label)
			}
		}
		return out
	}
	if got, want := labels(0.95, 40), []string{"1", "2", "5", "10", "20"}; !reflect.DeepEqual(got, want) {
		t.Errorf("0.95 to 40: labels %q, want %q", got, want)
	}
	if got, want := labels(1.2, 300), []string{"2", "5", "10", "20", "50", "100", "200"}; !reflect.DeepEqual(got, want) {
		t.Errorf("1.2 to 300: labels %q, want %q", got, want)
	}
	if got := labels(1, 1e5); slices.Contains(got, "2") || !slices.Contains(got, "1000") {
		t.Errorf("1 to 1e5: labels %q, want the powers of ten alone", got)
	}
}
