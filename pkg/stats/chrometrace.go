package stats

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/pkg/units"
)

// Chrome trace colours (catapult's reserved names, which Chrome's
// about:tracing honours; Perfetto colours by name instead).
var (
	computeColors = [4]string{"thread_state_running", "thread_state_runnable", "olive", "generic_work"}
	groupColors   = [6]string{"rail_load", "rail_animation", "thread_state_iowait", "rail_response", "terrible", "grey"}
)

// WriteChromeTrace writes the iteration as a Chrome / Perfetto trace
// (JSON object format): one process per rank; a compute track; per group
// type, collective tracks (a rank's span of each collective, lanes added
// where collectives of one type overlap, so slices on a track never
// overlap); flow tracks under them (each flow on its source rank, at most
// MaxChromeFlows in all); and a track showing the rank's exposed and
// bubble time. Times are µs, as the format wants. The iteration must come
// from AnalyzeIteration with KeepSpans and KeepSegments.
func (it *Iteration) WriteChromeTrace(w io.Writer) error {
	if it.spans == nil || it.segments == nil {
		return fmt.Errorf("chrome trace: the iteration was analysed without spans and segments")
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	t := &chromeWriter{w: bw, first: true}
	t.raw(`{"displayTimeUnit":"ns","otherData":{"source":`)
	t.str(it.Source)
	t.raw(`,"flows_capped_at":` + strconv.Itoa(MaxChromeFlows) + `},"traceEvents":[`)
	ranks := make([]int32, 0, len(it.Ranks))
	stage := map[int32]int32{}
	for _, r := range it.Ranks {
		ranks = append(ranks, r.Rank)
		stage[r.Rank] = r.Stage
	}
	// Flows by source rank.
	flows := map[int32][]*trace.Row{}
	for _, c := range it.colls {
		for i := range c.flows {
			f := &c.flows[i]
			flows[f.Src] = append(flows[f.Src], f)
		}
	}
	for _, r := range ranks {
		pid := int(r)
		name := "rank " + strconv.Itoa(int(r))
		if s := stage[r]; s >= 0 {
			name += " (stage " + strconv.Itoa(int(s)) + ")"
		}
		t.meta(pid, 0, "process_name", name)
		t.metaInt(pid, 0, "process_sort_index", pid)
		tid := 0
		track := func(name string) int {
			tid++
			t.meta(pid, tid, "thread_name", name)
			t.metaInt(pid, tid, "thread_sort_index", tid)
			return tid
		}
		// Compute.
		ct := track("compute")
		comp := slices.Clone(it.comp[r])
		slices.SortFunc(comp, func(x, y computeRow) int { return cmp.Compare(x.start, y.start) })
		for _, c := range comp {
			name := cmpStr(c.name, "compute")
			col := computeColors[3]
			if c.phase >= 0 {
				name += " " + [3]string{"fwd", "ig", "wg"}[c.phase]
				col = computeColors[c.phase]
			}
			if c.mb >= 0 {
				name += " mb" + strconv.Itoa(int(c.mb))
			}
			t.slice(pid, ct, name, "compute", col, c.start, c.end, func() {
				t.raw(`"layer":` + strconv.Itoa(int(c.layer)) + `,"microbatch":` + strconv.Itoa(int(c.mb)) +
					`,"collective_id":` + strconv.FormatInt(c.collectiveID, 10))
			})
		}
		// Waiting: exposed and bubble.
		wt := track("waiting")
		for _, s := range it.segments[r] {
			if s.Kind < SegExposedDP {
				continue
			}
			col := "white" // bubble
			if s.Kind != SegBubble {
				col = groupColors[s.Kind-SegExposedDP]
			}
			t.slice(pid, wt, SegmentNames[s.Kind], "waiting", col, s.StartNs, s.EndNs, nil)
		}
		// Collectives per group type, then their flows.
		spans := slices.Clone(it.spans[r])
		slices.SortFunc(spans, func(x, y rankSpan) int { return cmp.Or(cmp.Compare(x.start, y.start), cmp.Compare(x.coll, y.coll)) })
		fl := flows[r]
		slices.SortFunc(fl, func(x, y *trace.Row) int {
			return cmp.Or(cmp.Compare(x.StartNs, y.StartNs), cmp.Compare(x.FlowID, y.FlowID))
		})
		for gt := range int8(len(groupColors)) {
			gname := "other"
			if int(gt) < len(ExposedTypes) {
				gname = ExposedTypes[gt]
			}
			var lanes []int64 // end of the last slice per lane
			var tids []int
			for _, s := range spans {
				c := it.colls[s.coll]
				if c.gt != gt {
					continue
				}
				l := packLane(&lanes, s.start, s.end)
				if l == len(tids) {
					n := gname
					if l > 0 {
						n += " " + strconv.Itoa(l+1)
					}
					tids = append(tids, track(n))
				}
				name := c.op + " " + units.HumanSize(c.size)
				if c.layerName != "" {
					name = c.layerName + " " + c.phase + " " + name
				}
				t.slice(pid, tids[l], name, gname, groupColors[gt], s.start, s.end, func() {
					t.raw(`"collective_id":` + strconv.FormatInt(s.coll, 10) + `,"algorithm":`)
					t.str(c.algo)
					t.raw(`,"size_bytes":` + strconv.FormatInt(c.size, 10) + `,"nranks":` + strconv.Itoa(int(c.nranks)) +
						`,"layer":` + strconv.Itoa(int(c.layer)) + `,"microbatch":` + strconv.Itoa(int(c.microbatch)))
				})
			}
			lanes, tids = lanes[:0], tids[:0]
			for _, f := range fl {
				if groupIndex(f.GroupType) != gt {
					continue
				}
				l := packLane(&lanes, f.StartNs, f.EndNs)
				if l == len(tids) {
					tids = append(tids, track(gname+" flows "+strconv.Itoa(l+1)))
				}
				t.slice(pid, tids[l], f.ConnType+" "+strconv.Itoa(int(f.Src))+"→"+strconv.Itoa(int(f.Dst)), gname+" flow", groupColors[gt],
					f.StartNs, f.EndNs, func() {
						t.raw(`"flow_id":` + strconv.FormatInt(f.FlowID, 10) + `,"collective_id":` + strconv.FormatInt(f.CollectiveID, 10) +
							`,"size_bytes":` + strconv.FormatInt(f.SizeBytes, 10) + `,"channel":` + strconv.Itoa(int(f.Channel)) +
							`,"ideal_fct_ns":` + strconv.FormatInt(f.IdealFctNs, 10))
					})
			}
		}
	}
	t.raw("]}\n")
	if t.err != nil {
		return t.err
	}
	return bw.Flush()
}

// packLane puts [start, end) on the first lane free at start (greedy interval
// colouring: as few lanes as the deepest overlap needs) and returns it.
func packLane(lanes *[]int64, start, end int64) int {
	for i, last := range *lanes {
		if last <= start {
			(*lanes)[i] = end
			return i
		}
	}
	*lanes = append(*lanes, end)
	return len(*lanes) - 1
}

type chromeWriter struct {
	w     *bufio.Writer
	first bool
	err   error
}

func (t *chromeWriter) raw(s string) {
	if t.err == nil {
		_, t.err = t.w.WriteString(s)
	}
}

func (t *chromeWriter) str(s string) {
	b, _ := json.Marshal(s) // a string always marshals
	if t.err == nil {
		_, t.err = t.w.Write(b)
	}
}

func (t *chromeWriter) sep() {
	if !t.first {
		t.raw(",\n")
	}
	t.first = false
}

func (t *chromeWriter) meta(pid, tid int, what, name string) {
	t.sep()
	t.raw(`{"ph":"M","pid":` + strconv.Itoa(pid) + `,"tid":` + strconv.Itoa(tid) + `,"name":"` + what + `","args":{"name":`)
	t.str(name)
	t.raw("}}")
}

func (t *chromeWriter) metaInt(pid, tid int, what string, v int) {
	t.sep()
	t.raw(`{"ph":"M","pid":` + strconv.Itoa(pid) + `,"tid":` + strconv.Itoa(tid) + `,"name":"` + what +
		`","args":{"sort_index":` + strconv.Itoa(v) + "}}")
}

// usTime writes ns as µs with three decimals (exact).
func usTime(ns int64) string {
	return strconv.FormatFloat(float64(ns)/1e3, 'f', 3, 64)
}

func (t *chromeWriter) slice(pid, tid int, name, cat, color string, start, end int64, args func()) {
	t.sep()
	t.raw(`{"ph":"X","pid":` + strconv.Itoa(pid) + `,"tid":` + strconv.Itoa(tid) + `,"ts":` + usTime(start) +
		`,"dur":` + usTime(end-start) + `,"name":`)
	t.str(name)
	t.raw(`,"cat":`)
	t.str(cat)
	if color != "" {
		t.raw(`,"cname":"` + color + `"`)
	}
	if args != nil {
		t.raw(`,"args":{`)
		args()
		t.raw("}")
	}
	t.raw("}")
}
