package packet

import (
	"math"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// mmu is the switches' memory management unit, SimAI's SwitchMmu: each
// switch's shared buffer, every ingress queue's reserve, the dynamic PFC
// thresholds and the headroom that absorbs what is in flight after a
// PAUSE. It decides (admit or drop, pause or resume the sender); the PFC
// (pfc.go) sends the frames, and under PFC_MODE port keeps its own
// per-port accounting in the nodes' occupancy (shared). Queues are
// indexed dl*nQ + q, dl being the directed link the packet came in on.
type mmu struct {
	reserve      int64 // each ingress queue's guaranteed bytes
	resumeOffset int64
	enablePFC    bool
	dynamic      bool

	ingBytes  []int64 // per queue: bytes in reserve and shared pool
	hdrmBytes []int64 // per queue: bytes in headroom
	headroom  []int64 // per directed link into a switch
	shift     []uint8 // per directed link: dynamic threshold = free >> shift
	shared    []int64 // per node: shared bytes in use (port mode: all bytes)
	buffer    []int64 // per node: buffer size
	rsrvHdrm  []int64 // per node: reserve + headroom set aside
}

// newMMU sizes the buffers of topology t's switches as cfg says: a queue's
// reserve is never less than one whole packet (4 KB against 9 KB packets
// sent every packet of a lone flow to the shared pool, and a small
// buffer's pool is empty: PAUSE or loss per packet). It reports how many
// switches have no shared pool left and the one that misses most (-1).
func newMMU(t *topo.Topology, cfg *Config) (m *mmu, short int, worst int32) {
	nd := 2 * len(t.Links)
	m = &mmu{reserve: max(cfg.ReservePerQ, int64(cfg.PayloadSize+cfg.HeaderBytes)), resumeOffset: cfg.ResumeOffset,
		enablePFC: cfg.EnablePFC, dynamic: cfg.DynamicPFC,
		ingBytes: make([]int64, nd*nQ), hdrmBytes: make([]int64, nd*nQ),
		headroom: make([]int64, nd), shift: make([]uint8, nd),
		shared: make([]int64, len(t.Nodes)), buffer: make([]int64, len(t.Nodes)), rsrvHdrm: make([]int64, len(t.Nodes))}
	// The NIC rate: the fastest NIC link (PFC alpha is scaled against it).
	nicRate := 0.0
	for _, l := range t.Links {
		if l.Kind == stream.LinkNIC && l.BWbps > nicRate {
			nicRate = l.BWbps
		}
	}
	for li, l := range t.Links {
		for dir := 0; dir < 2; dir++ {
			dl, to := 2*li+dir, l.B
			if dir == 1 {
				to = l.A
			}
			if t.Nodes[to].Kind == stream.NodeGPU {
				continue
			}
			// Headroom for what is in flight when the switch sends PAUSE
			// (3 x bandwidth-delay, as SimAI sizes it), and the dynamic
			// threshold's shift, lowered for links faster than a NIC so
			// they may claim more buffer.
			m.headroom[dl] = int64(3*l.BWbps*float64(l.LatencyPs)/8e12) + int64(2*(cfg.PayloadSize+cfg.HeaderBytes))
			sh := cfg.PFCAlphaShift
			for rate := l.BWbps; nicRate > 0 && rate > nicRate && sh > 0; rate /= 2 {
				sh--
			}
			m.shift[dl] = uint8(sh)
			m.rsrvHdrm[to] += m.reserve * nQ
			if cfg.EnablePFC {
				m.rsrvHdrm[to] += m.headroom[dl]
			}
		}
	}
	worst = -1
	for v := range t.Nodes {
		switch t.Nodes[v].Kind {
		case stream.NodeGPU:
		case stream.NodeNVSwitch:
			m.buffer[v] = math.MaxInt64 / 4 // credit-based NVLink: no loss
		default:
			m.buffer[v] = cfg.BufferBytes
			if m.rsrvHdrm[v] >= m.buffer[v] {
				short++
				if worst < 0 || m.rsrvHdrm[v] > m.rsrvHdrm[worst] {
					worst = int32(v)
				}
			}
		}
	}
	return m, short, worst
}

// threshold is the shared bytes a queue of switch v fed by link dl may
// hold before it pauses its sender (or, lossy, drops).
func (m *mmu) threshold(v int32, dl int32) int64 {
	free := m.buffer[v] - m.rsrvHdrm[v] - m.shared[v]
	if !m.dynamic {
		free = m.buffer[v] - m.rsrvHdrm[v]
	}
	if free < 0 {
		free = 0
	}
	return free >> m.shift[dl]
}

func (m *mmu) sharedUsed(k int) int64 {
	return max(0, m.ingBytes[k]-m.reserve)
}

// admit takes size bytes into queue q of switch v, come in on link dl,
// whose sender is paused or not (the PFC's state): ok false when they do
// not fit (the packet is dropped); pause when the queue has just gone over
// its share and must pause its sender.
func (m *mmu) admit(v, dl int32, q uint8, size int64, paused bool) (ok, pause bool) {
	k := int(dl)*nQ + int(q)
	thr := m.threshold(v, dl)
	if !m.enablePFC {
		// Lossy: a packet that does not fit the queue's share is dropped.
		if m.ingBytes[k]+size > m.reserve && m.sharedUsed(k)+size > thr {
			return false, false
		}
	} else if size+m.hdrmBytes[k] > m.headroom[dl] && m.sharedUsed(k)+size > thr {
		return false, false
	}
	newBytes := m.ingBytes[k] + size
	switch {
	case newBytes <= m.reserve:
		m.ingBytes[k] = newBytes
	case m.enablePFC && newBytes-m.reserve > thr:
		m.hdrmBytes[k] += size
	default:
		m.ingBytes[k] = newBytes
		m.shared[v] += min(size, newBytes-m.reserve)
	}
	// A queue within its reserve never pauses its sender, even with the
	// shared pool exhausted (threshold 0): the reserve is guaranteed.
	if su := m.sharedUsed(k); m.enablePFC && !paused && (m.hdrmBytes[k] > 0 || su > 0 && su >= m.threshold(v, dl)) {
		return true, true
	}
	return true, false
}

// release gives back size bytes of queue q of switch v (come in on dl);
// resume when its sender is paused and the queue is back under its
// threshold by the resume offset: the sender may go on.
func (m *mmu) release(v, dl int32, q uint8, size int64, paused bool) (resume bool) {
	k := int(dl)*nQ + int(q)
	fromHdrm := min(m.hdrmBytes[k], size)
	fromShared := min(size-fromHdrm, max(0, m.ingBytes[k]-m.reserve))
	m.hdrmBytes[k] -= fromHdrm
	m.ingBytes[k] -= size - fromHdrm
	m.shared[v] -= fromShared
	if paused && m.hdrmBytes[k] == 0 {
		if used := m.sharedUsed(k); used == 0 || used+m.resumeOffset <= m.threshold(v, dl) {
			return true
		}
	}
	return false
}
