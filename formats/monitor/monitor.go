// Package monitor writes flowsim-packet's monitor traces: one Parquet file
// per monitor under --monitor-dir, each row starting with time_ns, readable
// as they are with pandas.read_parquet. The spec is formats/monitor.md.
package monitor

import (
	"fmt"
	"path/filepath"

	"github.com/fabricsim/fabricsim/internal/outfile"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// QLen is one switch egress queue's length at a sampling instant (queues
// that are empty are not written).
type QLen struct {
	TimeNs int64  `parquet:"time_ns"`
	Switch int32  `parquet:"switch"`
	Link   int32  `parquet:"link"`  // topology link index of the egress port
	To     int32  `parquet:"to"`    // node the port sends to
	Queue  int32  `parquet:"queue"` // priority queue 0..7
	Bytes  int64  `parquet:"bytes"`
	Role   string `parquet:"role,dict"` // asw, psw, nvswitch ...
}

// HostBW is a GPU's transmitted bandwidth over one sampling interval.
type HostBW struct {
	TimeNs  int64   `parquet:"time_ns"`
	Node    int32   `parquet:"node"`
	TxBytes int64   `parquet:"tx_bytes"`
	Gbps    float64 `parquet:"gbps"`
}

// Rate is a queue pair's congestion-controlled sending rate.
type Rate struct {
	TimeNs  int64   `parquet:"time_ns"`
	FlowID  int64   `parquet:"flow_id"`
	Src     int32   `parquet:"src"`
	Dst     int32   `parquet:"dst"`
	RateBps float64 `parquet:"rate_bps"`
	WinB    int64   `parquet:"win_bytes"`
}

// CNP counts the congestion notifications a queue pair received in one
// sampling interval.
type CNP struct {
	TimeNs int64 `parquet:"time_ns"`
	FlowID int64 `parquet:"flow_id"`
	Src    int32 `parquet:"src"`
	Dst    int32 `parquet:"dst"`
	CNPs   int64 `parquet:"cnps"`
}

// PFC is one PAUSE or RESUME a switch sent upstream.
type PFC struct {
	TimeNs   int64  `parquet:"time_ns"`
	Switch   int32  `parquet:"switch"`
	Upstream int32  `parquet:"upstream"`
	Queue    int32  `parquet:"queue"`
	Event    string `parquet:"event,dict"` // pause | resume
}

// File is one monitor's Parquet output, buffered.
type File[T any] struct {
	f   *outfile.File // under its name only once closed whole
	w   *parquet.GenericWriter[T]
	buf []T
	err error
}

// Create opens dir/name for rows of type T.
func Create[T any](dir, name string) (*File[T], error) {
	f, err := outfile.Create(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	w := parquet.NewGenericWriter[T](f, parquet.Compression(&zstd.Codec{Level: zstd.SpeedFastest}))
	return &File[T]{f: f, w: w}, nil
}

// Add appends a row (written in batches).
func (m *File[T]) Add(r T) {
	m.buf = append(m.buf, r)
	if len(m.buf) >= 4096 {
		m.flush()
	}
}

func (m *File[T]) flush() {
	if len(m.buf) == 0 || m.err != nil {
		m.buf = m.buf[:0]
		return
	}
	_, m.err = m.w.Write(m.buf)
	m.buf = m.buf[:0]
}

// Close flushes and closes the file.
func (m *File[T]) Close() error {
	m.flush()
	if err := m.w.Close(); err != nil && m.err == nil {
		m.err = err
	}
	if m.err != nil {
		m.f.Abort()
		return fmt.Errorf("%s: %v", m.f.Path(), m.err)
	}
	if err := m.f.Commit(); err != nil {
		return fmt.Errorf("%s: %v", m.f.Path(), err)
	}
	return nil
}
