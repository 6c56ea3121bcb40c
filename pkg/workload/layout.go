package workload

import (
	"fmt"
	"strings"
)

// Group types, as SimAI names them.
const (
	TP   = "TP"
	DP   = "DP"
	PP   = "PP"
	EP   = "EP"
	DPEP = "DP_EP"
)

// Layout is the parallelism of a job. Ranks are laid out as Megatron-LM
// does with TP innermost: rank = tp + TP*(dp + DP*pp). Expert parallelism
// splits the DP dimension: EP groups are EP consecutive DP ranks, DP_EP
// groups the DP ranks holding the same experts (stride EP).
//
// Place puts the job on the fabric: job rank r runs on GPU Place[r] (nil:
// on GPU r, the job packed from GPU 0). Groups, stages and every id the
// decomposition writes are GPU ids, so servers, rails, NVSwitches and PXN
// proxies follow the GPUs the job really has; what is counted in job
// ranks (a rank's stage, a stage's representative) goes through GPU and
// Rank.
type Layout struct {
	TP, DP, PP, EP int
	Place          []int32
	rankOf         []int32 // Place's inverse by GPU id, -1 off the job
}

// Placed returns the layout on the GPUs place gives its ranks, in job-rank
// order (place[r] is rank r's GPU, each GPU once, all below gpus, the
// fabric's count). A nil place, or one that is the identity, keeps the
// job packed from GPU 0.
func (l Layout) Placed(place []int32, gpus int) (Layout, error) {
	l.Place, l.rankOf = nil, nil
	if place == nil {
		return l, nil
	}
	if len(place) != l.World() {
		return l, fmt.Errorf("the placement has %d GPUs, the job %d ranks (tp %d x dp %d x pp %d)", len(place), l.World(), l.TP, l.DP, l.PP)
	}
	inv, err := placeInverse(place, gpus)
	if err != nil {
		return l, err
	}
	identity := true
	for r, g := range place {
		identity = identity && int(g) == r
	}
	if !identity {
		l.Place, l.rankOf = place, inv
	}
	return l, nil
}

// CheckPlacement reports the first GPU of place that is not among the
// fabric's gpus or is placed twice.
func CheckPlacement(place []int32, gpus int) error {
	_, err := placeInverse(place, gpus)
	return err
}

// placeInverse is the job rank on each of gpus GPUs, -1 where none is.
func placeInverse(place []int32, gpus int) ([]int32, error) {
	inv := make([]int32, gpus)
	for i := range inv {
		inv[i] = -1
	}
	for r, g := range place {
		if g < 0 || int(g) >= gpus {
			return nil, fmt.Errorf("GPU %d is not in the topology's %d GPUs (0-%d)", g, gpus, gpus-1)
		}
		if inv[g] >= 0 {
			return nil, fmt.Errorf("GPU %d is placed twice (ranks %d and %d)", g, inv[g], r)
		}
		inv[g] = int32(r)
	}
	return inv, nil
}

// PlacedGPUs is the GPU count of the fabric the placement was made for (0
// without a placement).
func (l Layout) PlacedGPUs() int { return len(l.rankOf) }

// GPU is the GPU job rank r runs on.
func (l Layout) GPU(r int) int32 {
	if l.Place == nil {
		return int32(r)
	}
	return l.Place[r]
}

// Rank is the job rank on GPU g, -1 if the job has none there.
func (l Layout) Rank(g int32) int {
	switch {
	case l.Place == nil && int(g) < l.World():
		return int(g)
	case l.Place == nil || int(g) >= len(l.rankOf):
		return -1
	}
	return int(l.rankOf[g])
}

// Member reports, by GPU id, which of gpus GPUs the job holds (nil: it
// holds GPUs 0..World-1 and nothing else matters; see Fabric.Job).
func (l Layout) Member(gpus int) []bool {
	if l.Place == nil && l.World() == gpus {
		return nil
	}
	m := make([]bool, gpus)
	for r := range l.World() {
		m[l.GPU(r)] = true
	}
	return m
}

