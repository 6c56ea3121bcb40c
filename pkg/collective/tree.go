package collective

import "github.com/fabricsim/fabricsim/formats/stream"

// btree is NCCL's binary tree over n nodes (trees.cc ncclGetBtree): the
// parent of node r and its children (at most two).
func btree(n, r int) (parent int, children []int) {
	if r == 0 {
		bit := 1
		for bit < n {
			bit <<= 1
		}
		low := bit >> 1
		for low >= n {
			low >>= 1
		}
		if n > 1 && low > 0 {
			children = []int{low}
		}
		return -1, children
	}
	bit := r & -r
	parent = (r ^ bit) | (bit << 1)
	if parent >= n {
		parent = r ^ bit
	}
	low := bit >> 1
	if low == 0 {
		return parent, nil
	}
	children = []int{r - low}
	d1 := r + low
	for low > 0 && d1 >= n {
		low >>= 1
		d1 = r + low
	}
	if low > 0 {
		children = append(children, d1)
	}
	return parent, children
}

// dtree is NCCL's double binary tree: tree 0 is btree; tree 1 mirrors it
// (even n) or shifts it by one (odd n), so every node is a leaf in one tree.
func dtree(n, r, which int) (parent int, children []int) {
	if which == 0 {
		return btree(n, r)
	}
	var to, from func(int) int
	if n%2 == 0 {
		to = func(x int) int { return n - 1 - x }
		from = to
	} else {
		to = func(x int) int { return (x - 1 + n) % n }
		from = func(x int) int { return (x + 1) % n }
	}
	p, ch := btree(n, to(r))
	if p >= 0 {
		p = from(p)
	}
	out := make([]int, len(ch))
	for i, c := range ch {
		out[i] = from(c)
	}
	return p, out
}

// serverTree is one tree of dtree over n nodes, whole: each node's parent
// (-1 at the root), its children, and the nodes breadth-first from the
// root (parents before children).
type serverTree struct {
	par   []int
	kids  [][]int
	order []int
}

func newServerTree(n, which int) serverTree {
	t := serverTree{par: make([]int, n), kids: make([][]int, n), order: make([]int, 0, n)}
	root := 0
	for j := 0; j < n; j++ {
		t.par[j], t.kids[j] = dtree(n, j, which)
		if t.par[j] < 0 {
			root = j
		}
	}
	t.order = append(t.order, root)
	for i := 0; i < len(t.order); i++ {
		t.order = append(t.order, t.kids[t.order[i]]...)
	}
	return t
}

// rankTree builds the rank-level tree of one channel, by group position:
// each rank's parent (-1 at the root) and children. Servers form NCCL's
// double binary tree and each server's ranks a chain. NCCL ties a channel
// to one NIC and enters and leaves every server through the GPU nearest
// it, so the chain starts at the GPU of the channel's rail and every link
// to another server leaves from and arrives at that GPU. Channels take the
// rails in turn (ch mod ppn) and switch trees every ppn channels: with 2·ppn
// channels (NCCL's doubled search channels, one per NIC) every NIC carries
// tree 0 once and tree 1 once, as in NCCL where channel c and c+nSearch
// share a NIC and use the two trees.
func rankTree(f Fabric, ranks []int32, ch int) (parent []int, children [][]int, root int) {
	nodes := f.nodesOf(ranks)
	parent = make([]int, len(ranks))
	children = make([][]int, len(ranks))
	link := func(child, par int) {
		parent[child] = par
		children[par] = append(children[par], child)
	}
	ppn := len(nodes[0])
	head := make([]int, len(nodes))
	for j, local := range nodes {
		start := 0
		if len(nodes) > 1 {
			start = ch % ppn % len(local)
		}
		head[j] = local[start]
		parent[head[j]] = -1
		for i := 1; i < len(local); i++ {
			link(local[(start+i)%len(local)], local[(start+i-1)%len(local)])
		}
	}
	t := newServerTree(len(nodes), ch/ppn%2)
	for j, p := range t.par {
		if p >= 0 {
			link(head[j], head[p])
		}
	}
	return parent, children, head[t.order[0]]
}

