package collective

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"sync"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// allToAllDirect sends size/n from every rank to every other rank at once:
// n(n-1) flows, each waiting only for its sender to enter the collective.
// Under the transport's costs (p2pSteps) a pair across servers is NCCL's
// steps instead, in order on its connection.
func allToAllDirect(c *cctx, size int64, parts int, chunk int64, maxChunks int) {
	n := len(c.ranks)
	for i := range c.exit {
		c.exit[i] = make([]int64, 0, 2*(n-1)) // a send to and a receive from every peer
	}
	var lay a2aLayout
	if nodes := c.f.nodesOf(c.ranks); c.p2pPaced() && len(nodes) > 1 {
		lay = a2aLayoutCached(nodes, n, parts, false, c.step.maxRecvs)
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
			src, dst := c.ranks[i], c.ranks[j]
			if c.p2pPaced() && c.crosses(src, dst) {
				// Its own proxy serves every remote peer's send and
				// receive connections in turn.
				last := int64(-1)
				c.p2pSteps(b, parts, chunk, maxChunks, int(lay.ops[i]), int64(lay.posts[i*n+j])*c.step.proxyOp, func(k int, piece, lat int64) int64 {
					last = c.connFlow(&last, c.deps(c.entry[i]), src, dst, piece, lat, 0, int32(j), int32(n), stream.ConnA2A)
					return last
				})
				c.exit[i] = append(c.exit[i], last)
				c.exit[j] = append(c.exit[j], last)
				continue
			}
			id := c.e.Flow(c.id, src, dst, b, c.hop(src, dst), c.entry[i], 0, int32(j), int32(n), stream.ConnA2A)
			c.exit[i] = append(c.exit[i], id)
			c.exit[j] = append(c.exit[j], id)
		}
	}
}

// p2pPaced reports whether AllToAll's network transfers go in NCCL's
// steps: under the transport's costs, not in SimAI replay (whose send
// latency is all the software latency). Default streams stay as they were.
func (c *cctx) p2pPaced() bool {
	return (c.step.intra > 0 || c.step.inter > 0) && c.e.sendLat == 0
}

// p2pPieces is how many pieces a network point-to-point transfer of b
// bytes (one peer's share, or PXN's hand-offs to one peer gathered) is
// cut into under the transport, and how many NCCL steps each carries: a
// part's steps (P2PPlan: parts in parallel, each in chunk steps), at
// most maxChunks pieces (0: no cap), never more than b.
func p2pPieces(b int64, parts int, chunk int64, maxChunks int) (pieces, stepsPer int64) {
	steps := p2pPartSteps(b, parts, chunk)
	pieces = steps
	if maxChunks > 0 {
		pieces = min(pieces, int64(maxChunks))
	}
	pieces = max(min(pieces, b), 1)
	return pieces, (steps + pieces - 1) / pieces
}

// p2pPartSteps is how many steps of chunk bytes each of a transfer's
// parts takes: b bytes in parts parts (P2PPlan), at least one.
func p2pPartSteps(b int64, parts int, chunk int64) int64 {
	part := (b + int64(parts) - 1) / int64(max(parts, 1))
	return max((part+max(chunk, 1)-1)/max(chunk, 1), 1)
}

