package phy

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// helloTimeout is how long a connection to the coordinator has to say a
// valid hello. A worker says it as soon as it connects; the connections
// are served concurrently, so one that stays idle delays nobody.
const helloTimeout = 5 * time.Second

// maxHello bounds the bytes read before a hello is complete: a worker's
// takes about a hundred, and a stranger's must not fill memory.
const maxHello = 4 << 10

// joinTimeout is how long the workers have to say hello.
const joinTimeout = 30 * time.Second

// gather accepts the workers' control connections on ln, which it closes,
// until each of workers said hello with the run's token, and returns them
// by worker id with the addresses they listen on. Any local process may
// connect: a connection without the token, with a duplicate or unknown id,
// or silent for helloTimeout is closed and does not count.
func gather(ln net.Listener, workers int, token string, within time.Duration) ([]*ctlConn, []string, error) {
	type hello struct {
		c *ctlConn
		m *ctl
	}
	hellos := make(chan hello)
	failed := make(chan error, 1)
	quit := make(chan struct{})
	// The connections still in their handshake: dropped when gather
	// returns, rather than left open until their deadline.
	var mu sync.Mutex
	pending := map[net.Conn]bool{}
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		close(quit)
		for c := range pending {
			c.Close()
		}
	}()
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				failed <- err
				return
			}
			mu.Lock()
			select {
			case <-quit:
				c.Close()
				mu.Unlock()
				return
			default:
			}
			pending[c] = true
			mu.Unlock()
			go func() {
				cc, m, err := readHello(c, token, workers)
				mu.Lock()
				delete(pending, c)
				mu.Unlock()
				if err != nil {
					c.Close()
					return
				}
				select {
				case hellos <- hello{c: cc, m: m}:
				case <-quit:
					c.Close()
				}
			}()
		}
	}()
	conns := make([]*ctlConn, workers)
	addrs := make([]string, workers)
	fail := func(err error) ([]*ctlConn, []string, error) {
		for _, c := range conns {
			if c != nil {
				c.c.Close()
			}
		}
		return nil, nil, err
	}
	timeout := time.NewTimer(within)
	defer timeout.Stop()
	for joined := 0; joined < workers; {
		select {
		case h := <-hellos:
			if conns[h.m.ID] != nil {
				h.c.c.Close()
				continue
			}
			conns[h.m.ID], addrs[h.m.ID] = h.c, h.m.Addr
			joined++
		case err := <-failed:
			return fail(fmt.Errorf("waiting for the workers (%d of %d said hello): %v", joined, workers, err))
		case <-timeout.C:
			return fail(fmt.Errorf("waiting for the workers: %d of %d said hello within %s", joined, workers, within))
		}
	}
	return conns, addrs, nil
}

// readHello reads c's hello within helloTimeout and maxHello bytes and
// checks its token and worker id.
func readHello(c net.Conn, token string, workers int) (*ctlConn, *ctl, error) {
	lr := &limitReader{r: c, left: maxHello}
	cc := newCtlConnReader(c, lr)
	c.SetReadDeadline(time.Now().Add(helloTimeout))
	m, err := cc.recv()
	if err != nil {
		return nil, nil, err
	}
	if m.T != "hello" || subtle.ConstantTimeCompare([]byte(m.Token), []byte(token)) != 1 || m.ID < 0 || m.ID >= workers {
		return nil, nil, errors.New("not a worker of this run")
	}
	c.SetReadDeadline(time.Time{})
	lr.left = -1 // a worker: no limit from now on
	return cc, m, nil
}

// limitReader fails reads past left bytes; left < 0 is no limit.
type limitReader struct {
	r    io.Reader
	left int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left < 0 {
		return l.r.Read(p)
	}
	if l.left == 0 {
		return 0, errors.New("hello too long")
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}
