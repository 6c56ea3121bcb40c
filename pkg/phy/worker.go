package phy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// ctl is a control message between the coordinator and a worker.
type ctl struct {
	T     string   `msgpack:"t"` // hello, peers, send, sent, recv, quit, fail
	ID    int      `msgpack:"id"`
	Addr  string   `msgpack:"addr"`
	Peers []string `msgpack:"peers"`
	Flow  int32    `msgpack:"flow"`
	Dst   int      `msgpack:"dst"`
	Size  int64    `msgpack:"size"`
	Step  int64    `msgpack:"step"`
	At    int64    `msgpack:"at"` // wall clock, UnixNano: workers share the host's clock; send: no byte leaves before it
	Err   string   `msgpack:"err"`
}

// ctlConn sends and receives control messages on one connection.
type ctlConn struct {
	mu  sync.Mutex
	bw  *bufio.Writer
	enc *msgpack.Encoder
	dec *msgpack.Decoder
	c   net.Conn
}

func newCtlConn(c net.Conn) *ctlConn {
	bw := bufio.NewWriter(c)
	return &ctlConn{bw: bw, enc: msgpack.NewEncoder(bw), dec: msgpack.NewDecoder(bufio.NewReader(c)), c: c}
}

func (c *ctlConn) send(m *ctl) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enc.Encode(m); err != nil {
		return err
	}
	return c.bw.Flush()
}

func (c *ctlConn) recv() (*ctl, error) {
	var m ctl
	if err := c.dec.Decode(&m); err != nil {
		return nil, err
	}
	return &m, nil
}

// Data frames: a step of a flow's payload, sender to receiver, and the
// receiver's credit for it coming back on the same connection.
const (
	frameData   = 'D'
	frameCredit = 'C'
	dataHeader  = 1 + 4 + 8 + 8 + 4 // kind, flow, total, offset, length
)

// pattern is the byte a flow carries at an offset, so receivers check
// every byte that crosses the wire. It repeats every 256 bytes, so one
// precomputed run of step+256 bytes serves any offset.
func pattern(flow int32, off int64) byte { return byte(int64(flow)*131 + off) }

// patternRun returns n+256 pattern bytes of a flow from offset 0; the
// bytes at offset off are run[off%256:][:len].
func patternRun(flow int32, n int) []byte {
	b := make([]byte, n+256)
	for k := range b {
		b[k] = pattern(flow, int64(k))
	}
	return b
}

// Worker is one process of a physical run: it moves the flows whose
// source ranks it hosts and receives those whose destination it hosts.
type Worker struct {
	id    int
	ctl   *ctlConn
	peers []string
	ln    net.Listener

	mu    sync.Mutex
	out   map[int]*dataConn // by destination worker
	errMu sync.Mutex
	err   error
}

// dataConn is a sender-side connection to one peer: frames are written
// whole under a lock; the reader collects credits per flow.
type dataConn struct {
	mu      sync.Mutex
	w       *bufio.Writer
	c       net.Conn
	credits sync.Map // flow -> chan struct{}
}

// RunWorker connects to the coordinator at addr and serves until told to
// quit. It is what `phyrun --worker` runs in each child process.
func RunWorker(addr string, id int) error {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return fmt.Errorf("worker %d: coordinator %s: %v", id, addr, err)
	}
	w := &Worker{id: id, ctl: newCtlConn(c), out: map[int]*dataConn{}}
	if w.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return err
	}
	defer w.ln.Close()
	if err := w.ctl.send(&ctl{T: "hello", ID: id, Addr: w.ln.Addr().String()}); err != nil {
		return err
	}
	m, err := w.ctl.recv()
	if err != nil || m.T != "peers" {
		return fmt.Errorf("worker %d: expected the peer list: %v", id, err)
	}
	w.peers = m.Peers
	go w.accept()
	for {
		m, err := w.ctl.recv()
		if err != nil {
			return fmt.Errorf("worker %d: control connection: %v", id, err)
		}
		switch m.T {
		case "quit":
			return nil
		case "send":
			go w.sendFlow(m.Flow, m.Dst, m.Size, m.Step, m.At)
		}
	}
}

func (w *Worker) fail(err error) {
	w.errMu.Lock()
	first := w.err == nil
	if first {
		w.err = err
	}
	w.errMu.Unlock()
	if first {
		w.ctl.send(&ctl{T: "fail", ID: w.id, Err: err.Error()})
	}
}

func (w *Worker) conn(dst int) (*dataConn, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if d := w.out[dst]; d != nil {
		return d, nil
	}
	c, err := net.DialTimeout("tcp", w.peers[dst], 10*time.Second)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	d := &dataConn{w: bufio.NewWriterSize(c, 1<<16), c: c}
	w.out[dst] = d
	go d.readCredits(w)
	return d, nil
}

func (d *dataConn) readCredits(w *Worker) {
	r := bufio.NewReader(d.c)
	var b [5]byte
	for {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return
		}
		flow := int32(binary.LittleEndian.Uint32(b[1:]))
		if ch, ok := d.credits.Load(flow); ok && b[0] == frameCredit {
			ch.(chan struct{}) <- struct{}{}
		}
	}
}

