package packet

import "math"

// PFC_MODE port: the switch accounts each ingress port as one queue, as
// htsim's lossless input queues and many switches do. Above the high
// threshold it sends one PAUSE for the whole port; the upstream egress
// stops every data priority until a RESUME, which comes once the port has
// drained below the low threshold. No refresh, no dynamic threshold, no
// headroom: the gap between the buffer and the high threshold absorbs what
// is in flight. Control frames (ACK, NACK, CNP) still pass, as they do
// under priority PFC. A switch whose buffer is nevertheless full drops.

// portPFC is the queue number a port-wide PAUSE or RESUME carries.
const portPFC = -1

// portThresholds returns the high and low thresholds in bytes, htsim's 15
// and 12 packets unless configured.
func (c *Config) portThresholds() (high, low int64) {
	pkt := float64(c.PayloadSize + c.HeaderBytes)
	kb := func(x, pkts float64) int64 {
		if x == 0 {
			return int64(pkts * pkt)
		}
		return int64(math.Round(x * 1024))
	}
	return kb(c.PortHighKB, 15), kb(c.PortLowKB, 12)
}

// enterPort admits a data packet into switch v under port PFC.
func (s *Sim) enterPort(v int32, pkt *packet) bool {
	dl := pkt.inDL
	ok, pause := s.mmu.admitPort(v, dl, int64(pkt.wire))
	if ok {
		s.Stats.PeakIngress = max(s.Stats.PeakIngress, s.mmu.portIng[dl])
	}
	if pause {
		s.sendPFC(dl, portPFC, true)
	}
	return ok
}

// leavePort releases a departing data packet's bytes and resumes the
// sender once the port is below the low threshold.
func (s *Sim) leavePort(pkt *packet) {
	dl := pkt.inDL
	pkt.inDL = -1
	if s.mmu.releasePort(s.ports[dl].to, dl, int64(pkt.wire)) {
		s.sendPFC(dl, portPFC, false)
	}
}

// onPortPFC pauses (until resumed) or resumes every data priority of
// egress port pid.
func (s *Sim) onPortPFC(pid int32, pause bool) {
	p := &s.ports[pid]
	for q := 1; q < nQ; q++ {
		p.paused[q] = pause
		p.pauseTill[q] = maxTime
	}
	if !pause {
		s.tryTx(pid)
	}
}

// portDeadlock looks for a deadlock (waitfor.go) when, under port PFC,
// nothing has moved for the stall window while a port is still paused:
// without refreshes only a retransmission timeout keeps such a run's
// clock going. It reports whether the run stops.
func (s *Sim) portDeadlock() bool {
	if s.mmu.portIng == nil || s.stalled != nil || s.now-s.lastMoveAny <= s.stallWindow() || !s.mmu.anyPortPaused() {
		return s.stalled != nil
	}
	if s.part != nil {
		s.watch.suspect, s.watch.v, s.watch.k = true, -1, -1
		return false
	}
	s.lookForDeadlock([]*Sim{s}, s.now, -1, -1)
	return s.stalled != nil
}
