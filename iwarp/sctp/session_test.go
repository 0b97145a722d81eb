package sctp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"
)

const testTimeout = 20 * time.Second

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// transports returns association pairs over each backend this machine
// runs: the in-memory pipe (in order and swapped) and pion over UDP.
func transports(t *testing.T) map[string]func(t *testing.T) (a, b *Association) {
	m := map[string]func(t *testing.T) (a, b *Association){
		"pipe":    func(t *testing.T) (a, b *Association) { return Pipe(PipeConfig{}) },
		"swapped": func(t *testing.T) (a, b *Association) { return Pipe(PipeConfig{Swap: true}) },
		"udp":     udpPair,
	}
	if KernelAvailable() {
		m["kernel"] = kernelPair
	}
	return m
}

// kernelPair is an association over kernel SCTP on loopback.
func kernelPair(t *testing.T) (a, b *Association) {
	l, err := ListenKernel("127.0.0.1:0", Config{})
	if err != nil {
		t.Fatal(err)
	}
	return pairOver(t, l, DialKernel)
}

// udpPair is an association over pion's SCTP on UDP on loopback.
func udpPair(t *testing.T) (a, b *Association) {
	l, err := ListenUDP("127.0.0.1:0", Config{})
	if err != nil {
		t.Fatal(err)
	}
	return pairOver(t, l, DialUDP)
}