// p2pSteps emits a network point-to-point transfer of b bytes under the
// transport as p2pPieces' pieces through send(k, piece bytes, step
// latency), each waiting for the one before on its connection: the first
// pays the hop's latency, a step's cost (the pipeline's fill, as
// firstHop) and posted, when its proxies post its first step
// (a2aPosts), and each piece holds the next until its steps have each
// had a step's steady interval (its slowest stage, stepCosts.p2pPace)
// or a round of the proxy thread that posts them, ops network ops of
// ProxyOpUs each (a2aProxies), whichever is longer.
func (c *cctx) p2pSteps(b int64, parts int, chunk int64, maxChunks, ops int, posted int64, send func(k int, piece, lat int64) int64) {
	pieces, stepsPer := p2pPieces(b, parts, chunk, maxChunks)
	interval := max(c.step.p2pPace(), int64(ops)*c.step.proxyOp)
	for k := int64(0); k < pieces; k++ {
		lat := int64(0)
		if k == 0 {
			lat = c.inter + c.step.inter + posted
		}
		c.pace = stepsPer * interval
		send(int(k), splitEven(b, int(pieces), int(k)), lat)
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
//
// Under the transport's costs (p2pPaced) the pieces are NCCL's steps
// instead (p2pPieces: each peer's share in parts, each part in chunk
// steps): the first NET piece pays a step's cost on the fill, and each
// holds the next on its connection for its steps' intervals, the step
// cost or the proxy's round over the connections it serves, whichever is
// longer (p2pSteps): the rail GPU's proxy posts every send its server has
// for the remote ranks on its rail, and polls its own rank's receives.
func allToAllPXN(c *cctx, f Fabric, size int64, parts int, chunk int64, maxChunks int) {
	n := len(c.ranks)
	nodes := f.nodesOf(c.ranks)
	paced := c.p2pPaced()
	lay := newPXNLayout(nodes, n)
	per := func(dst int) int64 { return splitEven(size, n, dst) }
	var handoff []int64  // per local source: its last hand-off piece
	var gathered []int64 // a NET piece's dependencies
	var a2a a2aLayout
	if paced && len(nodes) > 1 {
		a2a = a2aLayoutCached(nodes, n, parts, true, c.step.maxRecvs)
	}
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
				proxy := lay.relay(la[0], dst)
				pieces, interval, posted := PXNPieces(share, len(la), chunk, maxChunks), int64(0), int64(0)
				if paced {
					posted = int64(a2a.posts[proxy*n+dst]) * c.step.proxyOp
					p, iv := a2aPace(share, parts, chunk, maxChunks, a2a.ops[proxy], c.step.p2pPace(), c.step.proxyOp)
					pieces, interval = int(p), iv
				}
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
						if paced {
							lat += c.step.inter + posted
						}
					}
					c.e.pace = interval
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

// a2aPosts is, for each network connection of an AllToAll (at p x n + d
// for its proxy p and its receiver d, indices into the group, nodes as
// nodesOf gives them; -1 where there is none), how many network ops the
// proxies post before its first step: the latest of its sends' and their
// receives'. NCCL
// runs a group's sends and receives in rounds, each a send to one peer
// and a receive from another (enqueue.cc scheduleP2pTasksToPlan over
// comm->p2pSchedule), its proxy ops go to the proxy thread in that order
// when the plan launches, and the thread posts them one after another,
// parts (channels) each (proxy.cc progressOps; ProxyOpUs each). Rounds
// here are the flat schedule's, round r sending to rank + r and
// receiving from rank - r; NCCL's own groups a server's peers and
// orders them quadratically, which reorders the ops, not their count. The sender's proxy is the sender, or
// with PXN the GPU of the sender's server on d's rail, which posts the
// server's sends to that rail; every rank posts its own receives. Nothing
// in a round counts before its own op, which a big AllToAll's bytes hide
// but a small one's time is.
func a2aPosts(nodes [][]int, n, parts int, pxn bool) []int32 {
	lay := newPXNLayout(nodes, n)
	posts := make([]int32, n*n)
	for i := range posts {
		posts[i] = -1
	}
	// ops[x]: rank x's ops in the rounds before this one; pd: the
	// round's pairs (p x n + d, -1 for none), counted once all have read.
	ops, pd := make([]int32, n), make([]int, n)
	for r := 1; r < n; r++ {
		// A connection (with PXN, the rail GPU's to d, gathering its
		// server's sends) starts when the last of its sends is posted.
		for s := range n {
			p, d, ok := lay.pair(s, r, pxn)
			if !ok {
				pd[s] = -1
				continue
			}
			pd[s] = p*n + d
			posts[p*n+d] = max(posts[p*n+d], int32(parts)*max(ops[p], ops[d]))
		}
		for _, k := range pd {
			if k >= 0 {
				ops[k/n]++
				ops[k%n]++
			}
		}
	}
	return posts
}

// a2aCache holds a2aPosts' latest results by group layout: an AllToAll
// repeated on one group (every layer's, every microbatch's) and the
// flows and closed form of one at collective granularity share them (tens
// of ms a call at 1024 ranks). A few layouts at most, each up to n x n.
var a2aCache struct {
	sync.Mutex
	m map[string]a2aLayout
}

// a2aLayout is a2aPosts' result, each position's proxy's network ops a
// round and its proxies by class with their frontiers (a2aProxies).
type a2aLayout struct {
	posts, ops []int32
	classes    []a2aClass
}

// a2aCacheLayouts bounds a2aCache: a run's AllToAlls are on a few groups'
// layouts, and one of 4096 ranks holds 64 MiB.
const a2aCacheLayouts = 4

// a2aLayoutCached is a2aPosts with its ops and classes, kept by what
// decides them (each group position's server, as nodes orders them,
// parts, pxn and maxRecvs); read only.
func a2aLayoutCached(nodes [][]int, n, parts int, pxn bool, maxRecvs int) a2aLayout {
	maxRecvs = max(maxRecvs, 1)
	key := make([]byte, 4*n+9)
	binary.LittleEndian.PutUint32(key, uint32(parts))
	binary.LittleEndian.PutUint32(key[4:], uint32(maxRecvs))
	if pxn {
		key[8] = 1
	}
	for a, l := range nodes {
		for _, p := range l {
			binary.LittleEndian.PutUint32(key[9+4*p:], uint32(a))
		}
	}
	a2aCache.Lock()
	defer a2aCache.Unlock()
	if l, ok := a2aCache.m[string(key)]; ok {
		return l
	}
	if len(a2aCache.m) >= a2aCacheLayouts || a2aCache.m == nil {
		a2aCache.m = map[string]a2aLayout{}
	}
	posts := a2aPosts(nodes, n, parts, pxn)
	ops, classes := a2aProxies(nodes, posts, n, parts, pxn, maxRecvs)
	l := a2aLayout{posts, ops, classes}
	a2aCache.m[string(key)] = l
	return l
}

// a2aClass is an AllToAll's proxies alike (a2aProxies): each relays conns
// network connections gathering local ranks' shares (1 without PXN),
// posts ops network ops a round, and front is their frontier: for each
// posting level q (ops posted before a connection), the most connections
// one of them posted at q or later, all a2aChain needs of their posts,
// since its chain grows with q and with that count.
type a2aClass struct {
	local, conns int
	ops          int32
	front        []int32
}

// a2aProxies is, per position of a layout (posts as a2aPosts gives them),
// the network ops its GPU's proxy thread posts a round, parts each (ops):
// its own rank's receives from the ranks in other servers, grouped as
// NCCL posts them (a2aRecvOps), and the sends of its network
// connections, one a peer or, with PXN, one from each of its server's
// ranks on each connection it relays. A GPU's proxy serves its own connections only (proxy.cc: one proxy thread
// a GPU), so on a group with unequal rank counts a server its proxies'
// rounds differ. It also groups the proxies with network connections by
// their connections, gathered ranks and ops (classes: one on a group
// aligned to servers) and finds each class's frontier.
func a2aProxies(nodes [][]int, posts []int32, n, parts int, pxn bool, maxRecvs int) (ops []int32, classes []a2aClass) {
	top := int32(-1)
	for _, q := range posts {
		top = max(top, q)
	}
	ops = make([]int32, n)
	count := make([]int32, top+1) // a proxy's connections by posts before them
	for a, la := range nodes {
		local := 1 // sends a connection carries
		if pxn {
			local = len(la)
		}
		recvs := a2aRecvOps(nodes, a, pxn, maxRecvs)
		for _, p := range la {
			clear(count)
			conns := 0
			for _, q := range posts[p*n : (p+1)*n] {
				if q >= 0 {
					count[q]++
					conns++
				}
			}
			ops[p] = int32((local*conns + recvs) * parts)
			if conns == 0 {
				continue
			}
			i := slices.IndexFunc(classes, func(c a2aClass) bool { return c.local == local && c.conns == conns && c.ops == ops[p] })
			if i < 0 {
				i = len(classes)
				classes = append(classes, a2aClass{local: local, conns: conns, ops: ops[p], front: make([]int32, top+1)})
			}
			front, rest := classes[i].front, int32(0)
			for q := top; q >= 0; q-- {
				rest += count[q]
				front[q] = max(front[q], rest)
			}
		}
	}
	return ops, classes
}

// a2aRecvOps is how many receive ops a round of a proxy in server a
// (of nodes) posts a channel: NCCL's recvProxyProgress groups an op's
// subs by their network receive comm, at most maxRecvs a group (NCCL
// 2.24.3 src/transport/net.cc l. 1232-1270, one irecv a group at l.
// 1335; maxRecvs: Transport.MaxRecvs), and a comm is shared per remote
// proxy rank and channel (l. 863-872): with PXN a remote server's ranks
// all send to this rank through its GPU on this rank's rail
// (pxnLayout.relay), one comm; without PXN each remote rank is its own
// proxy.
func a2aRecvOps(nodes [][]int, a int, pxn bool, maxRecvs int) int {
	maxRecvs = max(maxRecvs, 1)
	ops := 0
	for b, lb := range nodes {
		switch {
		case b == a:
		case pxn:
			ops += (len(lb) + maxRecvs - 1) / maxRecvs
		default:
			ops += len(lb)
		}
	}
	return ops
}

// p2pSubs is the most network connections an AllToAll on nodes (a
// group's ranks by server) puts on one channel of a rank, each peer's
// share in parts, on a comm of channels p2p channels: NCCL's args->nsubs
// on a receive proxy, which appends an op's receives on one channel to
// one args (net.cc l. 863, proxy.cc ProxyAppend). A round's channels
// start at its base (include/channel.h ncclP2pChannelBaseForRound: one
// base a remote server and batch of 8 of its ranks, maxLocalRanks
// wide), part k on base + k bit-reversed (device.h
// ncclP2pChannelForPart), so a remote server's ranks share their
// channels and servers share one only when the bases wrap, in different
// batches, so they do not add: one args holds one batch's subs, at most 8
// (enqueue.cc: a batch ends at NCCL_MAX_DEV_WORK_P2P_PER_BATCH p2ps and
// takes one opCount; proxy.cc ProxyAppend joins a sub only of the same
// opCount, else the op waits as nextPeer). A group whose
// servers hold different numbers of its ranks is counted as if each held
// the most (NCCL schedules it flat; an upper bound). The send side holds
// no more: one sub a peer without PXN, one a remote server with it.
func p2pSubs(nodes [][]int, parts, channels int) int {
	if len(nodes) < 2 {
		return 0
	}
	local := 0
	for _, l := range nodes {
		local = max(local, len(l))
	}
	const batch = 8 // NCCL_MAX_DEV_WORK_P2P_PER_BATCH
	perServer := (local + batch - 1) / batch
	log2 := bits.Len(uint(channels - 1))
	count := make([]int, channels)
	for o := 1; o < len(nodes); o++ { // a remote server's place in the schedule
		for j := 0; j < perServer; j++ {
			base := (o*perServer + j) & 0xff
			for k := 0; k < min(parts, channels); k++ {
				delta := int(bits.Reverse(uint(k)) >> (bits.UintSize - log2))
				count[(base+delta)&(channels-1)] += min(batch, local-batch*j)
			}
		}
	}
	return min(slices.Max(count), batch)
}

// a2aPace is a network connection's pieces (share bytes a peer, parts
// channels) and the interval between them under a step's steady
// interval pace and proxyOp (p2pSteps): its steps x the longer of the
// pace and its proxy's round, ops of proxyOp each (a2aProxies).
func a2aPace(share int64, parts int, chunk int64, maxChunks int, ops int32, pace, proxyOp int64) (pieces, interval int64) {
	pieces, stepsPer := p2pPieces(share, parts, chunk, maxChunks)
	return pieces, stepsPer * max(pace, int64(ops)*proxyOp)
}

// p2pPace is a point-to-point network step's steady interval (pace;
// inter, the step's whole cost, in streams written before it).
func (s stepCosts) p2pPace() int64 {
	if s.pace > 0 {
		return s.pace
	}
	return s.inter
}

// A2AStagger is a paced AllToAll's posting order across servers, for a
// backend pricing its connections in closed form: each network
// connection's first step waits its Posts (at p x n + d, group
// positions; -1: none) x OpPs, and its Pieces then go an IntervalPs
// apart at the least (allToAllPs).
type A2AStagger struct {
	Posts              []int32
	OpPs               int64
	Pieces, IntervalPs int64
}

// A2AStaggerOf is co's stagger on ranks (one of its groups) at size
// bytes, its cut's costs and algorithm algo; ok is false unless its
// network transfers go in NCCL's steps across servers (p2pPaced) with a
// proxy cost. Posts is shared: read only.
func (f Fabric) A2AStaggerOf(co *stream.Collective, algo Algo, ranks []int32, size int64) (A2AStagger, bool) {
	k, n := co.Cut, len(ranks)
	if !cutPaced(co) || algo != AlgoPXN && algo != AlgoDirect || k.StepProxyPs <= 0 || n < 2 || size <= 0 {
		return A2AStagger{}, false
	}
	nodes := f.nodesOf(ranks)
	if len(nodes) < 2 {
		return A2AStagger{}, false
	}
	parts := max(co.Channels, 1)
	lay := a2aLayoutCached(nodes, n, parts, algo == AlgoPXN, int(k.MaxRecvs))
	var ops int32 // the slowest proxy round's: it paces the late connections
	for _, cl := range lay.classes {
		ops = max(ops, cl.ops)
	}
	pieces, interval := a2aPace(size/int64(n), parts, k.ChunkBytes, int(k.MaxChunks), ops, stepCosts{inter: k.StepInterPs, pace: k.StepPacePs}.p2pPace(), k.StepProxyPs)
	return A2AStagger{Posts: lay.posts, OpPs: k.StepProxyPs, Pieces: pieces, IntervalPs: interval}, true
}

// cutPaced is p2pPaced for a collective record: its network transfers go
// in NCCL's steps.
func cutPaced(co *stream.Collective) bool {
	return co.Cut != nil && (co.Cut.StepIntraPs > 0 || co.Cut.StepInterPs > 0) && co.SendLatPs == 0
}

// NetPieces is how many pieces each network connection of AllToAll co
// (PXN or direct) on n ranks, local of them in a server, moves, as its
// flows cut them: NCCL's steps under the transport's costs (p2pPieces),
// else PXN's hand-offs' pieces (PXNPieces) or a direct pair's one flow.
func NetPieces(co *stream.Collective, n, local int) int {
	k := co.Cut
	share := co.Size / int64(max(n, 1))
	if cutPaced(co) {
		p, _ := p2pPieces(share, max(co.Channels, 1), k.ChunkBytes, int(k.MaxChunks))
		return int(p)
	}
	if co.Algorithm != AlgoPXN.String() {
		return 1
	}
	return PXNPieces(share, local, k.ChunkBytes, int(k.MaxChunks))
}

// pxnLayout is a group's ranks by server (nodes, positions as nodesOf
// gives them) with each position's server and index in it: what PXN's
// relay rule reads, written once for the flows (allToAllPXN), the posting
// order (a2aPosts) and the link loads (TrafficConns).
type pxnLayout struct {
	nodes         [][]int
	server, local []int
}

func newPXNLayout(nodes [][]int, n int) pxnLayout {
	l := pxnLayout{nodes, make([]int, n), make([]int, n)}
	for a, ps := range nodes {
		for li, p := range ps {
			l.server[p], l.local[p] = a, li
		}
	}
	return l
}

// relay is the position that sends i's share for j (in another server)
// under PXN: the group's rank in i's server at j's index among the
// group's ranks in its own (mod those in i's server). On a group that
// fills its servers in order, the GPU of i's server on j's rail.
func (l pxnLayout) relay(i, j int) int {
	la := l.nodes[l.server[i]]
	return la[l.local[j]%len(la)]
}

// pair is round r's network connection from position s (a2aPosts): its
// posting proxy p (s, or with PXN its relay for d) and its receiver d =
// s + r mod n; false when both share a server.
func (l pxnLayout) pair(s, r int, pxn bool) (p, d int, ok bool) {
	n := len(l.server)
	d = s + r
	if d >= n {
		d -= n
	}
	if l.server[s] == l.server[d] {
		return 0, 0, false
	}
	if p = s; pxn {
		p = l.relay(s, d)
	}
	return p, d, true
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
