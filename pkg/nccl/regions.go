package nccl

import "math"

// A tuner plugin's regions: aws-ofi-nccl's tuner (src/tuner/
// nccl_ofi_regions.cpp, v1.16.3, the plugin of the AWS p5 runs in
// examples/reference/aws-p5-*) forces an algorithm and protocol wherever
// a collective's (bytes, ranks) point lies in one of its polygons, the
// first polygon in order that holds it, edges included; outside them, and
// on communicators of one or two servers ("the regions are not well
// defined" there), NCCL's own model chooses. A region whose combination
// NCCL cannot run on the communicator is skipped.

// regionPoint is a polygon vertex: x bytes, y ranks.
type regionPoint struct{ x, y float64 }

// region is one polygon and the choice it forces.
type region struct {
	algo  Algo
	proto Proto
	v     []regionPoint
}

// The plugin's limits: 100 GiB and 2^20 ranks, past which it leaves the
// choice to NCCL; its extended vertices reach them.
const (
	tunerMaxSize  = 100 * 1024 * 1024 * 1024.0
	tunerMaxRanks = 1024 * 1024.0
)

// extendRegion is the plugin's extend_region: the point where the line
// through a and b leaves the box below z (z's x, or z's y, whichever it
// meets first).
func extendRegion(a, b, z regionPoint) regionPoint {
	switch {
	case a.x == b.x:
		return regionPoint{a.x, z.y}
	case a.y == b.y:
		return regionPoint{z.x, a.y}
	}
	m := (a.y - b.y) / (a.x - b.x)
	c := b.y - m*b.x
	if y := m*z.x + c; y < z.y {
		return regionPoint{z.x, y}
	}
	return regionPoint{(z.y - c) / m, z.y}
}

// awsP5AllReduce8 is the plugin's p5/p5e AllReduce regions for 8 ranks a
// server (region_init_internal_p5_p5e): Tree LL128 to 30 MiB at 16 ranks,
// 36 MiB at 32, 112 MiB at 64; Ring LL128 from there to 1.3 GiB at 32
// ranks, 2 GiB at 64; NVLS-Tree Simple from 128 ranks; Ring Simple above.
// The plugin has no AllGather or ReduceScatter region for p5 at 8 ranks a
// server, so NCCL's model chooses them.
func awsP5AllReduce8() []region {
	z := regionPoint{tunerMaxSize, tunerMaxRanks}
	treeLL128 := extendRegion(regionPoint{402653184, 2048}, regionPoint{402653184, 4096}, z)
	nvlsTree1 := extendRegion(regionPoint{8053063680, 160}, regionPoint{9663676416, 192}, z)
	nvlsTree2 := treeLL128
	ringSimple := nvlsTree1
	return []region{
		{AlgoTree, LL128, []regionPoint{{0, 16}, {31457280, 16}, {37748736, 32}, {117440512, 64}, {301989888, 128},
			{301989888, 256}, {335544320, 512}, {536870912, 1024}, {402653184, 2048}, {402653184, 4096}, treeLL128, {0, treeLL128.y}}},
		{AlgoNVLSTree, Simple, []regionPoint{{31457281, 16}, {tunerMaxSize, 16}, {31457281, 16}}},
		{AlgoRing, LL128, []regionPoint{{31457280, 17}, {1073741824, 17}, {2147483648, 64}, {2147483648, 128}, {1342177280, 160},
			{2147483648, 256}, {1074790400, 256}, {444596224, 160}, {301989888, 128}, {117440512, 64}, {37748736, 32}}},
		{AlgoNVLSTree, Simple, []regionPoint{{2147483648, 128}, {6442450944, 128}, {8053063680, 160}, {9663676416, 192}, nvlsTree1,
			nvlsTree2, {402653184, 4096}, {402653184, 2048}, {536870912, 1024}, {335544320, 512}, {301989888, 256}, {310378496, 160},
			{444596224, 160}, {1074790400, 256}, {2684354560, 256}, {2147483648, 224}, {1342177280, 160}}},
		{AlgoRing, Simple, []regionPoint{{1073741824, 17}, {ringSimple.x, 17}, ringSimple, {9663676416, 192}, {8053063680, 160},
			{2684354560, 64}, {1610612736, 32}}},
	}
}

// TunerPlugins are the selection plugins --transport tuner=NAME names:
// nccl (NCCL's model alone) and aws-p5 (aws-ofi-nccl's p5/p5e regions).
var TunerPlugins = []string{"nccl", "aws-p5"}

// PluginChoice is a tuner plugin's choice for op of nBytes on this
// communicator: ok false where the plugin leaves it to NCCL's model.
func (t *Tuner) PluginChoice(plugin string, op Op, nBytes int64) (Algo, Proto, bool) {
	if plugin != "aws-p5" || t.NNodes <= 2 || t.NRanks != 8*t.NNodes || op != AllReduce {
		return 0, 0, false
	}
	pt := regionPoint{float64(nBytes), float64(t.NRanks)}
	for _, r := range awsP5AllReduce8() {
		if !t.Available(op, r.algo, r.proto) {
			continue
		}
		if insideRegion(pt, r.v) {
			return r.algo, r.proto, true
		}
	}
	return 0, 0, false
}

// insideRegion reports whether p lies in the polygon v or on its edge
// (even-odd rule, half-open in y so that a vertex at p's height counts
// once).
func insideRegion(p regionPoint, v []regionPoint) bool {
	const eps = 1e-9
	in := false
	for i := range v {
		a, b := v[i], v[(i+1)%len(v)]
		if onSegment(p, a, b, eps) {
			return true
		}
		if (a.y > p.y) != (b.y > p.y) {
			x := a.x + (p.y-a.y)/(b.y-a.y)*(b.x-a.x)
			if p.x < x {
				in = !in
			}
		}
	}
	return in
}

// onSegment reports whether p lies on segment ab: within eps of the
// segment's length along it, and within eps (bytes or ranks) of it.
func onSegment(p, a, b regionPoint, eps float64) bool {
	dx, dy := b.x-a.x, b.y-a.y
	l2 := dx*dx + dy*dy
	if l2 == 0 {
		return p == a
	}
	s := ((p.x-a.x)*dx + (p.y-a.y)*dy) / l2
	if s < -eps || s > 1+eps {
		return false
	}
	cross := (p.x-a.x)*dy - (p.y-a.y)*dx
	return math.Abs(cross)/math.Sqrt(l2) <= eps
}