// treeAllReduce is NCCL's tree AllReduce: per channel and chunk, partial
// sums flow up the tree (a rank sends once all its children have), then
// the result flows down. Consecutive chunks on a connection stay in order.
func treeAllReduce(c *cctx, f Fabric, size int64, channels int, chunk int64, proto Proto) {
	n := len(c.ranks)
	if n < 2 || size == 0 {
		return
	}
	for ch := 0; ch < channels; ch++ {
		data := splitEven(size, channels, ch)
		if data == 0 {
			continue
		}
		parent, children, root := rankTree(f, c.ranks, ch)
		// Children before parents for the up phase.
		order := make([]int, 0, n)
		order = append(order, root)
		for i := 0; i < len(order); i++ {
			order = append(order, children[order[i]]...)
		}
		up := make([]int64, n)     // flow from p to its parent, this chunk
		lastUp := make([]int64, n) // previous chunk's
		down := make([]int64, n)   // flow from parent into p, this chunk
		lastDown := make([]int64, n)
		for i := range lastUp {
			lastUp[i], lastDown[i] = -1, -1
		}
		chunks := int((data + chunk - 1) / chunk)
		for k := 0; k < chunks; k++ {
			b := wire(min(chunk, data-int64(k)*chunk), proto)
			for i := n - 1; i >= 0; i-- {
				p := order[i]
				if p == root {
					continue
				}
				deps := c.deps(nil)
				if k == 0 {
					deps = append(deps, c.entry[p]...)
				}
				for _, q := range children[p] {
					deps = append(deps, up[q])
				}
				d := c.treeStep(k, c.ranks[p], c.ranks[parent[p]], b, treeRole(p, root, children, true))
				up[p] = c.connFlow(&lastUp[p], deps, c.ranks[p], c.ranks[parent[p]], b, d, int32(ch), int32(k), int32(chunks), stream.ConnTree)
			}
			for _, p := range order {
				for _, q := range children[p] {
					deps := c.deps(nil)
					if p == root {
						if k == 0 {
							deps = append(deps, c.entry[p]...)
						}
						for _, r := range children[p] {
							deps = append(deps, up[r])
						}
					} else {
						deps = append(deps, down[p])
					}
					d := c.treeStep(k, c.ranks[p], c.ranks[q], b, treeRole(p, root, children, false))
					down[q] = c.connFlow(&lastDown[q], deps, c.ranks[p], c.ranks[q], b, d, int32(ch), int32(k), int32(chunks), stream.ConnTree)
				}
			}
		}
		for p := 0; p < n; p++ {
			if p != root {
				c.exit[p] = append(c.exit[p], lastUp[p], lastDown[p])
			}
			for _, q := range children[p] {
				c.exit[p] = append(c.exit[p], lastDown[q])
			}
		}
	}
}

// treeStep is firstHop for a tree AllReduce's piece of wire bytes b
// from src to dst. Under Transport.TreeGBps (stepCosts.treeFs) the
// sender's thread block sends a piece no sooner than, after the one
// before, its steps' fixed work (TreeOpUs, shared by the pieces of one
// NCCL step) plus its inputs' bytes at the share r of the block's LL128
// rate (treeRole); the connection's first piece pays the hop latency and
// a whole step's cost, whose latency does not shrink with the piece, or
// under stepCosts.treeShare (tree-ll-first=share) its share, as firstHop.
func (c *cctx) treeStep(k int, src, dst int32, b int64, r role) int64 {
	d := c.firstHop(k, src, dst, b)
	if c.step.treeFs <= 0 {
		return d
	}
	c.pace = c.step.serial*c.step.steps(b)/max(c.stepDiv, 1) + r.inputs*b*c.step.treeFs*10/(r.tenths*1000)
	if k == 0 && !c.step.treeShare {
		d = c.hop(src, dst) + c.stepCost(src, dst)
		if c.step.treeWhole && c.crosses(src, dst) {
			d += c.pace * max(c.stepDiv, 1)
		}
	}
	return d
}

// role is what a tree rank's thread block does per step it sends: how
// many inputs it reads and its tenths of the block's threads.
type role struct{ inputs, tenths int64 }

// treeRole is rank p's role sending up (toward the root) or down, as
// NCCL's runTreeSplit splits a tree LL/LL128 channel's threads
// (src/device/all_reduce.h): 70% reduce up, reading each child's lines
// and its own; 30% broadcast down, reading its parent's; the root's
// block reduces its children and its own and sends down with all of them.
func treeRole(p, root int, children [][]int, up bool) role {
	switch {
	case p == root:
		return role{int64(1 + len(children[p])), 10}
	case up:
		return role{int64(1 + len(children[p])), 7}
	default:
		return role{1, 3}
	}
}
