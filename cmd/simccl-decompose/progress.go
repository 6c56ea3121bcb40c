package main

import (
	"fmt"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/internal/progress"
	"github.com/fabricsim/fabricsim/pkg/collective"
)

// metered passes flows on to sink and reports to meter every 4096 flows:
// the collectives emitted of total (the one the last flow belongs to, by
// its place among colls), else a count of flows.
type metered struct {
	sink  collective.Sink
	meter *progress.Meter
	index map[int64]int // collective id -> place in colls
	total int
	flows int64
}

// meteredSink is sink itself when meter is off: nothing added per flow.
func meteredSink(sink collective.Sink, meter *progress.Meter, colls []collective.Coll) collective.Sink {
	if meter == nil {
		return sink
	}
	m := &metered{sink: sink, meter: meter, index: make(map[int64]int, len(colls)), total: len(colls)}
	for i := range colls {
		m.index[colls[i].Rec.ID] = i
	}
	meter.Unit("collectives")
	if len(colls) == 0 {
		meter.Unit("flows")
	}
	return m
}

func (m *metered) Flow(f *stream.Flow) error {
	m.flows++
	if m.flows&(1<<12-1) == 0 {
		detail := fmt.Sprintf("%d flows", m.flows)
		if i, ok := m.index[f.Collective]; ok {
			m.meter.Set(int64(i), int64(m.total), detail)
		} else {
			m.meter.Set(m.flows, 0, "")
		}
	}
	return m.sink.Flow(f)
}
