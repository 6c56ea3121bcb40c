package collective

import (
	"fmt"
	"math"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// nvswitch picks the NVSwitch serving a channel on a server.
func (f Fabric) nvswitch(server, ch int) (int32, error) {
	if server >= len(f.NVSwitches) || len(f.NVSwitches[server]) == 0 {
		return 0, fmt.Errorf("server %d has no NVSwitch: NVLS needs one", server)
	}
	s := f.NVSwitches[server]
	return s[ch%len(s)], nil
}

// nvlsWire is the bytes on the NVLinks for an NVLS payload.
func nvlsWire(payload int64, eff float64) int64 {
	return int64(math.Ceil(float64(payload) / eff))
}

// nvlsShape gives, per GPU and chunk of AllGather or ReduceScatter, the
// payload sent to the switch and received from it: AllGather uploads the
// GPU's shard and receives the n-1 others; ReduceScatter uploads
// everything and receives its reduced shard.
func nvlsShape(op Op, chunk int64, n int) (up, down int64) {
	if op == AllGather {
		return chunk / int64(n), chunk - chunk/int64(n)
	}
	return chunk, chunk / int64(n)
}

// nvls decomposes a single-server collective through NVLink SHARP. An
// AllReduce chunk moves as NCCL's NVLS kernel moves it: the switch reads
// every GPU's chunk and hands GPU j the reduced shard j (multimem load-
// reduce), then GPU j stores its shard to the multicast address and the
// switch writes it to every GPU, the sender included. Per GPU that is
// chunk + chunk/n each way. AllGather and ReduceScatter are one upload and
// one download per chunk. Downloads wait for every upload of the chunk.
func nvls(c *cctx, f Fabric, op Op, size int64, channels int, chunk int64, eff float64) error {
	for ch := 0; ch < channels; ch++ {
		g, err := newNVLSChannel(c, f, op, size, channels, ch, chunk, eff)
		if err != nil {
			return err
		}
		if c.count {
			c.skip(g.flows())
			continue
		}
		for g.row() {
		}
	}
	return nil
}

// nvlsChannel is one channel of an NVLS collective, emitted a chunk (a
// row) at a time: a chunk's uploads wait for the previous chunk's on
// their connection and its other flows for its uploads, so, as with
// ringChannel, every row's deps are in the row before it or in itself.
type nvlsChannel struct {
	c                             *cctx
	op                            Op
	eff                           float64
	ch, n, k, chunks              int
	sw                            int32
	data, chunk                   int64
	ups, mcs                      []int64
	lastUp, lastRed, lastMc, last []int64 // last: downloads
}

func newNVLSChannel(c *cctx, f Fabric, op Op, size int64, channels, ch int, chunk int64, eff float64) (*nvlsChannel, error) {
	g := &nvlsChannel{c: c, op: op, eff: eff, ch: ch, n: len(c.ranks), chunk: chunk}
	if size == 0 || g.n < 2 {
		return g, nil
	}
	server := f.server(c.ranks[0])
	for _, r := range c.ranks {
		if f.server(r) != server {
			return nil, fmt.Errorf("NVLS spans one server; this group spans several (use nvls-tree or ring)")
		}
	}
	if g.data = splitEven(size, channels, ch); g.data == 0 {
		return g, nil
	}
	var err error
	if g.sw, err = f.nvswitch(server, ch); err != nil {
		return nil, err
	}
	g.chunks = int((g.data + chunk - 1) / chunk)
	n := g.n
	g.ups, g.mcs = make([]int64, n), make([]int64, n)
	g.lastUp, g.lastRed, g.lastMc, g.last = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	for i := 0; i < n; i++ {
		g.lastUp[i], g.lastRed[i], g.lastMc[i], g.last[i] = -1, -1, -1, -1
	}
	return g, nil
}

// flows is how many flows the channel emits in all.
func (g *nvlsChannel) flows() int64 {
	per := 2 * int64(g.n)
	if g.op == AllReduce {
		per *= 2
	}
	return per * int64(g.chunks)
}

func (g *nvlsChannel) emitted() int32 { return int32(g.k) }
func (g *nvlsChannel) more() bool     { return g.k < g.chunks }

// row emits the next chunk and reports whether it did; after the last it
// records the ranks' exits.
func (g *nvlsChannel) row() bool {
	if g.k == g.chunks {
		return false
	}
	c, n, k, sw, eff := g.c, g.n, g.k, g.sw, g.eff
	ch, chunks := int32(g.ch), int32(g.chunks)
	b := min(g.chunk, g.data-int64(k)*g.chunk)
	up, down := b, b
	if g.op != AllReduce {
		up, down = nvlsShape(g.op, b, n)
	}
	for p := 0; p < n; p++ {
		deps := c.deps(nil)
		if k == 0 {
			deps = append(deps, c.entry[p]...)
		}
		// The chunk's GPU work paces the channel (Transport.NVLSChunkUs);
		// the first chunk's precedes its bytes.
		lat := c.firstHop(k, c.ranks[p], sw, nvlsWire(up, eff))
		work := nvlsChunkPs(b, c.step.bytes, c.step.serial)
		c.pace += work
		if k == 0 {
			lat += work
		}
		g.ups[p] = c.connFlow(&g.lastUp[p], deps, c.ranks[p], sw, nvlsWire(up, eff), lat, ch, int32(k), chunks, stream.ConnNVLS)
	}
	if g.op == AllReduce {
		for p := 0; p < n; p++ {
			shard := splitEven(b, n, p)
			red := c.connFlow(&g.lastRed[p], c.deps(g.ups), sw, c.ranks[p], nvlsWire(shard, eff), 0, ch, int32(k), chunks, stream.ConnNVLS)
			g.mcs[p] = c.connFlow(&g.lastMc[p], append(c.deps(nil), red), c.ranks[p], sw, nvlsWire(shard, eff), 0, ch, int32(k), chunks, stream.ConnNVLS)
		}
		copy(g.ups, g.mcs)
	}
	for p := 0; p < n; p++ {
		c.connFlow(&g.last[p], c.deps(g.ups), sw, c.ranks[p], nvlsWire(down, eff), 0, ch, int32(k), chunks, stream.ConnNVLS)
	}
	if g.k++; g.k == g.chunks {
		for p := 0; p < n; p++ {
			c.exit[p] = append(c.exit[p], g.lastUp[p], g.last[p])
			if g.lastMc[p] >= 0 {
				c.exit[p] = append(c.exit[p], g.lastMc[p])
			}
		}
	}
	return true
}

// nvlsTree is NCCL's NVLS-Tree AllReduce across servers: inside each
// server the NVSwitch reduces and hands shard j to local GPU j; the GPUs
// of the same local index form a double binary tree across servers
// (channel parity picks the tree) and all-reduce their shard; then each
// shard owner multicasts the result through the NVSwitch.
func nvlsTree(c *cctx, f Fabric, size int64, channels int, chunk int64, eff float64) error {
	nodes := f.nodesOf(c.ranks)
	ppn := len(nodes[0])
	for _, l := range nodes {
		if len(l) != ppn {
			return fmt.Errorf("NVLS-Tree needs the same number of ranks on every server")
		}
	}
	nn := len(nodes)
	if size == 0 {
		return nil
	}
	trees := [2]serverTree{newServerTree(nn, 0), newServerTree(nn, 1)}
	type state struct{ lastUp, lastRed, lastTreeUp, lastTreeDown, lastMc, lastDown int64 }
	st := make([]state, len(c.ranks))
	sws := make([]int32, nn)
	red := grid(nn, ppn)  // switch -> shard owner, per server and local index
	done := grid(nn, ppn) // per server and local index: the shard is final
	upID := make([]int64, nn)
	round := proxyRound(channels, size, c.step.proxyOp)
	ids := make([]int64, 0, ppn) // one server's uploads to its switch
	for ch := 0; ch < channels; ch++ {
		data := splitEven(size, channels, ch)
		if data == 0 {
			continue
		}
		for i := range st {
			st[i] = state{-1, -1, -1, -1, -1, -1}
		}
		for j, l := range nodes {
			sw, err := f.nvswitch(f.server(c.ranks[l[0]]), ch)
			if err != nil {
				return err
			}
			sws[j] = sw
		}
		tr := &trees[ch%2]
		chunks := int((data + chunk - 1) / chunk)
		for k := 0; k < chunks; k++ {
			b := min(chunk, data-int64(k)*chunk)
			shard := (b + int64(ppn) - 1) / int64(ppn)
			work := c.step.nvlsTreeWorkPs(shard)
			for j, local := range nodes {
				ids = ids[:0]
				for _, p := range local {
					deps := c.deps(nil)
					if k == 0 {
						deps = append(deps, c.entry[p]...)
					}
					ids = append(ids, c.connFlow(&st[p].lastUp, deps, c.ranks[p], sws[j], nvlsWire(b, eff), c.firstHop(k, c.ranks[p], sws[j], nvlsWire(b, eff)), int32(ch), int32(k), int32(chunks), stream.ConnNVLS))
				}
				for li, p := range local {
					// The loop's reduce work paces the GPU's shards; the
					// first loop's precedes its bytes.
					c.pace = work
					red[j][li] = c.connFlow(&st[p].lastRed, c.deps(ids), sws[j], c.ranks[p], nvlsWire(shard, eff), first(k, work), int32(ch), int32(k), int32(chunks), stream.ConnNVLS)
				}
			}
			// Per local index, a tree across servers over that shard.
			for li := 0; li < ppn; li++ {
				// up: leaves first (reverse breadth-first order).
				for i := len(tr.order) - 1; i >= 0; i-- {
					j := tr.order[i]
					par := tr.par[j]
					p := nodes[j][li]
					if par < 0 {
						continue
					}
					deps := c.deps(nil)
					deps = append(deps, red[j][li])
					for _, kj := range tr.kids[j] {
						deps = append(deps, upID[kj])
					}
					lat := c.firstHop(k, c.ranks[p], c.ranks[nodes[par][li]], shard)
					if k == 0 && len(tr.kids[j]) == 0 {
						lat += proxyPhase(ch, c.step.proxyOp)
					}
					c.proxyPace(shard, round)
					upID[j] = c.connFlow(&st[p].lastTreeUp, deps, c.ranks[p], c.ranks[nodes[par][li]], shard, lat, int32(ch), int32(k), int32(chunks), stream.ConnTree)
				}
				for _, j := range tr.order {
					p := nodes[j][li]
					if tr.par[j] < 0 {
						ready := c.deps(nil)
						ready = append(ready, red[j][li])
						for _, kj := range tr.kids[j] {
							ready = append(ready, upID[kj])
						}
						if len(ready) == 1 {
							done[j][li] = ready[0]
						} else {
							done[j][li] = c.e.Delay(c.id, c.ranks[p], 0, ready)
						}
						c.buf = ready
					}
					for _, kj := range tr.kids[j] {
						q := nodes[kj][li]
						deps := append(c.deps(nil), done[j][li])
						lat := c.firstHop(k, c.ranks[p], c.ranks[q], shard)
						c.proxyPace(shard, round)
						done[kj][li] = c.connFlow(&st[q].lastTreeDown, deps, c.ranks[p], c.ranks[q], shard, lat, int32(ch), int32(k), int32(chunks), stream.ConnTree)
					}
				}
			}
			// Multicast: each owner stores its final shard, the switch writes
			// every shard to every GPU, the owner included.
			for j, local := range nodes {
				ids = ids[:0]
				for li, p := range local {
					deps := append(c.deps(nil), done[j][li])
					ids = append(ids, c.connFlow(&st[p].lastMc, deps, c.ranks[p], sws[j], nvlsWire(shard, eff), 0, int32(ch), int32(k), int32(chunks), stream.ConnNVLS))
				}
				for _, p := range local {
					c.connFlow(&st[p].lastDown, c.deps(ids), sws[j], c.ranks[p], nvlsWire(b, eff), 0, int32(ch), int32(k), int32(chunks), stream.ConnNVLS)
				}
			}
		}
		for p := range c.ranks {
			c.exit[p] = append(c.exit[p], st[p].lastMc, st[p].lastDown)
			if st[p].lastTreeUp >= 0 {
				c.exit[p] = append(c.exit[p], st[p].lastTreeUp)
			}
		}
	}
	return nil
}

// proxyRound is how long (ps) a GPU's proxy thread takes to serve one
// step of each of its NVLS-Tree channels: every GPU heads every channel's
// tree, and its one proxy thread (proxy.cc's progress loop) posts a send
// and a receive per channel and step, in turn over the channels
// (Transport.ProxyOpUs each). A channel's sends or receives to several
// tree peers count once: the proxy groups a step's receives into one
// call (ncclNetIrecv's n buffers), and counting every tree edge made the
// held-out 4-server p5 sweep 1.4-2.7x slow at 32-256 MiB where the
// 2-server fit was within 20%. 0 without the cost.
func proxyRound(channels int, size, op int64) int64 {
	if op <= 0 {
		return 0
	}
	active := int64(min(int64(channels), max(size, 0))) // channels carrying data
	return 2 * active * op
}

// proxyPhase is when (ps) a GPU's proxy thread posts channel ch's first
// NVLS-Tree network step after channel 0's: the thread serves its
// channels in turn (proxyRound), a send and a receive each, so steps
// that are ready together (a leaf's first, after its channels' uploads
// shared its NVLink) are posted ch rounds' shares apart and reach the
// NIC one after another, as hardware and the packet backend's NIC, a
// packet at a time, have them; fluid would share the NIC among them and
// keep every channel in step. Later steps keep the phase (their pace
// counts from the step before). 0 without the cost.
func proxyPhase(ch int, op int64) int64 {
	if op <= 0 {
		return 0
	}
	return int64(ch) * 2 * op
}

// proxyPace holds a tree connection's next chunk of wire bytes b until
// its GPU's proxy has gone round its channels once per step (proxyRound;
// 0: no cost), if that is longer than its pace.
func (c *cctx) proxyPace(b, round int64) {
	if round > 0 {
		c.pace = max(c.pace, c.step.steps(b)*round)
	}
}

// nvlsTreeWorkPs is an NVLS-Tree loop's GPU work (ps) on a GPU heading a
// shard of x bytes (Transport.NVLSTreeLoopUs, NVLSTreeGBps): the cut's
// step_serial_ps plus x at step_tree_fs a byte; 0 without them.
func (s stepCosts) nvlsTreeWorkPs(x int64) int64 {
	if s.serial <= 0 && s.treeFs <= 0 {
		return 0
	}
	return s.serial + int64(math.Round(float64(x)*float64(s.treeFs)/1e3))
}

// first is v on a connection's first chunk (k 0), else 0.
func first(k int, v int64) int64 {
	if k == 0 {
		return v
	}
	return 0
}

// grid is a rows x cols table in one allocation.
func grid(rows, cols int) [][]int64 {
	flat := make([]int64, rows*cols)
	g := make([][]int64, rows)
	for i := range g {
		g[i] = flat[i*cols : (i+1)*cols]
	}
	return g
}
