package plot

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strings"

	"github.com/fabricsim/fabricsim/pkg/stats"
	"github.com/fabricsim/fabricsim/pkg/units"
	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Sweep draws each y column against column x, one panel per y
// column, points joined in x order; x is on a log2 axis when it is
// positive and spans a factor of 8 or more (chunk and message sizes). A
// text column x (a routing, a workload) gives dots instead, one per row in
// table order, labelled with its value, on an axis fitted to them so
// that differences of a few percent show. Axes are titled from the
// column names, in the unit their suffix names (_ns, _us, _ms, _s,
// _bytes) scaled to the data; "COLUMN=TITLE" names a column for people
// ("time_ns=AllReduce time"), its unit still from the suffix.
func Sweep(dt *stats.DataTable, x string, ys []string) ([]*gplot.Plot, error) {
	titles := map[string]string{}
	x = cutTitle(x, titles)
	ys = slices.Clone(ys)
	for i := range ys {
		ys[i] = cutTitle(ys[i], titles)
	}
	if dt.IsText(x) {
		return dotPlots(dt, x, ys, titles)
	}
	xs, err := dt.Column(x)
	if err != nil {
		return nil, fmt.Errorf("--x: %v", err)
	}
	logX := len(xs) > 0 && slices.Min(xs) > 0 && slices.Max(xs) >= 8*slices.Min(xs)
	xq, xm := columnQuantity(x, titles)
	if strings.HasSuffix(x, "_bytes") && titles[x] == "" {
		xq += " size" // "chunk size", not "chunk"
	}
	var plots []*gplot.Plot
	for i, y := range ys {
		vs, err := dt.Column(y)
		if err != nil {
			return nil, fmt.Errorf("--y: %v", err)
		}
		yq, ym := columnQuantity(y, titles)
		pts := make(plotter.XYs, 0, len(xs))
		for k := range xs {
			if !math.IsNaN(vs[k]) && !math.IsInf(vs[k], 0) {
				pts = append(pts, plotter.XY{X: xs[k] * xm, Y: vs[k] * ym})
			}
		}
		slices.SortStableFunc(pts, func(a, b plotter.XY) int { return cmpFloat(a.X, b.X) })
		p := gplot.New()
		p.Title.Text = yq + " against " + xq
		_, hi := extent(pts, func(q plotter.XY) float64 { return q.X })
		columnAxis(&p.X, x, titles, hi)
		if logX {
			// Powers of two, labelled as sizes ("4KiB") or plainly.
			p.X.Scale = gplot.LogScale{}
			p.X.Tick.Marker = gplot.LogTicks{Prec: -1}
			if strings.HasSuffix(x, "_bytes") {
				p.X.Label.Text = xq
				p.X.Tick.Marker = sizeTicks{}
			}
		}
		ylo, yhi := extent(pts, func(q plotter.XY) float64 { return q.Y })
		columnAxis(&p.Y, y, titles, yhi)
		fitAxis(&p.Y, ylo, yhi)
		p.Add(plotter.NewGrid())
		if len(pts) > 0 {
			l, sc, err := plotter.NewLinePoints(pts)
			if err != nil {
				return nil, fmt.Errorf("--y %s: %v", y, err)
			}
			c := okabeItoAt(i)
			l.Color, sc.Color = c, c
			l.Width = vg.Points(1.5)
			sc.Shape = draw.CircleGlyph{}
			sc.Radius = vg.Points(2.5)
			p.Add(l, sc)
		}
		plots = append(plots, p)
	}
	return plots, nil
}

// extent is the smallest and largest of f over pts (+Inf, -Inf if none).
func extent(pts plotter.XYs, f func(plotter.XY) float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, q := range pts {
		lo, hi = min(lo, f(q)), max(hi, f(q))
	}
	return lo, hi
}

// columnUnits are the unit suffixes of table columns: what the values
// are multiplied by to reach the axis' raw unit (ns, bytes).
var columnUnits = []struct {
	suffix string
	time   bool
	mul    float64
}{
	{"_ns", true, 1}, {"_us", true, 1e3}, {"_ms", true, 1e6}, {"_s", true, 1e9},
	{"_bytes", false, 1},
}

// cutTitle splits "COLUMN=TITLE" into titles and returns the column.
func cutTitle(spec string, titles map[string]string) string {
	col, title, ok := strings.Cut(spec, "=")
	if ok && title != "" {
		titles[col] = title
	}
	return col
}

// columnQuantity is a column's name for people: its title, else its name
// without its unit suffix ("time_mean_ns": "time mean"); and the factor
// to the axis' raw unit.
func columnQuantity(name string, titles map[string]string) (string, float64) {
	for _, u := range columnUnits {
		if q, ok := strings.CutSuffix(name, u.suffix); ok && q != "" {
			return cmp.Or(titles[name], strings.ReplaceAll(q, "_", " ")), u.mul
		}
	}
	return cmp.Or(titles[name], strings.ReplaceAll(name, "_", " ")), 1
}