// NewLayout fills the unset sizes (0) so that TP*DP*PP = world: TP, PP and
// EP default to 1, DP to what remains.
func NewLayout(world, tp, dp, pp, ep int) (Layout, error) {
	if tp == 0 {
		tp = 1
	}
	if pp == 0 {
		pp = 1
	}
	if ep == 0 {
		ep = 1
	}
	if tp < 0 || dp < 0 || pp < 0 || ep < 0 {
		return Layout{}, fmt.Errorf("parallel sizes must be positive (tp %d, dp %d, pp %d, ep %d)", tp, dp, pp, ep)
	}
	if dp == 0 {
		if world%(tp*pp) != 0 {
			return Layout{}, fmt.Errorf("tp %d x pp %d does not divide the %d GPUs", tp, pp, world)
		}
		dp = world / (tp * pp)
	}
	if tp*dp*pp != world {
		return Layout{}, fmt.Errorf("tp %d x dp %d x pp %d = %d, but the cluster has %d GPUs", tp, dp, pp, tp*dp*pp, world)
	}
	if dp%ep != 0 {
		return Layout{}, fmt.Errorf("ep %d does not divide dp %d", ep, dp)
	}
	return Layout{TP: tp, DP: dp, PP: pp, EP: ep}, nil
}

// World is the number of ranks.
func (l Layout) World() int { return l.TP * l.DP * l.PP }

func (l Layout) rank(tp, dp, pp int) int32 { return int32(tp + l.TP*(dp+l.DP*pp)) }

// Groups returns every group of a type, each as its ranks in order, as
// the GPU ids the placement gives them.
func (l Layout) Groups(kind string) ([][]int32, error) {
	out, err := l.rankGroups(kind)
	if err != nil || l.Place == nil {
		return out, err
	}
	for _, g := range out {
		for i, r := range g {
			g[i] = l.Place[r]
		}
	}
	return out, nil
}

// rankGroups is Groups in job ranks.
func (l Layout) rankGroups(kind string) ([][]int32, error) {
	var out [][]int32
	tpAx, dpAx, ppAx := dim{l.TP, 1}, dim{l.DP, l.TP}, dim{l.PP, l.TP * l.DP}
	switch strings.ToUpper(kind) {
	case TP:
		out = lines(ppAx, dpAx, tpAx)
	case DP:
		out = lines(ppAx, tpAx, dpAx)
	case PP:
		out = lines(dpAx, tpAx, ppAx)
	case EP:
		for pp := 0; pp < l.PP; pp++ {
			for tp := 0; tp < l.TP; tp++ {
				for blk := 0; blk < l.DP/l.EP; blk++ {
					g := make([]int32, 0, l.EP)
					for e := 0; e < l.EP; e++ {
						g = append(g, l.rank(tp, blk*l.EP+e, pp))
					}
					out = append(out, g)
				}
			}
		}
	case DPEP:
		for pp := 0; pp < l.PP; pp++ {
			for tp := 0; tp < l.TP; tp++ {
				for e := 0; e < l.EP; e++ {
					g := make([]int32, 0, l.DP/l.EP)
					for blk := 0; blk < l.DP/l.EP; blk++ {
						g = append(g, l.rank(tp, blk*l.EP+e, pp))
					}
					out = append(out, g)
				}
			}
		}
	default:
		return nil, fmt.Errorf("unknown group %q (one of TP, DP, PP, EP, DP_EP)", kind)
	}
	return out, nil
}

// dim is one axis of the rank grid: its size and its rank stride.
type dim struct{ n, stride int }

// lines returns the groups along axis in: one per (outer, mid) pair, outer
// slowest, each with in's ranks in order.
func lines(outer, mid, in dim) [][]int32 {
	out := make([][]int32, 0, outer.n*mid.n)
	for o := 0; o < outer.n; o++ {
		for m := 0; m < mid.n; m++ {
			g := make([]int32, in.n)
			for i := range g {
				g[i] = int32(o*outer.stride + m*mid.stride + i*in.stride)
			}
			out = append(out, g)
		}
	}
	return out
}
