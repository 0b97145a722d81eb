package iwarp

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestInlineConsumer: a CQ's inline consumer (CQ.SetInline) takes the
// completions of what the receiver delivers, a Send's receive and an RDMA
// Read's response, on the receiver's goroutine: the armed notification
// never comes, and what the consumer posts from there (an answer) goes
// out. When the consumer declines, the notification comes as usual.
func TestInlineConsumer(t *testing.T) {
	ini, resp := pair(t, 1<<20, ConnConfig{}, ConnConfig{})
	defer ini.close()
	defer resp.close()
	const n = 50
	for i := range 4 {
		if err := resp.qp.PostRecv(&RecvWR{ID: uint64(i), SGL: []SGE{resp.sge(i*64, 64)}}); err != nil {
			t.Fatal(err)
		}
	}
	var decline atomic.Bool
	var recvs, reads, answers atomic.Int32
	var wcs [16]WC
	// The responder answers each Send with an RDMA Read of 8 octets of
	// the initiator's buffer; the Read's completion, inline too, posts
	// the answering Send and the receive again.
	resp.rcq.SetInline(func() bool {
		if decline.Load() {
			return false
		}
		for _, wc := range wcs[:resp.rcq.Poll(wcs[:])] {
			if wc.Status != StatusSuccess {
				t.Errorf("receive: %v", wc.Status)
				continue
			}
			recvs.Add(1)
			if err := resp.qp.PostSend(&SendWR{ID: wc.WRID, Op: OpRead, SGL: []SGE{resp.sge(4096+int(wc.WRID)*64, 8)},
				RemoteSTag: ini.mr.STag(), RemoteTO: ini.mr.BaseTO()}); err != nil {
				t.Errorf("post Read: %v", err)
			}
		}
		return true
	})
	var swcs [16]WC
	resp.scq.SetInline(func() bool {
		for _, wc := range swcs[:resp.scq.Poll(swcs[:])] {
			switch {
			case wc.Status != StatusSuccess:
				t.Errorf("send queue: %v %v", wc.Op, wc.Status)
			case wc.Op == WCRead:
				reads.Add(1)
				if err := resp.qp.PostRecv(&RecvWR{ID: wc.WRID, SGL: []SGE{resp.sge(int(wc.WRID)*64, 64)}}); err != nil {
					t.Errorf("repost: %v", err)
				}
				if err := resp.qp.PostSend(&SendWR{ID: 100, Op: OpSend, SGL: []SGE{resp.sge(4096+int(wc.WRID)*64, 8)}}); err != nil {
					t.Errorf("post answer: %v", err)
				}
			case wc.Op == WCSend:
				answers.Add(1)
			}
		}
		return true
	})
	if err := resp.rcq.Arm(false); err != nil {
		t.Fatal(err)
	}
	if err := resp.scq.Arm(false); err != nil {
		t.Fatal(err)
	}
	before := resp.dev.Counters().Inline
	for i := range n {
		if err := ini.qp.PostRecv(&RecvWR{ID: 1000, SGL: []SGE{ini.sge(8192, 64)}}); err != nil {
			t.Fatal(err)
		}
		if err := ini.qp.PostSend(&SendWR{ID: uint64(i), Op: OpSend, SGL: []SGE{ini.sge(0, 16)}}); err != nil {
			t.Fatal(err)
		}
		ini.expect(ini.scq, uint64(i), WCSend, StatusSuccess, 16)
		ini.expect(ini.rcq, 1000, WCRecv, StatusSuccess, 8)
	}
	if t.Failed() {
		return
	}
	if recvs.Load() != n || reads.Load() != n {
		t.Fatalf("inline consumer took %d receives and %d Read completions, want %d each", recvs.Load(), reads.Load(), n)
	}
	// One hand-over may take completions of both CQs (a release of a
	// readv that brought two messages), so count at least one per Send.
	if got := resp.dev.Counters().Inline - before; got < n {
		t.Errorf("Counters.Inline rose by %d, want at least %d", got, n)
	}
	select {
	case <-resp.rcq.Notify():
		t.Fatal("the receive CQ notified though its inline consumer took every completion")
	default:
	}

	// Declined: the receive's completion waits in the CQ, notified.
	decline.Store(true)
	if err := ini.qp.PostSend(&SendWR{ID: 7, Op: OpSend, SGL: []SGE{ini.sge(0, 16)}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-resp.rcq.Notify():
	case <-time.After(testTimeout):
		t.Fatal("no notification for a completion the inline consumer declined")
	}
	if wc := resp.wait(resp.rcq); wc.Op != WCRecv || wc.Status != StatusSuccess || wc.ByteLen != 16 {
		t.Fatalf("declined completion %+v", wc)
	}
	resp.rcq.SetInline(nil)
	resp.scq.SetInline(nil)
}
