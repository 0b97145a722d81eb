package iwarp

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/internal/burst"
	"github.com/ddpstore/ddpstore/iwarp/rdmap"
)

// A small work request posted while the sender is idle is written by the
// poster itself: its completion is queued when PostSend returns. One
// larger than directMax goes to the sender goroutine. What is posted while
// the QP is corked waits for Uncork, and goes out in one write.
func TestDirectPost(t *testing.T) {
	ini, resp := connect(t, ConnConfig{}, ConnConfig{})
	ini.qp.conn.alwaysDirect = true
	for i := range 4 {
		if err := resp.qp.PostRecv(&RecvWR{ID: uint64(i), SGL: []SGE{resp.sge(i*4096, 4096)}}); err != nil {
			t.Fatal(err)
		}
	}
	ini.expectIdle(t)
	before := ini.dev.Counters()
	copy(ini.buf, "direct")
	if err := ini.qp.PostSend(&SendWR{ID: 10, Op: OpSend, SGL: []SGE{ini.sge(0, 100)}}); err != nil {
		t.Fatal(err)
	}
	if n := ini.scq.Poll(ini.wcs[:1]); n != 1 || ini.wcs[0].WRID != 10 || ini.wcs[0].Status != StatusSuccess {
		t.Fatalf("no completion when PostSend returned (polled %d: %+v)", n, ini.wcs[0])
	}
	resp.expect(resp.rcq, 0, WCRecv, StatusSuccess, 100)
	after := ini.dev.Counters()
	if after.DirectWrites != before.DirectWrites+1 || after.Writes != before.Writes+1 {
		t.Fatalf("writes %d -> %d, direct %d -> %d; want one more of each", before.Writes, after.Writes, before.DirectWrites, after.DirectWrites)
	}

	// Larger than directMax: the sender goroutine's.
	before = after
	big := directMax + 1
	if err := ini.qp.PostSend(&SendWR{ID: 11, Op: OpWrite, SGL: []SGE{ini.sge(0, big)}, RemoteSTag: resp.mr.STag(), RemoteTO: resp.mr.BaseTO() + 1<<20}); err != nil {
		t.Fatal(err)
	}
	ini.expect(ini.scq, 11, WCWrite, StatusSuccess, uint32(big))
	after = ini.dev.Counters()
	if after.DirectWrites != before.DirectWrites || after.Writes == before.Writes {
		t.Fatalf("a %d-octet Write: writes %d -> %d, direct %d -> %d; want the sender goroutine's", big, before.Writes, after.Writes, before.DirectWrites, after.DirectWrites)
	}

	// Corked: an RDMA Write and a Send wait for Uncork, then go out in one
	// write, whoever wakes the sender goroutine meanwhile.
	ini.expectIdle(t)
	before = ini.dev.Counters()
	copy(ini.buf[8192:], "corked write")
	ini.qp.Cork()
	if err := ini.qp.PostSend(&SendWR{ID: 12, Op: OpWrite, SGL: []SGE{ini.sge(8192, 4096)}, RemoteSTag: resp.mr.STag(), RemoteTO: resp.mr.BaseTO() + 2<<20}); err != nil {
		t.Fatal(err)
	}
	if err := ini.qp.PostSend(&SendWR{ID: 13, Op: OpSend, SGL: []SGE{ini.sge(0, 50)}}); err != nil {
		t.Fatal(err)
	}
	// A wake-up of the sender goroutine (one left from before the Cork,
	// or the receiver's) does not send corked work either.
	ini.qp.conn.wake()
	time.Sleep(20 * time.Millisecond)
	if n := resp.rcq.Poll(resp.wcs[:1]); n != 0 {
		t.Fatalf("the peer received %+v while the QP was corked", resp.wcs[0])
	}
	if c := ini.dev.Counters(); c.Writes != before.Writes {
		t.Fatalf("%d writes while corked", c.Writes-before.Writes)
	}
	ini.qp.Uncork()
	ini.expect(ini.scq, 12, WCWrite, StatusSuccess, 4096)
	ini.expect(ini.scq, 13, WCSend, StatusSuccess, 50)
	resp.expect(resp.rcq, 1, WCRecv, StatusSuccess, 50)
	if got := resp.buf[2<<20 : 2<<20+12]; string(got) != "corked write" {
		t.Fatalf("the corked Write placed %q", got)
	}
	after = ini.dev.Counters()
	if after.Writes != before.Writes+1 || after.DirectWrites != before.DirectWrites+1 {
		t.Fatalf("Uncork: writes %d -> %d, direct %d -> %d; want one direct write", before.Writes, after.Writes, before.DirectWrites, after.DirectWrites)
	}
}

