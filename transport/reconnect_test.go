package transport_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/transport/initiator"
)

// cutProxy forwards TCP and can cut every connection it carries, or
// refuse new ones: a network that fails under a session.
type cutProxy struct {
	ln     net.Listener
	target string
	refuse atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.cut(); p.wg.Wait() })
	return p
}

func (p *cutProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refuse.Load() {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); copyPlain(s, c); s.Close() }()
		go func() { defer p.wg.Done(); copyPlain(c, s); c.Close() }()
	}
}

// cut resets every connection (SO_LINGER 0: an abortive close).
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	}
	p.conns = nil
}

// TestReconnect cuts the connection under 16 writers three times: the
// session reconnects, reissues what had not completed, and every write
// and read completes with the right data; nothing reaches the callers.
func TestReconnect(t *testing.T) {
	for _, network := range []string{"tcp", initiator.NetworkISCSITCP} {
		t.Run(network, func(t *testing.T) { testReconnect(t, network) })
	}
}

// testReconnect runs TestReconnect over network: iSER over MPA/TCP, or
// iSCSI/TCP, whose initiator batches what 16 callers post and whose
// target batches its answers, so that a cut loses whole batches.
func testReconnect(t *testing.T, network string) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{sizes: []int64{16 << 20}, tcp: network == initiator.NetworkISCSITCP})
	to := r.addr
	if network == initiator.NetworkISCSITCP {
		to = r.tcpAddr
	}
	px := newCutProxy(t, to)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := initiator.Dial(ctx, r.dev, network, px.ln.Addr().String(), initiator.Config{InitiatorName: initiatorName,
		TargetName: targetName, RecoveryTimeout: 20 * time.Second, Log: quietLog(), Buffers: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// 4 KiB (the batches) and 64 KiB (R2Ts, Data-Out) by turns.
				size := 4 << 10
				if i%2 == 1 {
					size = 64 << 10
				}
				if err := pattern(s, uint64(w*256), size, int64(w*1000+i)); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	for i := 0; i < 3; i++ {
		time.Sleep(300 * time.Millisecond)
		px.cut()
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a caller saw the connection loss: %v", err)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("session ended: %v", err)
	}
}

// TestRecoveryTimeout: when the target stays unreachable, waiting
// commands fail after RecoveryTimeout with an error that says so.
func TestRecoveryTimeout(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{})
	px := newCutProxy(t, r.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := initiator.Dial(ctx, r.dev, "tcp", px.ln.Addr().String(), initiator.Config{InitiatorName: initiatorName,
		TargetName: targetName, RecoveryTimeout: 500 * time.Millisecond, Log: quietLog(), Buffers: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	px.refuse.Store(true)
	px.cut()
	start := time.Now()
	err = pattern(s, 0, 4096, 1)
	if err == nil {
		t.Fatal("I/O succeeded with the target unreachable")
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("failed only after %v", el)
	}
	if !errors.Is(s.Err(), s.Err()) || s.Err() == nil {
		t.Fatalf("session error %v", s.Err())
	}
	t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
}
