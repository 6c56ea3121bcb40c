package trace

import (
	"errors"
	"testing"
)

// recWriter records what reaches it; Write fails at row failAt (>= 0).
type recWriter struct {
	ids             []int64
	failAt          int
	closed, aborted int
}

func (w *recWriter) Write(r *Row) error {
	if len(w.ids) == w.failAt {
		return errors.New("disk full")
	}
	w.ids = append(w.ids, r.FlowID)
	return nil
}

func (w *recWriter) Close() error { w.closed++; return nil }
func (w *recWriter) abort()       { w.aborted++ }

// Rows reach the encoder in order across batches, and the trace is
// closed once; an encoding error aborts it (no valid footer on a trace
// missing rows) and surfaces at Close.
func TestAsyncOrderAndError(t *testing.T) {
	const n = 3*asyncBatchRows + 5
	for _, failAt := range []int{-1, 0, asyncBatchRows + 7} {
		rec := &recWriter{failAt: failAt}
		a := Async(rec)
		for i := range n {
			if err := a.Write(&Row{FlowID: int64(i)}); err != nil {
				t.Fatalf("failAt %d: Write: %v", failAt, err)
			}
		}
		err := a.Close()
		want := n
		if failAt >= 0 {
			want = failAt
			if err == nil || rec.aborted != 1 || rec.closed != 0 {
				t.Fatalf("failAt %d: err %v, aborted %d, closed %d: want the error, aborted once, never closed", failAt, err, rec.aborted, rec.closed)
			}
		} else if err != nil || rec.closed != 1 || rec.aborted != 0 {
			t.Fatalf("err %v, closed %d, aborted %d: want closed once", err, rec.closed, rec.aborted)
		}
		if len(rec.ids) != want {
			t.Fatalf("failAt %d: %d rows written, want %d", failAt, len(rec.ids), want)
		}
		for i, id := range rec.ids {
			if id != int64(i) {
				t.Fatalf("failAt %d: row %d is flow %d", failAt, i, id)
			}
		}
	}
}
