package transport_test

import (
	"bytes"
	"context"
	"io"
	"math/rand"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/transport/initiator"
)

// flipProxy forwards TCP between an initiator and a target and, when
// armed, flips one bit of the initiator's stream a given number of octets
// later: a corrupted FPDU on the wire.
type flipProxy struct {
	ln     net.Listener
	target string
	armAt  atomic.Int64 // stream offset to corrupt, or -1
	seen   atomic.Int64 // octets forwarded initiator -> target
	wg     sync.WaitGroup
}

func newFlipProxy(t *testing.T, target string) *flipProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &flipProxy{ln: ln, target: target}
	p.armAt.Store(-1)
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *flipProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.wg.Add(2)
		go func() { defer p.wg.Done(); p.pump(s, c, true); s.Close() }()
		go func() { defer p.wg.Done(); copyPlain(c, s); c.Close() }()
	}
}

func (p *flipProxy) pump(dst, src net.Conn, corrupt bool) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			start := p.seen.Load()
			if at := p.armAt.Load(); corrupt && at >= start && at < start+int64(n) {
				buf[at-start] ^= 0x10
				p.armAt.Store(-1)
			}
			p.seen.Add(int64(n))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// arm corrupts the octet skip octets after what has been forwarded so far.
func (p *flipProxy) arm(skip int64) { p.armAt.Store(p.seen.Load() + skip) }

// TestCorruptWriteData: a bit flipped in an RDMA Read Response carrying
// WRITE data fails the command (the target detects the CRC error and drops
// the connection), and the LUN never holds an octet the initiator did not
// send. The WRITE is placed straight into the store (lu.Placement), each
// FPDU once its CRC has checked: the FPDUs before the corrupted one may
// have landed, as an interrupted write tears on a disk (SBC-3 leaves a
// failed WRITE's blocks indeterminate); the corrupted one and all after it
// must not.
func TestCorruptWriteData(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{sizes: []int64{4 << 20}})
	px := newFlipProxy(t, r.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := initiator.Dial(ctx, r.dev, "tcp", px.ln.Addr().String(), initiator.Config{InitiatorName: initiatorName,
		TargetName: targetName, NoImmediateData: true, Log: quietLog(), Buffers: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const size = 1 << 20
	buf, _ := s.Alloc(size)
	rand.New(rand.NewSource(1)).Read(buf)
	do(t, s, &initiator.Command{CDB: write16(0, size/512), Dir: initiator.DataOut, Data: buf})
	before := append([]byte(nil), r.luns[0].Store().Mapping().Bytes()[:size]...)
	if !bytes.Equal(before, buf) {
		t.Fatal("the first write did not land")
	}
	if l := r.srv.SessionList(); len(l) != 1 || l[0].PlacedBytes != size {
		t.Fatalf("sessions %+v: want one, with the first WRITE's %d octets placed straight into the store (this test is about placement)", l, size)
	}

	rand.New(rand.NewSource(2)).Read(buf)
	px.arm(size / 2) // well inside the RDMA Read Response's payload
	cmd := &initiator.Command{CDB: write16(0, size/512), Dir: initiator.DataOut, Data: buf}
	err = s.Do(ctx, cmd)
	if err == nil && cmd.Status == 0 {
		t.Fatal("a WRITE whose data was corrupted on the wire completed GOOD")
	}
	t.Logf("corrupted WRITE: %v (status %#x)", err, cmd.Status)
	after := r.luns[0].Store().Mapping().Bytes()[:size]
	for i := range after {
		if after[i] != before[i] && after[i] != buf[i] {
			t.Fatalf("LUN octet %d is %#02x: neither the old %#02x nor the %#02x the initiator sent", i, after[i], before[i], buf[i])
		}
	}
	// The flip is size/2 octets into the stream, a little before data
	// octet size/2 (FPDU headers and CRCs come with the data). Its FPDU,
	// at most 64 KiB, and everything after it stay as they were.
	if rest := size/2 + 64<<10; !bytes.Equal(after[rest:], before[rest:]) {
		t.Fatal("the LUN changed after the corrupted FPDU")
	}

	// The target serves on: a new session works.
	s2 := r.dial(t, initiator.Config{TargetName: targetName})
	if err := pattern(s2, 4096, 8192, 3); err != nil {
		t.Fatal(err)
	}
}

// copyPlain copies src to dst through a buffer. io.Copy between TCP
// connections would splice through pipes that the runtime caches and
// closes only when garbage collected, which the tests' descriptor leak
// check would count.
func copyPlain(dst io.Writer, src io.Reader) {
	io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, make([]byte, 64<<10))
}
