package collective

import "github.com/fabricsim/fabricsim/formats/stream"

// allToAllDirect sends size/n from every rank to every other rank at once:
// n(n-1) flows, each waiting only for its sender to enter the collective.
func allToAllDirect(c *cctx, size int64) {
	n := len(c.ranks)
	for i := range c.exit {
		c.exit[i] = make([]int64, 0, 2*(n-1)) // a send to and a receive from every peer
	}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i == j {
				continue
			}
			b := splitEven(size, n, j)
			if b == 0 {
				continue
			}
			id := c.e.Flow(c.id, c.ranks[i], c.ranks[j], b, c.hop(c.ranks[i], c.ranks[j]), c.entry[i], 0, int32(j), int32(n), stream.ConnA2A)
			c.exit[i] = append(c.exit[i], id)
			c.exit[j] = append(c.exit[j], id)
		}
	}
}

// allToAllPXN routes AllToAll traffic between servers through the rail
// proxies, as NCCL's PXN does: a GPU hands the data for remote GPU B:j to
// its local GPU j over NVLink (PXN_INIT), and GPU j sends everything its
// server has for B:j in one transfer on rail j (NET). Pairs inside a server
// use NVLink directly.
func allToAllPXN(c *cctx, f Fabric, size int64) {
	n := len(c.ranks)
	nodes := f.nodesOf(c.ranks)
	localIdx := make([]int, n)
	for _, l := range nodes {
		for li, p := range l {
			localIdx[p] = li
		}
	}
	per := func(dst int) int64 { return splitEven(size, n, dst) }
	for a, la := range nodes {
		// Inside the server: direct.
		for _, i := range la {
			for _, j := range la {
				if i != j && per(j) > 0 {
					id := c.e.Flow(c.id, c.ranks[i], c.ranks[j], per(j), c.intra, c.entry[i], 0, int32(j), int32(n), stream.ConnA2A)
					c.exit[i] = append(c.exit[i], id)
					c.exit[j] = append(c.exit[j], id)
				}
			}
		}
		for b, lb := range nodes {
			if a == b {
				continue
			}
			for _, dst := range lb {
				if per(dst) == 0 {
					continue
				}
				// The proxy is the GPU of server a with dst's local index
				// (same rail); servers with fewer ranks fall back to index mod.
				proxy := la[localIdx[dst]%len(la)]
				total := per(dst) // the proxy's own share
				// The NET flow waits for the proxy and every hand-off; the
				// hand-offs' deps are entries, so the buffer fills meanwhile.
				gathered := c.deps(c.entry[proxy])
				for _, src := range la {
					if src == proxy {
						continue
					}
					id := c.e.Flow(c.id, c.ranks[src], c.ranks[proxy], per(dst), 0, c.entry[src], 0, int32(dst), int32(n), stream.ConnPXNInit)
					c.exit[src] = append(c.exit[src], id)
					gathered = append(gathered, id)
					total += per(dst)
				}
				id := c.e.Flow(c.id, c.ranks[proxy], c.ranks[dst], total, c.inter, gathered, 0, int32(dst), int32(n), stream.ConnNet)
				c.buf = gathered
				c.exit[proxy] = append(c.exit[proxy], id)
				c.exit[dst] = append(c.exit[dst], id)
			}
		}
	}
}

// sendRecv is pipeline-parallel activation passing: each stage of the group
// sends size bytes to the next stage.
func sendRecv(c *cctx, size int64) {
	for i := 0; i+1 < len(c.ranks); i++ {
		if size == 0 {
			continue
		}
		id := c.e.Flow(c.id, c.ranks[i], c.ranks[i+1], size, c.hop(c.ranks[i], c.ranks[i+1]), c.entry[i], 0, 0, 1, stream.ConnP2P)
		c.exit[i] = append(c.exit[i], id)
		c.exit[i+1] = append(c.exit[i+1], id)
	}
}
