// Package linkload sums the bytes each directed link of the fabric carries
// over a run, by the group type and op of the collective that sent them:
// which tier a workload loads, and with what (formats/links.md).
package linkload

import (
	"math"

	"github.com/fabricsim/fabricsim/formats/links"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/route"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// Class is what sent some bytes: a group type, an op and the job ("" in a
// stream without jobs).
type Class struct{ GroupType, Op, Job string }

// Acc accumulates bytes per class and directed link. Not safe for
// concurrent use.
type Acc struct {
	in      *flowset.Set
	links   int
	classes []Class
	index   map[Class]int32
	bytes   [][]float64 // per class, per directed link
	last    int64       // the collective looked up last, and its class
	lastCls int32
	lastOK  bool // whether last is a collective of the stream (its class holds for all its flows)
}

// New accumulates over a fabric of dirLinks directed links, naming the
// collectives of in.
func New(in *flowset.Set, dirLinks int) *Acc {
	return &Acc{in: in, links: dirLinks, index: map[Class]int32{}, last: -1 << 62}
}

// ClassOf is the class of flow f's traffic: its collective's group type
// and op, and its job (formats/links.md).
func (a *Acc) ClassOf(f *flowset.Flow) int32 {
	if a.lastOK && f.Coll == a.last {
		return a.lastCls
	}
	c := Class{links.None, links.None, ""}
	op, _, _, gt, _, ok := a.in.Collective(f.Coll)
	if ok {
		c.GroupType, c.Op = gt, op
		if c.GroupType == "" {
			c.GroupType = links.None
		}
	}
	c.Job = a.in.JobName(f)
	k, found := a.index[c]
	if !found {
		k = int32(len(a.classes))
		a.classes = append(a.classes, c)
		a.index[c] = k
		a.bytes = append(a.bytes, make([]float64, a.links))
	}
	a.last, a.lastCls, a.lastOK = f.Coll, k, ok
	return k
}

// Add counts b bytes of class c over directed link l.
func (a *Acc) Add(c int32, l route.DirLink, b float64) { a.bytes[c][l] += b }

// AddPath counts size bytes of flow f over every link of path, each
// carrying share w[k] of them (all when w is nil).
func (a *Acc) AddPath(f *flowset.Flow, path []route.DirLink, w []float32, size int64) {
	c := a.ClassOf(f)
	for k, l := range path {
		b := float64(size)
		if w != nil {
			b *= float64(w[k])
		}
		a.bytes[c][l] += b
	}
}

// Each calls fn with every class and directed link that carried bytes,
// classes in the order they were first seen, links in order.
func (a *Acc) Each(fn func(c Class, l route.DirLink, bytes float64)) {
	for k, c := range a.classes {
		for l, b := range a.bytes[k] {
			if b > 0 {
				fn(c, route.DirLink(l), b)
			}
		}
	}
}

// Rows turns the sums into the per-link load file's rows (formats/links):
// each directed link of t, named by its ends' roles, with its bytes, busy
// time and utilization over a run of makespan ns.
func (a *Acc) Rows(t *topo.Topology, makespanNs int64) []links.Row {
	var rows []links.Row
	a.Each(func(c Class, l route.DirLink, b float64) {
		li := t.Links[l.Link()]
		src, dst := li.A, li.B
		if l&1 == 1 {
			src, dst = dst, src
		}
		bytes := int64(math.Round(b))
		if bytes <= 0 {
			return
		}
		row := links.Row{Link: l.Link(), Src: src, Dst: dst, SrcRole: t.Nodes[src].Role, DstRole: t.Nodes[dst].Role,
			Kind: li.Kind, BWbps: li.BWbps, GroupType: c.GroupType, Op: c.Op, Job: c.Job, Bytes: bytes, BusyNs: links.BusyNs(bytes, li.BWbps)}
		row.Tier = links.Tier(row.SrcRole, row.DstRole)
		if makespanNs > 0 {
			row.Utilization = float64(row.BusyNs) / float64(makespanNs)
		}
		rows = append(rows, row)
	})
	return rows
}