// expectIdle waits until posters may write (the stream has started) and
// the sender goroutine has nothing in hand, so that the next post finds
// the sender's lock free.
func (e *end) expectIdle(t *testing.T) {
	t.Helper()
	c := e.qp.conn
	for deadline := time.Now().Add(testTimeout); ; time.Sleep(time.Millisecond) {
		c.txmu.Lock()
		idle := !c.tx.hasWork() && !c.tx.unsent && c.direct.Load()
		c.txmu.Unlock()
		if idle {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the sender is still busy")
		}
	}
}

// A poster never waits for socket space: against a peer that reads
// nothing, posts return while their writes are stuck, the sender goroutine
// finishes what a poster left half written, and when the peer reads, every
// octet arrives in order.
func TestDirectPostFullSocket(t *testing.T) {
	e, p := rawPair(t, 16<<20, ConnConfig{}, rawConfig, 4096)
	p.send(taggedHdr(rdmap.OpWrite, 0, 0, true), nil) // the Responder may send now
	e.qp.conn.alwaysDirect = true
	// Posters write only once the Responder has taken that FPDU (RFC 5044
	// 7.1.2 rule 4 holds its first transmission until then). Under load
	// the posts below came first, woke the sender goroutine, which took
	// them all and waited on the full socket: no post wrote directly.
	e.expectIdle(t)
	// 12.8 MB: far more than the sockets hold, in fewer work requests
	// than the send queue takes (256), since none of those that stay
	// unwritten completes until the peer reads. (300 of 32 KiB failed
	// with a full queue now and then: whether 44 of them had completed
	// depended on how far the kernel had grown the socket's buffer.)
	const n, size = 200, directMax
	for i := range n * size / 8 {
		e.buf[i*8] = byte(i)
		e.buf[i*8+1] = byte(i >> 8)
		e.buf[i*8+2] = byte(i >> 16)
	}
	start := time.Now()
	for i := range n {
		if err := e.qp.PostSend(&SendWR{ID: uint64(i), Op: OpWrite, SGL: []SGE{e.sge(i*size, size)}, RemoteSTag: 0x4242, RemoteTO: uint64(i * size)}); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("%d posts took %v against a peer that reads nothing", n, d)
	}
	if c := e.dev.Counters(); c.DirectWrites == 0 {
		t.Fatal("no post wrote directly")
	}
	got := make([]byte, 0, n*size)
	for len(got) < n*size {
		seg, err := p.next()
		if err != nil {
			t.Fatalf("after %d octets: %v", len(got), err)
		}
		h, payload, err := rdmap.Parse(seg)
		if err != nil {
			t.Fatal(err)
		}
		if rdmap.ControlOf(h).Opcode() != rdmap.OpWrite || h.STag() != 0x4242 || h.TO() != uint64(len(got)) {
			t.Fatalf("after %d octets: segment %v", len(got), h)
		}
		got = append(got, payload...)
	}
	if !bytes.Equal(got, e.buf[:n*size]) {
		t.Fatal("the peer read other octets than were written")
	}
	want := map[uint64]Status{}
	for i := range n {
		want[uint64(i)] = StatusSuccess
	}
	deadline := time.Now().Add(testTimeout)
	got2 := map[uint64]WC{}
	for len(got2) < n && time.Now().Before(deadline) {
		for id, wc := range collect(t, e.scq) {
			got2[id] = wc
		}
		time.Sleep(time.Millisecond)
	}
	expectWCs(t, "engine", got2, want)
}

// A Quiet request's completion stays quiet only if nothing came into its
// CQ while it was being sent: the answer may have come first, and its
// consumer gone back to sleep without the request's completion (that left
// the initiator's task slots waiting for the next wake-up, up to a second
// under load). With separate send and receive CQs it is never quiet.
func TestQuietCompletion(t *testing.T) {
	dev := NewDevice(0)
	pd := dev.AllocPD()
	one, err := dev.NewCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	other, err := dev.NewCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	var wcs [4]WC
	for _, c := range []struct {
		name        string
		scq, rcq    *CQ
		answerFirst bool
		notify      bool
	}{
		{"one-cq", one, one, false, false},
		{"one-cq/answer-first", one, one, true, true},
		{"two-cqs", other, one, false, true},
	} {
		q, err := dev.NewQP(QPConfig{PD: pd, SendCQ: c.scq, RecvCQ: c.rcq})
		if err != nil {
			t.Fatal(err)
		}
		i := q.takeInflight(&sendWQE{id: 1, op: OpSend, quiet: true})
		if c.answerFirst {
			q.pushRecv(WC{WRID: 2, Op: WCRecv})
			for c.rcq.Poll(wcs[:]) > 0 {
			}
		}
		if err := c.scq.Arm(false); err != nil {
			t.Fatal(err)
		}
		q.completeInflight(i, StatusSuccess)
		select {
		case <-c.scq.Notify():
			if !c.notify {
				t.Errorf("%s: the quiet completion notified", c.name)
			}
		default:
			if c.notify {
				t.Errorf("%s: the completion did not notify", c.name)
			}
		}
		if n := c.scq.Poll(wcs[:]); n != 1 || wcs[0].WRID != 1 {
			t.Errorf("%s: polled %d completions (%+v), want the send's", c.name, n, wcs[0])
		}
		q.Close()
	}
}

