package flowset

import "github.com/fabricsim/fabricsim/pkg/des"

// Pacer is the NCCL transport's throughput limit on a connection, the same
// in every backend: a connection cannot start its steps faster than its
// slots and per-step costs allow (pkg/collective/transport.go), so a
// transfer with a pace (Flow.PaceNs, the stream's pace_ps) holds its
// connection's next transfer until PaceNs after it started sending, even
// when its last byte left earlier. The next transfer is the dependant its
// early release (last byte sent) frees with the same source, destination
// and channel; it starts sending at the later of its own step latency and
// that time. Without paced flows the maps stay nil and nothing changes.
type Pacer struct {
	began map[int32]des.Time // paced transfers sending: since when
	until map[int32]des.Time // transfers a paced one released: earliest send
	cur   des.Time           // Sent's limit for Mark, 0 for none
	from  *Flow
}

// Began records that transfer i (f) starts sending now.
func (p *Pacer) Began(i int32, f *Flow, now des.Time) {
	if f.PaceNs == 0 {
		return
	}
	if p.began == nil {
		p.began = map[int32]des.Time{}
	}
	p.began[i] = now
}

// Sent readies Mark for transfer i's early release (its last byte has
// left): the dependants Mark sees until the next Sent are held.
func (p *Pacer) Sent(i int32, f *Flow) {
	p.cur, p.from = 0, nil
	if f.PaceNs == 0 || p.began == nil {
		return
	}
	if t, ok := p.began[i]; ok {
		delete(p.began, i)
		p.cur, p.from = t+des.Time(f.PaceNs)*1000, f
	}
}

// Clear ends Sent's release: Mark holds nothing until the next Sent.
func (p *Pacer) Clear() { p.cur, p.from = 0, nil }

// Mark holds dependant j (d), released by the last Sent's flow, when it is
// that flow's connection's next transfer.
func (p *Pacer) Mark(j int32, d *Flow) {
	if p.cur == 0 || d.Src != p.from.Src || d.Dst != p.from.Dst || d.Channel != p.from.Channel {
		return
	}
	if p.until == nil {
		p.until = map[int32]des.Time{}
	}
	p.until[j] = max(p.until[j], p.cur)
}

// Held says whether a transfer was ever held (Mark): until then every
// transfer started sending when its step latency was over.
func (p *Pacer) Held() bool { return p.until != nil }

// Take is the earliest time transfer j may start sending (0: any), and
// forgets it: call it once its step latency is over.
func (p *Pacer) Take(j int32) des.Time {
	if p.until == nil {
		return 0
	}
	t, ok := p.until[j]
	if ok {
		delete(p.until, j)
	}
	return t
}