// columnAxis titles ax for a column and labels its ticks in the unit its
// suffix and values up to hi (already in the raw unit) call for.
func columnAxis(ax *gplot.Axis, name string, titles map[string]string, hi float64) {
	q, _ := columnQuantity(name, titles)
	for _, u := range columnUnits {
		if strings.HasSuffix(name, u.suffix) && len(name) > len(u.suffix) {
			if u.time {
				timeAxis(ax, q, hi)
			} else {
				sizeAxis(ax, q, hi)
			}
			return
		}
	}
	plainAxis(ax, q, "")
}

// dotPlots draws each y column as dots over text column x, one per row:
// dots, not bars, because the axis does not start at 0 when the values
// differ by a few percent. When every label is "group/name" (a workload
// and a routing) and there are several groups, each group gets its own
// panel: their values (an AllToAll's time and an AllReduce's) differ too
// much to share an axis fitted to either.
func dotPlots(dt *stats.DataTable, x string, ys []string, titles map[string]string) ([]*gplot.Plot, error) {
	labels := dt.Strings(x)
	groups, of := labelGroups(labels)
	xname, _ := columnQuantity(x, titles)
	var plots []*gplot.Plot
	for i, y := range ys {
		vs, err := dt.Column(y)
		if err != nil {
			return nil, fmt.Errorf("--y: %v", err)
		}
		yq, ym := columnQuantity(y, titles)
		for _, g := range groups {
			var names []string
			var pts plotter.XYs
			for k, v := range vs {
				if of[k] != g {
					continue
				}
				name := labels[k]
				if g != "" {
					name = strings.TrimPrefix(name, g+"/")
				}
				if !math.IsNaN(v) && !math.IsInf(v, 0) {
					pts = append(pts, plotter.XY{X: float64(len(names)), Y: v * ym})
				}
				names = append(names, name)
			}
			title := yq + " by " + xname
			if g != "" {
				title += ": " + g
			}
			p, err := dotPanel(title, xname, y, titles, names, pts, okabeItoAt(i))
			if err != nil {
				return nil, fmt.Errorf("--y %s: %v", y, err)
			}
			plots = append(plots, p)
		}
	}
	return plots, nil
}

// labelGroups splits "group/name" labels by group, in order of first
// appearance; with fewer than two groups, one group "" holds every label.
func labelGroups(labels []string) (groups []string, of []string) {
	of = make([]string, len(labels))
	for i, l := range labels {
		g, _, ok := strings.Cut(l, "/")
		if !ok {
			return []string{""}, make([]string, len(labels))
		}
		of[i] = g
		if !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	if len(groups) < 2 {
		return []string{""}, make([]string, len(labels))
	}
	return groups, of
}

// dotPanel is one panel of dotPlots: a dot per name, y column y.
func dotPanel(title, xname, y string, titles map[string]string, names []string, pts plotter.XYs, c color.Color) (*gplot.Plot, error) {
	p := gplot.New()
	p.Title.Text = title
	p.X.Label.Text = xname
	lo, hi := extent(pts, func(q plotter.XY) float64 { return q.Y })
	columnAxis(&p.Y, y, titles, hi)
	if !fitAxis(&p.Y, lo, hi) {
		p.Title.Text += " (axis not from 0)"
	}
	p.Add(plotter.NewGrid())
	if len(pts) > 0 {
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, err
		}
		sc.Color = c
		sc.Shape = draw.CircleGlyph{}
		sc.Radius = vg.Points(4)
		p.Add(sc)
	}
	p.NominalX(names...)
	// Half a slot either side: no dot or label against the frame.
	p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign = draw.XRight
	return p, nil
}

// RunTitle names the run a sweep table's rows share, for its panels'
// titles: the collective columns (fctstats' collectives table) that hold
// one value in every row, e.g. "allreduce msccl TP 32MiB, 8 ranks". A
// sweep's titles said only "time against chunk size", not of what. It
// is "" when no such column is constant (or the table has none).
func RunTitle(dt *stats.DataTable) string {
	var parts []string
	for _, col := range []string{"op", "algorithm", "group_type"} {
		if v := dt.Strings(col); allSame(v) && v[0] != "" {
			parts = append(parts, v[0])
		}
	}
	if v, ok := constant(dt, "coll_size_bytes"); ok {
		parts = append(parts, units.HumanSize(int64(v)))
	}
	title := strings.Join(parts, " ")
	if v, ok := constant(dt, "nranks"); ok {
		title = strings.TrimPrefix(fmt.Sprintf("%s, %d ranks", title, int64(v)), ", ")
	}
	return title
}

// constant is a numeric column's value when every row holds the same.
func constant(dt *stats.DataTable, col string) (float64, bool) {
	v, err := dt.Column(col)
	if err != nil || !allSame(v) {
		return 0, false
	}
	return v[0], true
}

// allSame tells whether v has values and all are its first.
func allSame[T comparable](v []T) bool {
	return len(v) > 0 && !slices.ContainsFunc(v, func(x T) bool { return x != v[0] })
}
