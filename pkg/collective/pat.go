package collective

import "github.com/fabricsim/fabricsim/formats/stream"

// PAT (NCCL >= 2.23, "parallel aggregated trees") runs AllGather and
// ReduceScatter at one GPU per server in log2(n) phases instead of a
// ring's n-1 steps. Every rank's block travels a binomial tree rooted at
// its owner; the n trees are shifted copies of each other, so in the phase
// at distance D every rank sends to the rank D positions on (AllGather;
// ReduceScatter runs the same trees leaves-first, sending D positions
// back) the blocks of all trees in which it forwards at that distance,
// aggregated into one transfer. AllGather starts at the largest distance
// with one block and ends at distance 1 with about n/2, so the farthest
// pairs, which cross the fabric's top tiers, carry the least.

// patPhases are the distances of PAT's phases in AllGather order (largest
// first) for n ranks: powers of two below n.
func patPhases(n int) []int {
	var ds []int
	for d := 1; d < n; d *= 2 {
		ds = append(ds, d)
	}
	for i, j := 0, len(ds)-1; i < j; i, j = i+1, j-1 {
		ds[i], ds[j] = ds[j], ds[i]
	}
	return ds
}

// patBlocks is how many blocks a rank sends in the phase at distance d:
// in a binomial tree over positions 0..n-1 (the root at 0) the holders at
// distance d are the multiples of 2d, and each sends to the position d
// on when there is one. Every rank holds each tree's position once, so
// the count is the same for all ranks, and the counts of all phases add
// up to n-1 (each non-root position receives its block once).
func patBlocks(n, d int) int {
	return (n - d + 2*d - 1) / (2 * d)
}

// pat decomposes AllGather or ReduceScatter with PAT on c's ranks, one
// GPU per server. Each channel carries 1/C of the data in loops of n
// pieces of at most chunk bytes; a loop's phases run in order, a rank's
// transfer in a phase waiting for what it received in the phases before
// (the blocks it forwards, or the partial sums it adds to), and for the
// previous loop's transfer on its own connection.
func pat(c *cctx, op Op, size int64, channels int, chunk int64) {
	n := len(c.ranks)
	if n < 2 || size == 0 {
		return
	}
	chunk = max(chunk, 1)
	ds := patPhases(n)
	if op == ReduceScatter {
		for i, j := 0, len(ds)-1; i < j; i, j = i+1, j-1 {
			ds[i], ds[j] = ds[j], ds[i]
		}
	}
	// last[j][i]: the last flow on position i's connection of phase j;
	// recv[j][i]: the flow position i received in phase j of this loop.
	last, recv := make([][]int64, len(ds)), make([][]int64, len(ds))
	for j := range ds {
		last[j], recv[j] = make([]int64, n), make([]int64, n)
	}
	for ch := 0; ch < channels; ch++ {
		data := splitEven(size, channels, ch)
		if data == 0 {
			continue
		}
		for j := range last {
			for i := range last[j] {
				last[j][i] = -1
			}
		}
		loopBytes := int64(n) * chunk
		loops := int((data + loopBytes - 1) / loopBytes)
		for k := 0; k < loops; k++ {
			b := min(loopBytes, data-int64(k)*loopBytes)
			for j, d := range ds {
				bytes := max(1, b*int64(patBlocks(n, d))/int64(n))
				for i := 0; i < n; i++ {
					to := (i + d) % n
					if op == ReduceScatter {
						to = (i - d + n) % n
					}
					deps := c.deps(nil)
					if k == 0 {
						deps = append(deps, c.entry[i]...)
					}
					for jj := 0; jj < j; jj++ {
						deps = append(deps, recv[jj][i])
					}
					src, dst := c.ranks[i], c.ranks[to]
					recv[j][to] = c.connFlow(&last[j][i], deps, src, dst, bytes, c.firstHop(k, src, dst, bytes),
						int32(ch), int32(k), int32(loops), stream.ConnTree)
				}
			}
		}
		for j := range ds {
			for i := 0; i < n; i++ {
				// A rank is done when its sends have left and its
				// receives have landed.
				c.exit[i] = append(c.exit[i], last[j][i], recv[j][i])
			}
		}
	}
}

// patTraffic is PAT's traffic (Traffic): bytes per ordered pair summed
// over the channels, w the protocol's wire factor.
func patTraffic(op Op, size, w float64, ranks []int32, add func(src, dst int32, bytes float64)) {
	n := len(ranks)
	for _, d := range patPhases(n) {
		b := w * size * float64(patBlocks(n, d)) / float64(n)
		for i := 0; i < n; i++ {
			to := (i + d) % n
			if op == ReduceScatter {
				to = (i - d + n) % n
			}
			add(ranks[i], ranks[to], b)
		}
	}
}
