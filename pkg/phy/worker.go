package phy

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/fabricsim/fabricsim/pkg/flowset"
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
	Token string   `msgpack:"token"` // hello: the run's secret, which the coordinator handed its workers
	Seed  uint64   `msgpack:"seed"`  // peers: the run's pattern seed
	Max   int64    `msgpack:"max"`   // peers: the largest step a frame may carry
	Copy  bool     `msgpack:"copy"`  // send: both ends are in one server, a local copy
}

// ctlConn sends and receives control messages on one connection.
type ctlConn struct {
	mu  sync.Mutex
	bw  *bufio.Writer
	enc *msgpack.Encoder
	dec *msgpack.Decoder
	c   net.Conn
}

func newCtlConn(c net.Conn) *ctlConn { return newCtlConnReader(c, c) }

// newCtlConnReader is newCtlConn reading through r (a limit on c).
func newCtlConnReader(c net.Conn, r io.Reader) *ctlConn {
	bw := bufio.NewWriter(c)
	return &ctlConn{bw: bw, enc: msgpack.NewEncoder(bw), dec: msgpack.NewDecoder(bufio.NewReader(r)), c: c}
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

// tokenLen is the length of the run's secret: a worker proves with it,
// on every data connection, that the coordinator started it; any other
// local process that connects is dropped before a frame is read.
const tokenLen = 16

// handshake opens a data connection: a marker, the token, the sender.
const handshakeLen = 1 + tokenLen + 4

// NewToken makes a run's secret.
func NewToken() (string, error) {
	var b [tokenLen]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// fillPattern writes the bytes a flow carries at offsets off..off+len(dst):
// each 8-byte word a hash of the run's seed, the flow and the word's index,
// so no two flows, offsets or runs share a pattern and a misplaced,
// duplicated or stale step is caught on arrival.
func fillPattern(dst []byte, seed uint64, flow int32, off int64) {
	base := seed ^ uint64(uint32(flow))<<40
	for i := 0; i < len(dst); {
		o := off + int64(i)
		w := mix64(base ^ uint64(o>>3))
		j := int(o & 7)
		if j == 0 && len(dst)-i >= 8 {
			binary.LittleEndian.PutUint64(dst[i:], w)
			i += 8
			continue
		}
		dst[i] = byte(w >> (8 * j))
		i++
	}
}

// mix64 is splitmix64's finaliser.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Worker is one process of a physical run: it moves the flows whose
// source ranks it hosts and receives those whose destination it hosts.
type Worker struct {
	id      int
	ctl     *ctlConn
	peers   []string
	ln      net.Listener
	token   []byte
	seed    uint64
	maxStep int64

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

// TokenEnv carries the run's secret from the coordinator to its workers:
// the environment, unlike the command line, is not readable by other users.
const TokenEnv = "FABRICSIM_PHY_TOKEN"

// RunWorker connects to the coordinator at addr and serves until told to
// quit. It is what `phyrun --worker` runs in each child process; token is
// the run's secret (TokenEnv).
func RunWorker(addr string, id int, token string) error {
	tok, err := hex.DecodeString(token)
	if err != nil || len(tok) != tokenLen {
		return fmt.Errorf("worker %d: no valid run token in %s (phyrun starts its workers itself)", id, TokenEnv)
	}
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return fmt.Errorf("worker %d: coordinator %s: %v", id, addr, err)
	}
	w := &Worker{id: id, ctl: newCtlConn(c), out: map[int]*dataConn{}, token: tok}
	if w.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return err
	}
	defer w.ln.Close()
	if err := w.ctl.send(&ctl{T: "hello", ID: id, Addr: w.ln.Addr().String(), Token: token}); err != nil {
		return err
	}
	m, err := w.ctl.recv()
	if err != nil || m.T != "peers" {
		return fmt.Errorf("worker %d: expected the peer list: %v", id, err)
	}
	w.peers, w.seed, w.maxStep = m.Peers, m.Seed, m.Max
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
			go w.sendFlow(m.Flow, m.Dst, m.Size, m.Step, m.At, m.Copy)
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
	var hs [handshakeLen]byte
	hs[0] = 'H'
	copy(hs[1:], w.token)
	binary.LittleEndian.PutUint32(hs[1+tokenLen:], uint32(w.id))
	if _, err := c.Write(hs[:]); err != nil {
		c.Close()
		return nil, err
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
//
// A transfer inside one server is a local copy (NVLink is not what this
// backend measures); any other goes through a socket, to this worker
// itself when it hosts both servers, so that every byte between servers
// crosses TCP however the servers are spread.
func (w *Worker) sendFlow(flow int32, dst int, size, step, start int64, local bool) {
	if local {
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
		fillPattern(buf[dataHeader:dataHeader+int(n)], w.seed, flow, off)
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

// receive serves one incoming connection: it checks the handshake (a
// connection without the run's token is closed unread), every frame's
// bounds and every byte, returns a credit per step, and reports receive
// completion when a flow's last byte is in (the size travels in every
// step's header, so the first tells it).
func (w *Worker) receive(c net.Conn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 1<<16)
	var hs [handshakeLen]byte
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(r, hs[:]); err != nil || hs[0] != 'H' || subtle.ConstantTimeCompare(hs[1:1+tokenLen], w.token) != 1 {
		return // not a worker of this run
	}
	from := int(binary.LittleEndian.Uint32(hs[1+tokenLen:]))
	c.SetReadDeadline(time.Time{})
	cw := bufio.NewWriter(c)
	got := map[int32]int64{}
	var hdr [dataHeader]byte
	var payload, want []byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if !errors.Is(err, io.EOF) {
				w.fail(fmt.Errorf("receiving from worker %d: %v", from, err))
			}
			return
		}
		if hdr[0] != frameData {
			w.fail(fmt.Errorf("receiving from worker %d: unexpected frame %q", from, hdr[0]))
			return
		}
		flow := int32(binary.LittleEndian.Uint32(hdr[1:]))
		total := int64(binary.LittleEndian.Uint64(hdr[5:]))
		off := int64(binary.LittleEndian.Uint64(hdr[13:]))
		n := int64(binary.LittleEndian.Uint32(hdr[21:]))
		// Bounds before any allocation: a header is not trusted to size a buffer.
		if n <= 0 || n > w.maxStep || total <= 0 || total > flowset.MaxFlowBytes || off < 0 || off > total-n {
			w.fail(fmt.Errorf("flow %d from worker %d: a frame of %d bytes at offset %d of %d (steps are at most %d bytes)", flow, from, n, off, total, w.maxStep))
			return
		}
		if int64(cap(payload)) < n {
			payload, want = make([]byte, n), make([]byte, n)
		}
		p := payload[:n]
		if _, err := io.ReadFull(r, p); err != nil {
			w.fail(fmt.Errorf("flow %d: receiving from worker %d: %v", flow, from, err))
			return
		}
		fillPattern(want[:n], w.seed, flow, off)
		if !bytes.Equal(p, want[:n]) {
			w.fail(fmt.Errorf("flow %d from worker %d: bytes %d..%d arrived corrupted", flow, from, off, off+n))
			return
		}
		got[flow] += n
		var cr [5]byte
		cr[0] = frameCredit
		binary.LittleEndian.PutUint32(cr[1:], uint32(flow))
		cw.Write(cr[:])
		if err := cw.Flush(); err != nil {
			w.fail(fmt.Errorf("flow %d: credit to worker %d: %v", flow, from, err))
			return
		}
		if got[flow] == total {
			delete(got, flow)
			w.ctl.send(&ctl{T: "recv", Flow: flow, At: time.Now().UnixNano()})
		}
	}
}
