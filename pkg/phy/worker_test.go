package phy

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// No two flows, offsets or runs share bytes, and a step at any offset is
// the same bytes as that slice of the whole flow. (The old pattern
// repeated every 256 bytes and across flows 256 ids apart.)
func TestPatternDistinct(t *testing.T) {
	whole := make([]byte, 4096)
	fillPattern(whole, 7, 3, 0)
	for _, off := range []int64{0, 1, 5, 8, 255, 256, 1000} {
		part := make([]byte, 700)
		fillPattern(part, 7, 3, off)
		if !bytes.Equal(part, whole[off:off+700]) {
			t.Fatalf("offset %d: the step differs from the flow's bytes", off)
		}
	}
	other := make([]byte, 4096)
	for _, c := range []struct {
		seed uint64
		flow int32
		off  int64
	}{{7, 3 + 256, 0}, {8, 3, 0}, {7, 3, 256}, {7, 3, 4096}} {
		fillPattern(other, c.seed, c.flow, c.off)
		if bytes.Equal(other[:256], whole[:256]) {
			t.Errorf("seed %d flow %d offset %d has flow 3's first bytes", c.seed, c.flow, c.off)
		}
	}
}

// receiver runs Worker.receive on one end of a pipe; the control messages
// it sends arrive on msgs.
func receiver(t *testing.T) (net.Conn, chan *ctl, []byte) {
	t.Helper()
	token := bytes.Repeat([]byte{0xab}, tokenLen)
	ctlA, ctlB := net.Pipe()
	msgs := make(chan *ctl, 4)
	go func() {
		cc := newCtlConn(ctlB)
		for {
			m, err := cc.recv()
			if err != nil {
				close(msgs)
				return
			}
			msgs <- m
		}
	}()
	w := &Worker{id: 1, ctl: newCtlConn(ctlA), token: token, seed: 99, maxStep: 1024}
	a, b := net.Pipe()
	go w.receive(b)
	t.Cleanup(func() { a.Close(); ctlA.Close() })
	return a, msgs, token
}

func frame(flow int32, total, off int64, payload []byte) []byte {
	b := make([]byte, dataHeader, dataHeader+len(payload))
	b[0] = frameData
	binary.LittleEndian.PutUint32(b[1:], uint32(flow))
	binary.LittleEndian.PutUint64(b[5:], uint64(total))
	binary.LittleEndian.PutUint64(b[13:], uint64(off))
	binary.LittleEndian.PutUint32(b[21:], uint32(len(payload)))
	return append(b, payload...)
}

func handshake(token []byte) []byte {
	h := append([]byte{'H'}, token...)
	return binary.LittleEndian.AppendUint32(h, 0)
}

func message(t *testing.T, msgs chan *ctl) *ctl {
	t.Helper()
	select {
	case m := <-msgs:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no control message")
		return nil
	}
}

func TestReceive(t *testing.T) {
	good := make([]byte, 512)
	fillPattern(good, 99, 5, 0)
	t.Run("a stranger is dropped unread", func(t *testing.T) {
		c, msgs, _ := receiver(t)
		go c.Write(append(handshake(bytes.Repeat([]byte{1}, tokenLen)), frame(5, 512, 0, good)...))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 5)); err != io.EOF {
			t.Fatalf("read %v, want the connection closed without a credit", err)
		}
		select {
		case m := <-msgs:
			t.Fatalf("a stranger's frame was credited or reported: %+v", m)
		case <-time.After(100 * time.Millisecond):
		}
	})
	t.Run("a worker's frame is checked and credited", func(t *testing.T) {
		c, msgs, token := receiver(t)
		go c.Write(append(handshake(token), frame(5, 512, 0, good)...))
		cr := make([]byte, 5)
		if _, err := io.ReadFull(c, cr); err != nil || cr[0] != frameCredit || binary.LittleEndian.Uint32(cr[1:]) != 5 {
			t.Fatalf("credit %v, %v", cr, err)
		}
		if m := message(t, msgs); m.T != "recv" || m.Flow != 5 {
			t.Fatalf("message %+v", m)
		}
	})
	for _, c := range []struct {
		name  string
		frame []byte
		want  string
	}{
		{"a frame above the step", frame(5, 1<<40, 0, make([]byte, 2048)), "a frame of 2048 bytes"},
		{"a frame past its flow", frame(5, 100, 0, good), "a frame of 512 bytes at offset 0 of 100"},
		{"another flow's bytes", frame(5+256, 512, 0, good), "flow 261 from worker 0: bytes 0..512 arrived corrupted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, msgs, token := receiver(t)
			go conn.Write(append(handshake(token), c.frame...))
			if m := message(t, msgs); m.T != "fail" || !strings.Contains(m.Err, c.want) {
				t.Fatalf("message %+v, want a failure saying %q", m, c.want)
			}
		})
	}
}
