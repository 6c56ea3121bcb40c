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
// server has for B:j on rail j (NET). Pairs inside a server use NVLink
// directly. The proxy forwards as the hand-offs land, step by step, so
// each (server, destination) transfer is cut into pieces of about chunk
// bytes (at most maxChunks, 0 for no cap): piece k of every hand-off to
// the proxy, then piece k of its NET transfer, each connection's pieces in
// order. Without the pieces the NET transfer waited for every hand-off
// whole, a serialisation NCCL does not have (1.44 against 1.28 ms for a
// 64 MiB AllToAll on 128 GPUs, fluid, even split).
func allToAllPXN(c *cctx, f Fabric, size, chunk int64, maxChunks int) {
	n := len(c.ranks)
	nodes := f.nodesOf(c.ranks)
	localIdx := make([]int, n)
	for _, l := range nodes {
		for li, p := range l {
			localIdx[p] = li
		}
	}
	per := func(dst int) int64 { return splitEven(size, n, dst) }
	var handoff []int64  // per local source: its last hand-off piece
	var gathered []int64 // a NET piece's dependencies
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
				share := per(dst)
				if share == 0 {
					continue
				}
				// The proxy is the GPU of server a with dst's local index
				// (same rail); servers with fewer ranks fall back to index mod.
				proxy := la[localIdx[dst]%len(la)]
				pieces := PXNPieces(share, len(la), chunk, maxChunks)
				handoff = handoff[:0]
				for range la {
					handoff = append(handoff, -1)
				}
				net := int64(-1)
				for k := 0; k < pieces; k++ {
					piece := splitEven(share, pieces, k)
					// The NET piece waits for the proxy, every hand-off's
					// piece k, and its own piece k-1 (its connection's order).
					gathered = append(gathered[:0], c.entry[proxy]...)
					for q, src := range la {
						if src == proxy {
							continue
						}
						// A hand-off piece waits for its source's entry
						// and its previous piece: the buffer fills in order.
						id := c.connFlow(&handoff[q], c.deps(c.entry[src]), c.ranks[src], c.ranks[proxy], piece, 0, 0, int32(dst), int32(n), stream.ConnPXNInit)
						c.exit[src] = append(c.exit[src], id)
						gathered = append(gathered, id)
					}
					lat := int64(0)
					if k == 0 {
						lat = c.inter
					}
					// Not connFlow: it would alias gathered, this loop's scratch.
					if net >= 0 {
						gathered = append(gathered, net)
					}
					net = c.e.Flow(c.id, c.ranks[proxy], c.ranks[dst], piece*int64(len(la)), lat, gathered, 0, int32(dst), int32(n), stream.ConnNet)
					c.exit[proxy] = append(c.exit[proxy], net)
					c.exit[dst] = append(c.exit[dst], net)
				}
			}
		}
	}
}

// p2pNetChunk is NCCL's NCCL_P2P_NET_CHUNKSIZE default: the step a proxy
// sends a point-to-point connection's data in.
const p2pNetChunk = 128 << 10

// PXNPieces is how many pieces a PXN transfer is cut into when each of a
// server's local ranks hands it share bytes: about chunk bytes each, at
// most maxChunks (0: no cap), never more than share (no empty piece); one
// for a rank alone in its server, which hands nothing off.
func PXNPieces(share int64, local int, chunk int64, maxChunks int) int {
	total := share * int64(local)
	if local < 2 || chunk <= 0 || total <= chunk {
		return 1
	}
	k := (total + chunk - 1) / chunk
	if maxChunks > 0 {
		k = min(k, int64(maxChunks))
	}
	return int(max(min(k, share), 1))
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
