package iwarp

import (
	"bytes"
	"testing"

	"github.com/ddpstore/ddpstore/iwarp/rdmap"
)

// TestReadAheadAfterLargeMessage: after a large tagged message and the
// small FPDUs that end it and answer for it (its short last segment, a
// Send), the receiver still reads only a little ahead, so the next large
// payload goes straight into place instead of through the staging buffer.
func TestReadAheadAfterLargeMessage(t *testing.T) {
	const big, small = 60000, 100
	e, p := rawPair(t, 1<<20, ConnConfig{}, rawConfig, 0)
	for i := range 2 {
		if err := e.qp.PostRecv(&RecvWR{ID: uint64(i + 1), SGL: []SGE{e.sge(512<<10+i*64, 64)}}); err != nil {
			t.Fatal(err)
		}
	}
	data := make([]byte, 2*big+small)
	for i := range data {
		data[i] = byte(i*7 + i>>8)
	}
	stag, to := e.mr.STag(), e.mr.BaseTO()
	w := func(off, n int, last bool) []byte {
		return p.fpdu(taggedHdr(rdmap.OpWrite, uint32(stag), to+uint64(off), last), data[off:off+n])
	}
	send := func(msn uint32) []byte {
		return p.fpdu(untaggedHdr(rdmap.OpSend, 0, msn, 0, 0, true), []byte("done"))
	}
	// A large Write in two segments, the second short, and a Send.
	p.write(append(append(w(0, big, false), w(big, small, true)...), send(1)...))
	e.expect(e.rcq, 1, WCRecv, StatusSuccess, 4)
	x := &e.qp.conn.l.(*mpaLLP).rx
	before := x.staged.Load()
	// The next large Write, and a Send to know it was placed.
	p.write(append(w(big+small, big, true), send(2)...))
	e.expect(e.rcq, 2, WCRecv, StatusSuccess, 4)
	if got := x.staged.Load() - before; got > 2*smallRead {
		t.Errorf("%d ULPDU octets of a %d-octet Write and a Send went through the staging buffer; want at most %d", got, big, 2*smallRead)
	}
	if !bytes.Equal(e.buf[:len(data)], data) {
		t.Error("the Writes placed the wrong octets")
	}
}

// TestReadAheadPolicy: the receiver reads a little ahead during and for a
// few FPDUs after a large one, and the whole staging buffer otherwise.
func TestReadAheadPolicy(t *testing.T) {
	x := &mpaRx{stage: make([]byte, stagingSize), sinceBig: bigRecent}
	for i, step := range []struct {
		ulen int
		want int
	}{
		{100, stagingSize}, // no large FPDU yet
		{4096, stagingSize},
		{bigFPDU, smallRead},
		{100, smallRead},
		{100, smallRead},
		{100, smallRead},
		{100, stagingSize}, // bigRecent small FPDUs after it
		{100, stagingSize},
		{65000, smallRead},
	} {
		x.began(step.ulen)
		if got := len(x.ahead()); got != step.want {
			t.Errorf("FPDU %d (%d octets): reads %d ahead, want %d", i, step.ulen, got, step.want)
		}
	}
}
