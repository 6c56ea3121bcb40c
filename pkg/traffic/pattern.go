package traffic

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/fabricsim/fabricsim/pkg/units"
)

// Patterns, as CODES' synthetic workloads and htsim's generators name them.
var Patterns = []string{"uniform", "permutation", "incast", "shift-alltoall", "stencil", "nearest-neighbour"}

// Pattern describes synthetic traffic: every sending GPU injects messages
// of MsgSize as a Poisson process whose mean rate is Rate (a share of its
// injection bandwidth) from time 0 until Duration. Destinations:
//
//   - uniform: any other GPU, uniformly at random, per message;
//   - permutation: one partner per GPU for the whole run, a random
//     permutation without fixed points;
//   - incast: FanIn distinct random GPUs send to GPU 0, together offering
//     Rate of GPU 0's bandwidth (each Rate/FanIn of it);
//   - shift-alltoall: message k of GPU i goes to i+1+(k mod N-1), so every
//     GPU cycles through all others in step;
//   - stencil: the four neighbours on the most square 2D torus of the GPUs
//     (two on a 1 x N one), in turn;
//   - nearest-neighbour: the two ring neighbours i-1 and i+1, in turn.
type Pattern struct {
	Name       string
	MsgSize    int64
	Rate       float64 // share of injection bandwidth, (0, 1]
	DurationPs int64
	FanIn      int // incast senders
	Seed       uint64
}

// Generate lists the pattern's messages on gpus GPUs, in start order;
// injectBps[g] is GPU g's injection bandwidth (bit/s).
func (p Pattern) Generate(gpus int, injectBps []float64) ([]Message, error) {
	switch {
	case gpus < 2:
		return nil, fmt.Errorf("--pattern needs at least 2 GPUs, the topology has %d", gpus)
	case p.MsgSize <= 0:
		return nil, fmt.Errorf("--msg-size %d: must be positive", p.MsgSize)
	case !(p.Rate > 0 && p.Rate <= 1):
		return nil, fmt.Errorf("--rate %g%%: must be above 0%% and at most 100%% of the injection bandwidth", p.Rate*100)
	case p.DurationPs <= 0:
		return nil, fmt.Errorf("--duration must be positive")
	}
	rng := rand.New(rand.NewPCG(p.Seed, 0x74726166666963)) // "traffic"
	senders := make([]int32, gpus)
	for i := range senders {
		senders[i] = int32(i)
	}
	share := p.Rate
	var dst func(src int32, k int) int32
	switch p.Name {
	case "uniform":
		dst = func(src int32, _ int) int32 {
			d := int32(rng.IntN(gpus - 1))
			if d >= src {
				d++
			}
			return d
		}
	case "permutation":
		perm := derangement(rng, gpus)
		dst = func(src int32, _ int) int32 { return perm[src] }
	case "incast":
		if p.FanIn < 1 || p.FanIn > gpus-1 {
			return nil, fmt.Errorf("--fan-in %d: incast into GPU 0 takes 1 to %d senders on %d GPUs", p.FanIn, gpus-1, gpus)
		}
		others := rng.Perm(gpus - 1)[:p.FanIn]
		senders = senders[:0]
		for _, o := range others {
			senders = append(senders, int32(o+1))
		}
		share = p.Rate * injectBps[0] / float64(p.FanIn)
		dst = func(int32, int) int32 { return 0 }
	case "shift-alltoall":
		dst = func(src int32, k int) int32 { return int32((int(src) + 1 + k%(gpus-1)) % gpus) }
	case "stencil":
		rows := 1
		for r := 1; r*r <= gpus; r++ {
			if gpus%r == 0 {
				rows = r
			}
		}
		cols := gpus / rows
		dst = func(src int32, k int) int32 {
			r, c := int(src)/cols, int(src)%cols
			if rows == 1 {
				k = 2 + k%2 // left and right only
			}
			switch k % 4 {
			case 0:
				r = (r + rows - 1) % rows
			case 1:
				r = (r + 1) % rows
			case 2:
				c = (c + cols - 1) % cols
			default:
				c = (c + 1) % cols
			}
			return int32(r*cols + c)
		}
	case "nearest-neighbour":
		dst = func(src int32, k int) int32 {
			if k%2 == 0 {
				return int32((int(src) + gpus - 1) % gpus)
			}
			return int32((int(src) + 1) % gpus)
		}
	default:
		return nil, fmt.Errorf("--pattern %q: one of %v", p.Name, Patterns)
	}
	// Expected messages, checked before any is made.
	var expect float64
	for _, s := range senders {
		bps := share * injectBps[s]
		if p.Name == "incast" {
			bps = share
		}
		if !(bps > 0) {
			return nil, fmt.Errorf("GPU %d has no injection bandwidth (no NIC link)", s)
		}
		expect += float64(p.DurationPs) * 1e-12 * bps / (8 * float64(p.MsgSize))
	}
	if expect > MaxMessages {
		return nil, fmt.Errorf("about %.3g messages (%d GPUs for %g s at %g%%), more than %d: shorten --duration, lower --rate or raise --msg-size",
			expect, len(senders), float64(p.DurationPs)*1e-12, p.Rate*100, MaxMessages)
	}
	// Each sender's arrivals, then one list in start order (ties by
	// sender), so that the stream is the same for a seed.
	type arrival struct {
		at  int64
		src int32
		k   int
	}
	var all []arrival
	for _, s := range senders {
		bps := share * injectBps[s]
		if p.Name == "incast" {
			bps = share
		}
		meanPs := 8 * float64(p.MsgSize) / bps * 1e12
		t := 0.0
		for k := 0; ; k++ {
			t += rng.ExpFloat64() * meanPs
			if t >= float64(p.DurationPs) {
				break
			}
			all = append(all, arrival{int64(math.Round(t)), s, k})
		}
	}
	if len(all) == 0 {
		// An empty stream reads downstream as a run of nothing, not as
		// a pattern too short or too thin to send.
		return nil, fmt.Errorf("--duration %s at --rate %.3g%% of --msg-size %s messages generates no message (%.3g expected): lengthen --duration, raise --rate or lower --msg-size",
			units.FormatDuration(p.DurationPs), p.Rate*100, units.FormatSize(p.MsgSize), expect)
	}
	slices.SortFunc(all, func(a, b arrival) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.src, b.src)
	})
	msgs := make([]Message, len(all))
	for i, a := range all {
		msgs[i] = Message{Src: a.src, Dst: dst(a.src, a.k), Size: p.MsgSize, StartPs: a.at}
	}
	return msgs, nil
}

// derangement is a uniformly random permutation of 0..n-1 with no fixed
// point (rejection sampling: about e tries).
func derangement(rng *rand.Rand, n int) []int32 {
	for {
		p := rng.Perm(n)
		ok := true
		for i, v := range p {
			if i == v {
				ok = false
				break
			}
		}
		if ok {
			out := make([]int32, n)
			for i, v := range p {
				out[i] = int32(v)
			}
			return out
		}
	}
}
