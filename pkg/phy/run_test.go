package phy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A worker that lost its peer reports first; the coordinator names the
// worker that died, with the peer's report after it.
func TestFailureNamesTheDeadWorker(t *testing.T) {
	r := &runner{events: make(chan event, 4), deadline: time.Now().Add(time.Minute)}
	r.events <- event{m: &ctl{T: "fail", ID: 1, Err: "receiving from worker 0: connection reset by peer"}, delay: -1}
	// The death comes while the coordinator handles the failure (or just
	// before: either way after the failure in the channel), within the
	// grace the coordinator gives it; no sleep decides the order.
	go func() {
		r.events <- event{delay: -1, err: errors.New("worker 0 (pid 42) disconnected: EOF")}
	}()
	_, err := r.wait()
	if err == nil || !strings.HasPrefix(err.Error(), "worker 0 (pid 42) disconnected") || !strings.Contains(err.Error(), "worker 1: receiving from worker 0") {
		t.Fatalf("error %v: want the dead worker first, then the peer's report", err)
	}

	// No worker died: the failure is reported as it is.
	r.events <- event{m: &ctl{T: "fail", ID: 2, Err: "flow 7: bad data"}, delay: -1}
	if _, err := r.wait(); err == nil || err.Error() != "worker 2: flow 7: bad data" {
		t.Fatalf("error %v, want worker 2's own report", err)
	}
}
