package phy

import (
	"sync"
	"testing"
)

// The step FIFO never lets more than NCCL_STEPS steps be outstanding, and
// the consumer sees steps in order with their sizes.
func TestStepFIFO(t *testing.T) {
	f := newStepFIFO()
	const n = 100
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := int64(0); i < n; i++ {
			f.put(i + 1)
		}
	}()
	for i := int64(0); i < n; i++ {
		size, ok := f.next(i)
		if !ok || size != i+1 {
			t.Fatalf("step %d: size %d ok %v", i, size, ok)
		}
		f.mu.Lock()
		out := f.tail - f.head
		f.mu.Unlock()
		if out > Steps || out < 1 {
			t.Fatalf("step %d: %d steps outstanding", i, out)
		}
		f.done()
	}
	wg.Wait()
	for _, s := range f.size {
		if s != -1 {
			t.Fatalf("slot still holds %d after every step completed", s)
		}
	}
	// A full FIFO blocks the producer until a step is done.
	g := newStepFIFO()
	for i := 0; i < Steps; i++ {
		g.put(1)
	}
	put := make(chan bool)
	go func() { put <- g.put(1) }()
	select {
	case <-put:
		t.Fatal("put into a full FIFO returned")
	default:
	}
	g.done()
	if !<-put {
		t.Fatal("put failed after a slot freed")
	}
}
