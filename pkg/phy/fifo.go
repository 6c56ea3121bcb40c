// Package phy is the physical backend: it runs a flow DAG as real data
// transfers between processes over TCP, each flow moved the way an NCCL
// proxy moves it — in steps through a FIFO of NCCL_STEPS slots shared by a
// producer (the "kernel" filling buffers) and the proxy (posting sends),
// with at most NCCL_STEPS steps outstanding to the receiver.
package phy

import "sync"

// Steps is NCCL_STEPS: slots of a connection's FIFO.
const Steps = 8

// stepFIFO is NCCL's connection FIFO: the producer writes a step's size
// into slot tail%Steps and advances tail; the consumer reads slot
// head%Steps while head < tail, and frees it (size -1) and advances head
// once the step is done. At most Steps steps are outstanding.
type stepFIFO struct {
	mu         sync.Mutex
	cond       *sync.Cond
	size       [Steps]int64
	head, tail int64
	closed     bool
}

func newStepFIFO() *stepFIFO {
	f := &stepFIFO{}
	f.cond = sync.NewCond(&f.mu)
	for i := range f.size {
		f.size[i] = -1
	}
	return f
}

// put publishes a step of n bytes, waiting while the FIFO is full.
func (f *stepFIFO) put(n int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.tail-f.head >= Steps && !f.closed {
		f.cond.Wait()
	}
	if f.closed {
		return false
	}
	f.size[f.tail%Steps] = n
	f.tail++
	f.cond.Broadcast()
	return true
}

// next returns the step at index i (head <= i < tail) once published.
func (f *stepFIFO) next(i int64) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i >= f.tail && !f.closed {
		f.cond.Wait()
	}
	if f.closed {
		return 0, false
	}
	return f.size[i%Steps], true
}

// done frees the oldest step (the receiver has it).
func (f *stepFIFO) done() {
	f.mu.Lock()
	f.size[f.head%Steps] = -1
	f.head++
	f.cond.Broadcast()
	f.mu.Unlock()
}

func (f *stepFIFO) close() {
	f.mu.Lock()
	f.closed = true
	f.cond.Broadcast()
	f.mu.Unlock()
}