// pairOver accepts one association on l while dialling it, then closes l.
func pairOver(t *testing.T, l Listener, dial func(context.Context, string, Config) (*Association, error)) (a, b *Association) {
	defer l.Close()
	ch := make(chan *Association, 1)
	go func() {
		b, _ := l.Accept(testCtx(t))
		ch <- b
	}()
	a, err := dial(testCtx(t), l.Addr().String(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	b = <-ch
	if b == nil {
		t.Fatal("no association accepted")
	}
	return a, b
}

// establish runs Initiate/Accept on stream.
func establish(t *testing.T, a, b *Association, stream uint16, ipd, apd []byte) (act, pas *Session) {
	t.Helper()
	type res struct {
		s   *Session
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := b.AcceptSession(testCtx(t))
		if err == nil {
			if !bytes.Equal(s.PrivateData(), ipd) {
				err = fmt.Errorf("Initiate Private Data %q, want %q", s.PrivateData(), ipd)
			} else {
				err = s.Accept(apd)
			}
		}
		ch <- res{s, err}
	}()
	act, pd, err := a.Initiate(testCtx(t), stream, ipd)
	if err != nil {
		t.Fatalf("Initiate: %v", err)
	}
	if !bytes.Equal(pd, apd) {
		t.Fatalf("Accept Private Data %q, want %q", pd, apd)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return act, r.s
}

func checkGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines left over (%d before)\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// TestSessions runs whole sessions over every backend: accepted with
// segments both ways and a graceful end, several on one association.
func TestSessions(t *testing.T) {
	for name, mk := range transports(t) {
		t.Run(name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			a, b := mk(t)
			pd512 := bytes.Repeat([]byte{7}, 512-len(aliParam))
			s1, p1 := establish(t, a, b, 0, []byte("hello"), pd512)
			s2, p2 := establish(t, a, b, 3, nil, []byte("x"))
			for i, pair := range [][2]*Session{{s1, p1}, {p1, s1}, {s2, p2}, {p2, s2}} {
				var bufs [][]byte
				var ends []int
				for k := range 10 {
					bufs = append(bufs, []byte{byte(i), byte(k)}, bytes.Repeat([]byte{byte(k)}, k*100))
					ends = append(ends, len(bufs))
				}
				if err := pair[0].WriteSegments(bufs, ends); err != nil {
					t.Fatal(err)
				}
				for k := range 10 {
					seg, err := pair[1].NextSegment()
					if err != nil {
						t.Fatal(err)
					}
					want := append([]byte{byte(i), byte(k)}, bytes.Repeat([]byte{byte(k)}, k*100)...)
					if !bytes.Equal(seg, want) {
						t.Fatalf("pair %d segment %d: %d octets %x..., want %d", i, k, len(seg), seg[:2], len(want))
					}
				}
			}
			big := make([]byte, s1.MULPDU()+1)
			if err := s1.WriteSegments([][]byte{big}, []int{1}); !errors.Is(err, ErrChunkTooLarge) {
				t.Fatalf("a segment over MULPDU: %v", err)
			}
			if err := s1.WriteSegments([][]byte{big[:s1.MULPDU()]}, []int{1}); err != nil {
				t.Fatal(err)
			}
			if seg, err := p1.NextSegment(); err != nil || len(seg) != s1.MULPDU() {
				t.Fatalf("MULPDU segment: %d octets, %v", len(seg), err)
			}
			// Graceful: each end's Terminate is its last chunk.
			for _, pair := range [][2]*Session{{s1, p1}, {p2, s2}} {
				if err := pair[0].CloseWrite(); err != nil {
					t.Fatal(err)
				}
				if _, err := pair[1].NextSegment(); err != io.EOF {
					t.Fatalf("after the peer's Terminate: %v", err)
				}
				if err := pair[1].WriteSegments([][]byte{{1}}, []int{1}); err != nil {
					t.Fatalf("writing after the peer's Terminate: %v", err)
				}
				if seg, err := pair[0].NextSegment(); err != nil || len(seg) != 1 {
					t.Fatalf("reading after our Terminate: %v", err)
				}
				pair[1].CloseWrite()
				if _, err := pair[0].NextSegment(); err != io.EOF {
					t.Fatalf("after both Terminates: %v", err)
				}
				pair[0].Close()
				pair[1].Close()
			}
			a.Shutdown()
			b.Shutdown()
			checkGoroutines(t, before)
		})
	}
}

// TestSessionRejected covers 6.3 and 6.4 from the active end.
func TestSessionRejected(t *testing.T) {
	for name, mk := range transports(t) {
		t.Run(name, func(t *testing.T) {
			a, b := mk(t)
			defer a.Abort()
			defer b.Abort()
			go func() {
				s, err := b.AcceptSession(testCtx(t))
				if err == nil {
					s.Reject([]byte("no"))
				}
				s, err = b.AcceptSession(testCtx(t))
				if err == nil {
					s.Close() // not passed on: a Terminate (6.4)
				}
			}()
			_, _, err := a.Initiate(testCtx(t), 1, []byte("please"))
			var re *RejectedError
			if !errors.As(err, &re) || string(re.PrivateData) != "no" {
				t.Fatalf("rejected Initiate: %v", err)
			}
			if _, _, err := a.Initiate(testCtx(t), 2, nil); err != ErrNotAccepted {
				t.Fatalf("terminated Initiate: %v", err)
			}
			// The stream is free again for a new session.
			go func() {
				s, err := b.AcceptSession(testCtx(t))
				if err == nil {
					s.Accept(nil)
				}
			}()
			if _, _, err := a.Initiate(testCtx(t), 1, nil); err != nil {
				t.Fatalf("a new session on a rejected stream: %v", err)
			}
		})
	}
}

// rawChunk writes a crafted chunk on an association's stream, bypassing
// the session (the sender of a broken peer).
func rawChunk(t *testing.T, a *Association, stream uint16, ppid uint32, b []byte) {
	t.Helper()
	if err := a.be.write(stream, ppid, [][]byte{b}); err != nil {
		t.Fatal(err)
	}
}

func control(ssn uint16, f Function, pd []byte, inline bool) []byte {
	if inline && f != FuncTerminate {
		pd = append(aliParam[:len(aliParam):len(aliParam)], pd...)
	}
	b, _ := AppendControl(nil, ssn, f, pd)
	return b
}

// TestIllegalFromPeer sends a passive end sequences section 6 forbids, and
// chunks that no sequence allows: each terminates the session, with a
// Session Terminate back to the peer.
func TestIllegalFromPeer(t *testing.T) {
	type chunk struct {
		ppid uint32
		b    func(inline bool) []byte
	}
	ctl := func(ssn uint16, f Function) chunk {
		return chunk{PPIDControl, func(in bool) []byte { return control(ssn, f, nil, in) }}
	}
	raw := func(ppid uint32, b []byte) chunk { return chunk{ppid, func(bool) []byte { return b }} }
	tests := []struct {
		name   string
		chunks []chunk
	}{
		{"segment first", []chunk{raw(PPIDSegment, []byte{0, 0, 0x41, 0xc1})}},
		{"Accept first", []chunk{ctl(0, FuncAccept)}},
		{"Terminate first", []chunk{ctl(0, FuncTerminate)}},
		{"two Initiates", []chunk{ctl(0, FuncInitiate), ctl(1, FuncInitiate)}},
		{"Accept from the active end", []chunk{ctl(0, FuncInitiate), ctl(1, FuncAccept)}},
		{"Reject from the active end", []chunk{ctl(0, FuncInitiate), ctl(1, FuncReject)}},
		{"a segment after the Terminate", []chunk{ctl(0, FuncInitiate), ctl(1, FuncTerminate), raw(PPIDSegment, []byte{0, 2, 1})}},
		{"unknown function", []chunk{raw(PPIDControl, []byte{0, 0, 0, 9})}},
		{"Terminate with Private Data", []chunk{ctl(0, FuncInitiate), raw(PPIDControl, []byte{0, 1, 0, 4, 1})}},
		{"unknown PPID", []chunk{ctl(0, FuncInitiate), raw(0x33, []byte{0, 1, 2})}},
		{"DDP-SSN repeated", []chunk{ctl(0, FuncInitiate), raw(PPIDSegment, []byte{0, 0, 1})}},
		{"DDP-SSN beyond the window", []chunk{ctl(0, FuncInitiate), raw(PPIDSegment, []byte{0x80, 0x01, 1})}},
		{"one-octet chunk", []chunk{ctl(0, FuncInitiate), raw(PPIDSegment, []byte{0})}},
	}
	for name, mk := range transports(t) {
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				a, b := mk(t)
				defer a.Abort()
				defer b.Abort()
				// A session of our own on the stream sees what comes back.
				a.be.open(5)
				watch := newSession(a, 5, Active)
				watch.core.state = StateInitSent
				a.mu.Lock()
				a.sessions[5] = watch
				a.mu.Unlock()
				for _, c := range tt.chunks {
					rawChunk(t, a, 5, c.ppid, c.b(a.be.inlineALI()))
				}
				select {
				case ans := <-watch.answer:
					if ans.ev != EvNotAccepted {
						t.Fatalf("the peer answered %v (%v), want a Session Terminate", ans.ev, ans.err)
					}
				case <-time.After(testTimeout):
					t.Fatal("no Session Terminate came back")
				}
			})
		}
	}
}

