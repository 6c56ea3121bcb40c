package packet

import (
	"github.com/fabricsim/fabricsim/formats/monitor"
	"github.com/fabricsim/fabricsim/pkg/des"
)

// Monitor kinds, the Arg of evMonitor events.
const (
	monQLen = iota
	monBW
	monQP
)

// Monitors samples queue lengths, host bandwidth, per-QP rates and CNPs
// between MON_START and MON_END, and logs every PFC frame, as SimAI's
// monitor files do. Rows go to the sinks that are set.
type Monitors struct {
	QLen *monitor.File[monitor.QLen]
	BW   *monitor.File[monitor.HostBW]
	Rate *monitor.File[monitor.Rate]
	CNP  *monitor.File[monitor.CNP]
	PFC  *monitor.File[monitor.PFC]
	// OnRate, if set, sees every rate sample (tests use it).
	OnRate func(timePs int64, flow int64, rateBps float64)

	lastTx []int64 // per GPU: bytes sent at the previous BW sample
	tx     []int64 // per GPU: bytes sent, reused by every BW sample
	cnps   []int64 // per QP slot: CNPs since the previous QP sample
}

// OpenMonitors creates the five monitor files in dir.
func OpenMonitors(dir string) (*Monitors, error) {
	m := &Monitors{}
	var err error
	m.QLen, err = monitor.Create[monitor.QLen](dir, "qlen.parquet")
	if err == nil {
		m.BW, err = monitor.Create[monitor.HostBW](dir, "host_bw.parquet")
	}
	if err == nil {
		m.Rate, err = monitor.Create[monitor.Rate](dir, "qp_rate.parquet")
	}
	if err == nil {
		m.CNP, err = monitor.Create[monitor.CNP](dir, "cnp.parquet")
	}
	if err == nil {
		m.PFC, err = monitor.Create[monitor.PFC](dir, "pfc.parquet")
	}
	if err != nil {
		m.Close() // the files created before the failure
		return nil, err
	}
	return m, nil
}

// Close flushes the files that are set and returns the first error.
func (m *Monitors) Close() error {
	var first error
	closeFile(m.QLen, &first)
	closeFile(m.BW, &first)
	closeFile(m.Rate, &first)
	closeFile(m.CNP, &first)
	closeFile(m.PFC, &first)
	return first
}

func closeFile[T any](f *monitor.File[T], first *error) {
	if f == nil {
		return
	}
	if err := f.Close(); err != nil && *first == nil {
		*first = err
	}
}

func (m *Monitors) start(s *Sim) {
	m.lastTx = make([]int64, s.t.GPUs)
	m.tx = make([]int64, s.t.GPUs)
	c := &s.cfg
	if m.QLen != nil {
		s.push(c.MonStartPs, evMonitor, 0, monQLen)
	}
	if m.BW != nil {
		s.push(c.MonStartPs+c.BWMonPs, evMonitor, 0, monBW)
	}
	if m.Rate != nil || m.CNP != nil || m.OnRate != nil {
		s.push(c.MonStartPs, evMonitor, 0, monQP)
	}
}

func (m *Monitors) sample(s *Sim, kind int64) {
	c := &s.cfg
	ns := des.Time(s.now).Ns()
	switch kind {
	case monQLen:
		for pid := range s.fab.ports {
			p := &s.fab.ports[pid]
			if !s.fab.isSwitch[p.from] {
				continue
			}
			for q := 0; q < nQ; q++ {
				if p.qBytes[q] > 0 {
					m.QLen.Add(monitor.QLen{TimeNs: ns, Switch: p.from, Link: int32(pid / 2), To: p.to, Queue: int32(q),
						Bytes: p.qBytes[q], Role: s.t.Nodes[p.from].Role})
				}
			}
		}
	case monBW:
		tx := m.tx
		clear(tx)
		for pid := range s.fab.ports {
			if p := &s.fab.ports[pid]; int(p.from) < s.t.GPUs {
				tx[p.from] += p.txBytes
			}
		}
		for g := range tx {
			d := tx[g] - m.lastTx[g]
			m.lastTx[g] = tx[g]
			m.BW.Add(monitor.HostBW{TimeNs: ns, Node: int32(g), TxBytes: d, Gbps: float64(d) * 8e3 / float64(c.BWMonPs)})
		}
	case monQP:
		if len(m.cnps) < len(s.nic.qps) {
			m.cnps = append(m.cnps, make([]int64, len(s.nic.qps)-len(m.cnps))...)
		}
		for qi := range s.nic.qps {
			q := &s.nic.qps[qi]
			if q.done || q.size == 0 {
				continue
			}
			fid := s.flows.id(q.flow)
			if m.Rate != nil {
				m.Rate.Add(monitor.Rate{TimeNs: ns, FlowID: fid, Src: s.flows.src(q.flow), Dst: s.flows.dst(q.flow), RateBps: q.cc.Rate, WinB: q.cc.BaseWin})
			}
			if m.OnRate != nil {
				m.OnRate(s.now, fid, q.cc.Rate)
			}
			if m.CNP != nil && m.cnps[qi] > 0 {
				m.CNP.Add(monitor.CNP{TimeNs: ns, FlowID: fid, Src: s.flows.src(q.flow), Dst: s.flows.dst(q.flow), CNPs: m.cnps[qi]})
			}
			m.cnps[qi] = 0
		}
	}
	// Keep sampling while the run has work and the window is open.
	if s.flows.run.Done() == s.flows.DAG.Len() {
		return
	}
	iv := c.QPMonPs
	switch kind {
	case monQLen:
		iv = c.QLenMonPs
	case monBW:
		iv = c.BWMonPs
	}
	if next := s.now + iv; next <= c.MonEndPs {
		s.push(next, evMonitor, 0, kind)
	}
}

func (m *Monitors) pfc(now int64, sw, up int32, q int, pause bool) {
	if m.PFC == nil {
		return
	}
	ev := "resume"
	if pause {
		ev = "pause"
	}
	m.PFC.Add(monitor.PFC{TimeNs: des.Time(now).Ns(), Switch: sw, Upstream: up, Queue: int32(q), Event: ev})
}

func (m *Monitors) cnp(qi int32) {
	if int(qi) >= len(m.cnps) {
		m.cnps = append(m.cnps, make([]int64, int(qi)+1-len(m.cnps))...)
	}
	m.cnps[qi]++
}

// qpDone forgets a finished pair's CNPs since the last sample, as it is no
// longer sampled: they must not be reported for the next pair in its slot.
func (m *Monitors) qpDone(qi int32) {
	if int(qi) < len(m.cnps) {
		m.cnps[qi] = 0
	}
}