// sendFlow moves one flow: a producer fills the step FIFO, the proxy posts
// each step to the receiver and frees its slot when the credit returns.
// The first byte leaves at wall time start (the step latency after
// release), not before.
func (w *Worker) sendFlow(flow int32, dst int, size, step, start int64) {
	if dst == w.id {
		// Both ends in this process: a local copy, as within one server.
		waitUntil(start)
		now := time.Now().UnixNano()
		w.ctl.send(&ctl{T: "recv", Flow: flow, At: now})
		w.ctl.send(&ctl{T: "sent", Flow: flow, At: now})
		return
	}
	d, err := w.conn(dst)
	if err != nil {
		w.fail(fmt.Errorf("flow %d: connecting to worker %d: %v", flow, dst, err))
		return
	}
	steps := (size + step - 1) / step
	credits := make(chan struct{}, Steps)
	d.credits.Store(flow, credits)
	// Only this transfer's entry: a later transfer may reuse the id.
	defer d.credits.CompareAndDelete(flow, credits)
	fifo := newStepFIFO()
	go func() {
		for off := int64(0); off < size; off += step {
			if !fifo.put(min(step, size-off)) {
				return
			}
		}
	}()
	buf := make([]byte, dataHeader+int(min(step, size)))
	run := patternRun(flow, int(min(step, size)))
	var off int64
	acked := int64(0)
	waitUntil(start)
	for i := int64(0); i < steps; i++ {
		n, ok := fifo.next(i)
		if !ok {
			return
		}
		buf[0] = frameData
		binary.LittleEndian.PutUint32(buf[1:], uint32(flow))
		binary.LittleEndian.PutUint64(buf[5:], uint64(size))
		binary.LittleEndian.PutUint64(buf[13:], uint64(off))
		binary.LittleEndian.PutUint32(buf[21:], uint32(n))
		copy(buf[dataHeader:dataHeader+int(n)], run[off%256:])
		d.mu.Lock()
		_, err := d.w.Write(buf[:dataHeader+int(n)])
		if err == nil {
			err = d.w.Flush()
		}
		d.mu.Unlock()
		if err != nil {
			w.fail(fmt.Errorf("flow %d: sending to worker %d: %v", flow, dst, err))
			fifo.close()
			return
		}
		off += n
		// Free slots as credits arrive; block only when all are in flight.
		for acked < i+1-Steps+1 || (i == steps-1 && acked < steps) {
			select {
			case <-credits:
				fifo.done()
				acked++
			case <-time.After(60 * time.Second):
				w.fail(fmt.Errorf("flow %d: no credit from worker %d for 60 s", flow, dst))
				fifo.close()
				return
			}
		}
	}
	w.ctl.send(&ctl{T: "sent", Flow: flow, At: time.Now().UnixNano()})
}

func (w *Worker) accept() {
	for {
		c, err := w.ln.Accept()
		if err != nil {
			return
		}
		go w.receive(c)
	}
}

// receive serves one incoming connection: it checks every byte, returns a
// credit per step, and reports receive completion when a flow's last byte
// is in (the size travels in every step's header, so the first tells it).
func (w *Worker) receive(c net.Conn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 1<<16)
	cw := bufio.NewWriter(c)
	got := map[int32]int64{}
	runs := map[int32][]byte{}
	var hdr [dataHeader]byte
	var payload []byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if !errors.Is(err, io.EOF) {
				w.fail(fmt.Errorf("receiving: %v", err))
			}
			return
		}
		if hdr[0] != frameData {
			w.fail(fmt.Errorf("receiving: unexpected frame %q", hdr[0]))
			return
		}
		flow := int32(binary.LittleEndian.Uint32(hdr[1:]))
		total := int64(binary.LittleEndian.Uint64(hdr[5:]))
		off := int64(binary.LittleEndian.Uint64(hdr[13:]))
		n := int(binary.LittleEndian.Uint32(hdr[21:]))
		if cap(payload) < n {
			payload = make([]byte, n)
		}
		p := payload[:n]
		if _, err := io.ReadFull(r, p); err != nil {
			w.fail(fmt.Errorf("flow %d: receiving: %v", flow, err))
			return
		}
		run := runs[flow]
		if len(run) < n+256 {
			run = patternRun(flow, n)
			runs[flow] = run
		}
		if !bytes.Equal(p, run[off%256:off%256+int64(n)]) {
			w.fail(fmt.Errorf("flow %d: bytes %d..%d arrived corrupted", flow, off, off+int64(n)))
			return
		}
		got[flow] += int64(n)
		var cr [5]byte
		cr[0] = frameCredit
		binary.LittleEndian.PutUint32(cr[1:], uint32(flow))
		cw.Write(cr[:])
		if err := cw.Flush(); err != nil {
			w.fail(fmt.Errorf("flow %d: credit: %v", flow, err))
			return
		}
		if got[flow] == total {
			delete(got, flow)
			delete(runs, flow)
			w.ctl.send(&ctl{T: "recv", Flow: flow, At: time.Now().UnixNano()})
		}
	}
}