// Posts readied together go out together: goroutines that each post a
// Send at the same moment (the completions of one batch waking their
// submitters) wake the sender goroutine, which lets them all post before
// it writes, so a few writes carry them. Before, Go ran the sender
// straight after the first poster (a woken goroutine runs next) and each
// Send went in a write of its own. One processor, as a pinned daemon has.
func TestPostsReadiedTogether(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ini, resp := connect(t, ConnConfig{}, ConnConfig{})
	const n = 16
	for i := range n + 1 {
		if err := resp.qp.PostRecv(&RecvWR{ID: uint64(i), SGL: []SGE{resp.sge(i*4096, 4096)}}); err != nil {
			t.Fatal(err)
		}
	}
	// One Send first, so that nothing has come in since this end last
	// wrote: the posts that follow are a burst, the sender goroutine's.
	if err := ini.qp.PostSend(&SendWR{ID: 100, Op: OpSend, SGL: []SGE{ini.sge(0, 100)}}); err != nil {
		t.Fatal(err)
	}
	ini.expect(ini.scq, 100, WCSend, StatusSuccess, 100)
	resp.expect(resp.rcq, 0, WCRecv, StatusSuccess, 100)
	ini.expectIdle(t)
	before := ini.dev.Counters()
	for _, err := range burst.Run(n, func(i int) error {
		return ini.qp.PostSend(&SendWR{ID: uint64(i), Op: OpSend, SGL: []SGE{ini.sge(i*128, 100)}})
	}) {
		t.Fatal(err)
	}
	for range n {
		ini.wait(ini.scq)
		resp.wait(resp.rcq)
	}
	if w := ini.dev.Counters().Writes - before.Writes; w > n/4 {
		t.Fatalf("%d Sends posted together went out in %d writes, want at most %d", n, w, n/4)
	}
}

// A message larger than writeChunk is written a chunk at a time, so that
// its octets are still in cache between the CRC and the copy: a 1 MiB
// RDMA Write takes at least 1 MiB / writeChunk writes, and arrives whole.
func TestWriteChunks(t *testing.T) {
	ini, resp := connect(t, ConnConfig{}, ConnConfig{})
	const n = 1 << 20
	for i := range n {
		ini.buf[i] = byte(i*7 + i>>9)
	}
	ini.expectIdle(t)
	before := ini.dev.Counters()
	if err := ini.qp.PostSend(&SendWR{ID: 1, Op: OpWrite, SGL: []SGE{ini.sge(0, n)}, RemoteSTag: resp.mr.STag(), RemoteTO: resp.mr.BaseTO() + 4<<20}); err != nil {
		t.Fatal(err)
	}
	ini.expect(ini.scq, 1, WCWrite, StatusSuccess, n)
	if w := ini.dev.Counters().Writes - before.Writes; w < n/writeChunk {
		t.Errorf("a %d-octet RDMA Write went out in %d writes, want at least %d", n, w, n/writeChunk)
	}
	// The Write's octets are placed once the Send behind it arrives.
	if err := resp.qp.PostRecv(&RecvWR{ID: 2, SGL: []SGE{resp.sge(0, 64)}}); err != nil {
		t.Fatal(err)
	}
	if err := ini.qp.PostSend(&SendWR{ID: 3, Op: OpSend, SGL: []SGE{ini.sge(0, 64)}}); err != nil {
		t.Fatal(err)
	}
	resp.expect(resp.rcq, 2, WCRecv, StatusSuccess, 64)
	if !bytes.Equal(resp.buf[4<<20:4<<20+n], ini.buf[:n]) {
		t.Error("the chunked Write placed the wrong octets")
	}
}
