package tcpconn

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/iwarp/spin"
	"github.com/ddpstore/ddpstore/transport/iscsi"
)

// pair is a loopback TCP connection's two ends.
func pair(t *testing.T) (net.Conn, net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-ch
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func nop(w *Writer, itt uint32, data []byte) {
	h, _ := iscsi.NewNOPOut(w.Header())
	h.SetITT(itt)
	h.SetDataSegmentLength(uint32(len(data)))
	w.Append(h.BHS, data)
}

// allDigests has header and data digests on.
func allDigests() *Digests {
	var d Digests
	d.Header.Store(true)
	d.Data.Store(true)
	return &d
}

// nops adds a NOP-Out to w's batch for each data, ITT its index, and
// returns them.
func nops(w *Writer, data [][]byte) [][]byte {
	w.Begin(len(data))
	for i, d := range data {
		nop(w, uint32(i), d)
	}
	return data
}

// expectPDUs reads len(want) PDUs from r: PDU i with ITT i and data want[i].
func expectPDUs(t *testing.T, r *Reader, want [][]byte) {
	t.Helper()
	for i, d := range want {
		bhs, err := r.Header()
		if err != nil || bhs.ITT() != uint32(i) || int(bhs.DataSegmentLength()) != len(d) {
			t.Fatalf("PDU %d: %v, %v; want ITT %d with %d octets", i, bhs, err, i, len(d))
		}
		got := make([]byte, len(d))
		if err := r.Data(got); err != nil || !bytes.Equal(got, d) {
			t.Fatalf("PDU %d (%d octets): data %v, equal %v", i, len(d), err, bytes.Equal(got, d))
		}
	}
}

// PDUs of every padding go through one writev and come back apart, with
// and without digests; the octets on the wire are padded and, with
// digests, carry RFC 7143's CRC32C after the BHS and after the padded data.
func TestRoundTrip(t *testing.T) {
	for _, digests := range []bool{false, true} {
		a, b := pair(t)
		var d Digests
		d.Header.Store(digests)
		d.Data.Store(digests)
		w := &Writer{Conn: a, Digests: &d}
		r := &Reader{Conn: b, Digests: &d, Max: 1 << 17}
		// Short segments come out of the read-ahead; from half of it
		// (16 KiB) on they are read straight into the caller's slice.
		sizes := []int{0, 1, 3, 4, 5, 8191, 8192, 16383, 16384, 3, 70001, 0, 5}
		var data [][]byte
		for i, n := range sizes {
			data = append(data, bytes.Repeat([]byte{byte(i + 1)}, n))
		}
		want := nops(w, data)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		expectPDUs(t, r, want)
	}
}

// countingConn counts the reads of its Conn.
type countingConn struct {
	net.Conn
	reads int
}

func (c *countingConn) Read(b []byte) (int, error) {
	c.reads++
	return c.Conn.Read(b)
}

// TestReaderReadsAhead: small PDUs written together are taken off the
// stream in a few reads, not one or more each.
func TestReaderReadsAhead(t *testing.T) {
	a, b := pair(t)
	d := allDigests()
	w := &Writer{Conn: a, Digests: d}
	cc := &countingConn{Conn: b}
	r := &Reader{Conn: cc, Digests: d, Max: 8192}
	const n = 32
	var data [][]byte
	for i := range n {
		data = append(data, bytes.Repeat([]byte{byte(i)}, 100+i))
	}
	want := nops(w, data)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	expectPDUs(t, r, want)
	// 32 PDUs of about 160 octets: 5 KiB, one read when it has all come.
	if cc.reads > 4 {
		t.Fatalf("%d PDUs written together took %d reads", n, cc.reads)
	}
}

// TestReaderDribble: PDUs of every size, with digests, that arrive a few
// octets at a time, split anywhere, come apart whole.
func TestReaderDribble(t *testing.T) {
	a, b := pair(t)
	d := allDigests()
	w := &Writer{Conn: nil, Digests: d}
	sizes := []int{0, 7, 48, 4096, 16383, 16384, 40000, 1, 0, 9000, 2}
	var data [][]byte
	for i, n := range sizes {
		d := make([]byte, n)
		for j := range d {
			d[j] = byte(i*7 + j)
		}
		data = append(data, d)
	}
	want := nops(w, data)
	var wire []byte
	for _, v := range w.iovs {
		wire = append(wire, v...)
	}
	go func() {
		// Pieces of 1 to 4999 octets, pausing now and then so that the
		// reader finds the stream run dry part way through a PDU.
		for i, k := 0, 1; len(wire) > 0; i++ {
			k = (k*7919 + 13) % 5000
			n := min(max(k, 1), len(wire))
			if _, err := a.Write(wire[:n]); err != nil {
				return
			}
			wire = wire[n:]
			if i%5 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		a.Close()
	}()
	r := &Reader{Conn: b, Digests: d, Max: 1 << 16}
	expectPDUs(t, r, want)
	if _, err := r.Header(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last PDU: %v, want EOF", err)
	}
}

// The wire form of one PDU, octet by octet.
func TestWireForm(t *testing.T) {
	a, b := pair(t)
	d := allDigests()
	w := &Writer{Conn: a, Digests: d}
	w.Begin(1)
	nop(w, 7, []byte("abc"))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	a.Close()
	var wire bytes.Buffer
	wire.ReadFrom(b)
	got := wire.Bytes()
	if len(got) != 48+4+4+4 {
		t.Fatalf("%d octets on the wire, want BHS 48 + digest 4 + data 3 and pad 1 + digest 4", len(got))
	}
	var hd, dd [4]byte
	iscsi.PutDigest(hd[:], iscsi.Digest(got[:48]))
	iscsi.PutDigest(dd[:], iscsi.Digest([]byte("abc\x00")))
	if !bytes.Equal(got[48:52], hd[:]) || string(got[52:56]) != "abc\x00" || !bytes.Equal(got[56:60], dd[:]) {
		t.Fatalf("wire % x", got)
	}
}

// Every damage the Reader must see.
func TestReaderRefuses(t *testing.T) {
	for _, c := range []struct {
		name, want string
		mangle     func(pdu []byte) []byte
		max        int
	}{
		{"header digest", "header digest", func(p []byte) []byte { p[49] ^= 1; return p }, 8192},
		{"data digest", "data digest", func(p []byte) []byte { p[len(p)-1] ^= 1; return p }, 8192},
		{"data octet", "data digest", func(p []byte) []byte { p[52] ^= 1; return p }, 8192},
		{"too long", "more than the 2 declared", func(p []byte) []byte { return p }, 2},
		{"AHS", "AHS", func(p []byte) []byte {
			p[4] = 1
			iscsi.PutDigest(p[48:52], iscsi.Digest(p[:48]))
			return p
		}, 8192},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := pair(t)
			d := allDigests()
			var buf bytes.Buffer
			w := &Writer{Conn: a, Digests: d}
			w.Begin(1)
			nop(w, 1, []byte("abcd"))
			for _, v := range w.iovs {
				buf.Write(v)
			}
			a.Write(c.mangle(buf.Bytes()))
			r := &Reader{Conn: b, Digests: d, Max: c.max}
			_, err := r.Header()
			if err == nil {
				err = r.Data(make([]byte, 4))
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// Building and writing a batch allocates nothing in steady state.
func TestWriterAllocatesNothing(t *testing.T) {
	a, b := pair(t)
	go func() {
		buf := make([]byte, 1<<16)
		for {
			if _, err := b.Read(buf); err != nil {
				return
			}
		}
	}()
	var d Digests
	d.Data.Store(true)
	w := &Writer{Conn: a, Digests: &d}
	data := make([]byte, 4096)
	n := testing.AllocsPerRun(100, func() {
		w.Begin(4)
		for i := 0; i < 4; i++ {
			nop(w, uint32(i), data)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per batch", n)
	}
}

// TestReaderSpin: with Spin, Header takes a PDU that arrives while it
// polls, one that arrives after the spin (from the blocking read), a BHS
// split across the two, and reports the stream's end as without it.
func TestReaderSpin(t *testing.T) {
	a, b := pair(t)
	var d Digests
	w := &Writer{Conn: a, Digests: &d}
	// The reader's Writing is a flag of the test's own: w's would stop
	// the spin whenever the sender's write overlaps it.
	var writing atomic.Bool
	r := &Reader{Conn: b, Digests: &d, Max: 8192, Spin: 200 * time.Millisecond, Writing: &writing}
	sent := make(chan struct{})
	send := func(itt uint32, after time.Duration) {
		defer func() { sent <- struct{}{} }()
		time.Sleep(after)
		w.Begin(1)
		nop(w, itt, nil)
		if err := w.Flush(); err != nil {
			t.Error(err)
		}
	}
	for i, after := range []time.Duration{0, time.Millisecond, 300 * time.Millisecond} {
		go send(uint32(i), after)
		bhs, err := r.Header()
		if err != nil {
			t.Fatalf("PDU %d (after %v): %v", i, after, err)
		}
		if bhs.ITT() != uint32(i) {
			t.Fatalf("PDU %d: ITT %d", i, bhs.ITT())
		}
		<-sent
	}
	if r.spun < 2 {
		t.Fatalf("%d of the PDUs sent within the spin were read by it", r.spun)
	}
	// A BHS whose first octets come during the spin and the rest after.
	var one Writer
	one.Conn = a
	one.Digests = &d
	one.Begin(1)
	nop(&one, 7, nil)
	whole := append([]byte(nil), one.iovs[0]...)
	go func() {
		a.Write(whole[:10])
		time.Sleep(300 * time.Millisecond)
		a.Write(whole[10:])
	}()
	if bhs, err := r.Header(); err != nil || bhs.ITT() != 7 {
		t.Fatalf("split BHS: %v, %v", bhs, err)
	}
	// While the Writer writes, the spin stops at once.
	spun := r.spun
	writing.Store(true)
	go send(8, 30*time.Millisecond)
	if bhs, err := r.Header(); err != nil || bhs.ITT() != 8 {
		t.Fatalf("while writing: %v, %v", bhs, err)
	}
	<-sent
	if r.spun != spun {
		t.Fatal("the reader spun while its connection's writer wrote")
	}
	writing.Store(false)
	go func() { time.Sleep(time.Millisecond); a.Close() }()
	if _, err := r.Header(); !errors.Is(err, io.EOF) {
		t.Fatalf("Header at the stream's end: %v, want EOF", err)
	}
}

// TestReaderTurnaround: with Turn, Header times the peer's answer to this
// end's last write (spin.Turnaround); a PDU with no write before it is no
// sample. The answer comes later than the bound, so the sample is the
// clamp whatever the machine's speed.
func TestReaderTurnaround(t *testing.T) {
	a, b := pair(t)
	var d Digests
	w := &Writer{Conn: a, Digests: &d}
	var writing atomic.Bool
	var turn spin.Turnaround
	const base = 100 * time.Microsecond
	r := &Reader{Conn: b, Digests: &d, Max: 8192, Spin: base, Writing: &writing, Turn: &turn}
	send := func(itt uint32) {
		w.Begin(1)
		nop(w, itt, nil)
		if err := w.Flush(); err != nil {
			t.Error(err)
		}
	}
	turn.Wrote() // as this end's Writer does after each Flush
	go func() {
		time.Sleep(5 * time.Millisecond)
		send(1)
		send(2)
	}()
	for itt := uint32(1); itt <= 2; itt++ {
		if bhs, err := r.Header(); err != nil || bhs.ITT() != itt {
			t.Fatalf("PDU %d: %v, %v", itt, bhs, err)
		}
		clamp := 2 * spin.MaxFactor * base
		if s, n := turn.Smoothed(); n != 1 || s != clamp {
			t.Fatalf("after PDU %d: %v over %d samples, want %v over 1", itt, s, n, clamp)
		}
	}
	if w.Turn.LastWrite() == 0 {
		t.Fatal("Flush did not record its write")
	}
}

// TestReaderAwaitAnswer: with AwaitedOnly, Header sleeps in its read
// between PDUs unless an answer is awaited: then it spins for it, whether
// it was already asleep (the kick) or not yet, and the kick's deadline
// fails no later read. The spin is long (10 s), so that each awaited PDU
// is caught by it on any machine; none is due that long.
func TestReaderAwaitAnswer(t *testing.T) {
	a, b := pair(t)
	var d Digests
	w := &Writer{Conn: a, Digests: &d}
	var writing atomic.Bool
	r := &Reader{Conn: b, Digests: &d, Max: 8192, Spin: 10 * time.Second, Writing: &writing, AwaitedOnly: true}
	type result struct {
		itt uint32
		err error
	}
	header := func() <-chan result {
		c := make(chan result, 1)
		go func() {
			bhs, err := r.Header()
			if err != nil {
				c <- result{err: err}
				return
			}
			c <- result{itt: bhs.ITT()}
		}()
		return c
	}
	parked := func() {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !r.aw.Parked(); {
			if time.Now().After(deadline) {
				t.Fatal("the reader never waited")
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(10 * time.Millisecond) // into the read
	}
	sent := make(chan struct{}, 1)
	later := func(itt uint32) {
		go func() {
			defer func() { sent <- struct{}{} }()
			time.Sleep(20 * time.Millisecond)
			w.Begin(1)
			nop(w, itt, []byte("data"))
			if err := w.Flush(); err != nil {
				t.Error(err)
			}
		}()
	}
	get := func(c <-chan result, itt uint32, spun int) {
		t.Helper()
		select {
		case got := <-c:
			if got.err != nil || got.itt != itt {
				t.Fatalf("PDU %d: ITT %d, %v", itt, got.itt, got.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no PDU %d", itt)
		}
		data := make([]byte, 4)
		if err := r.Data(data); err != nil || string(data) != "data" {
			t.Fatalf("PDU %d's data: %q, %v", itt, data, err)
		}
		if spun >= 0 && r.spun != spun {
			t.Fatalf("after PDU %d: %d PDUs caught by the spin, want %d", itt, r.spun, spun)
		}
	}

	c := header() // not awaited: from the read
	parked()
	later(1)
	get(c, 1, 0)
	<-sent

	c = header() // awaited while asleep: the kick
	parked()
	r.AwaitAnswer()
	later(2)
	get(c, 2, 1)
	<-sent

	c = header() // the answer taken, it sleeps again; no stale deadline
	parked()
	later(3)
	get(c, 3, 1)
	<-sent

	r.AwaitAnswer() // awaited before it waits: it spins first
	later(4)
	get(header(), 4, 2)
	<-sent

	// A kick just as the reader stops waiting fails no read: many of
	// them, against PDUs that come at once.
	for i := uint32(5); i < 205; i++ {
		c = header()
		r.AwaitAnswer()
		w.Begin(1)
		nop(w, i, []byte("data"))
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		get(c, i, -1)
	}
	r.aw.Retry(r.Conn) // a kick no read took back
}