// TestAdaptationIndication: over the userspace backend, an Initiate
// without the inline indication is refused (11.1, the documented
// deviation).
func TestAdaptationIndication(t *testing.T) {
	a, b := udpPair(t)
	defer a.Abort()
	defer b.Abort()
	a.be.open(0)
	watch := newSession(a, 0, Active)
	watch.core.state = StateInitSent
	a.mu.Lock()
	a.sessions[0] = watch
	a.mu.Unlock()
	rawChunk(t, a, 0, PPIDControl, control(0, FuncInitiate, []byte("no indication"), false))
	if ans := <-watch.answer; ans.ev != EvNotAccepted {
		t.Fatalf("answer %v, want a Session Terminate", ans.ev)
	}
}

// TestReorderedDelivery checks that the swapped pipe really reorders and
// that the session puts segments back in DDP-SSN order.
func TestReorderedDelivery(t *testing.T) {
	a, b := Pipe(PipeConfig{Swap: true})
	defer a.Abort()
	defer b.Abort()
	s, p := establish(t, a, b, 0, nil, nil)
	const n = 1000
	bufs := make([][]byte, n)
	ends := make([]int, n)
	for i := range bufs {
		bufs[i] = []byte{byte(i >> 8), byte(i)}
		ends[i] = i + 1
	}
	// Delivery paused while they are written: they queue up, and the
	// swapping pipe has pairs to swap whatever the scheduling.
	pe := b.be.(*pipeEnd)
	pe.hold.Lock()
	err := s.WriteSegments(bufs, ends)
	pe.hold.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		seg, err := p.NextSegment()
		if err != nil || int(seg[0])<<8|int(seg[1]) != i {
			t.Fatalf("segment %d: %x %v", i, seg, err)
		}
	}
	if sw := pe.swaps.Load(); sw == 0 {
		t.Fatal("the pipe delivered everything in order")
	}
}

// windowEnd is a pipe end whose SCTP reports a number of unacknowledged
// chunks set by the test, and acknowledgments when the test says.
type windowEnd struct {
	*pipeEnd
	mu    sync.Mutex
	unack int
	asked chan struct{} // a send for every unacked call
	ackc  chan struct{}
	armed int
}

func (w *windowEnd) unacked(uint16) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.asked <- struct{}{}
	return w.unack
}

func (w *windowEnd) ackNotify(uint16) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed++
	return w.ackc
}

// TestWindowWait: with 32767 chunks of the stream unacknowledged the
// sender waits (section 10), and goes on at the backend's notification,
// not by polling.
func TestWindowWait(t *testing.T) {
	a0, b := Pipe(PipeConfig{})
	defer b.Abort()
	w := &windowEnd{pipeEnd: a0.be.(*pipeEnd), asked: make(chan struct{}, 16), ackc: make(chan struct{}, 1)}
	a0.be = w
	defer a0.Abort()
	s, p := establish(t, a0, b, 0, nil, nil)
	w.mu.Lock()
	w.unack = MaxInFlight
	w.mu.Unlock()
	s.wmu.Lock()
	s.since = MaxInFlight
	s.wmu.Unlock()
	done := make(chan error, 1)
	go func() { done <- s.WriteSegments([][]byte{{7}}, []int{1}) }()
	<-w.asked // the sender found the window full
	select {
	case err := <-done:
		t.Fatalf("the sender went on with the window full: %v", err)
	default:
	}
	w.mu.Lock()
	w.unack = MaxInFlight - 1
	w.mu.Unlock()
	w.ackc <- struct{}{}
	<-w.asked
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if seg, err := p.NextSegment(); err != nil || len(seg) != 1 || seg[0] != 7 {
		t.Fatalf("%x %v", seg, err)
	}
	if w.armed != 2 {
		t.Fatalf("notification armed %d times, want 2 (once per check)", w.armed)
	}
}
