package trace

// asyncWriter encodes the trace on another goroutine, so the Arrow or
// Parquet encoding overlaps the simulation. Rows travel in batches.
type asyncWriter struct {
	cur  []Row
	full chan []Row
	free chan []Row
	done chan error
	// aborted, set before full is closed, makes the encoder abort the
	// trace instead of completing it.
	aborted bool
}

const asyncBatchRows = 4096

// Async wraps a writer so rows are encoded on another goroutine,
// overlapping the encoding with the caller's work. Write copies the row; an
// encoding error surfaces at Close.
func Async(w Writer) Writer {
	return newAsyncWriter(w)
}

func newAsyncWriter(w Writer) *asyncWriter {
	a := &asyncWriter{full: make(chan []Row, 2), free: make(chan []Row, 3), done: make(chan error, 1)}
	for i := 0; i < 3; i++ {
		a.free <- make([]Row, 0, asyncBatchRows)
	}
	a.cur = <-a.free
	go func() {
		var err error
		for batch := range a.full {
			for i := range batch {
				if err == nil {
					err = w.Write(&batch[i])
				}
			}
			a.free <- batch[:0]
		}
		if a.aborted || err != nil {
			// A trace that lost a row must not look complete.
			Abort(w)
		} else {
			err = w.Close()
		}
		a.done <- err
	}()
	return a
}

// Write queues a copy of r. An encoding error surfaces at Close.
func (a *asyncWriter) Write(r *Row) error {
	a.cur = append(a.cur, *r)
	if len(a.cur) == asyncBatchRows {
		a.full <- a.cur
		a.cur = <-a.free
	}
	return nil
}

// Close writes what is queued, closes the trace and returns the first error.
func (a *asyncWriter) Close() error {
	if len(a.cur) > 0 {
		a.full <- a.cur
	}
	close(a.full)
	return <-a.done
}

// abort aborts the trace once the encoder has written the batches already
// queued (at most two).
func (a *asyncWriter) abort() {
	a.aborted = true
	close(a.full)
	<-a.done
}
