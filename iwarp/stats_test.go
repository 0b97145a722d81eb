package iwarp

import (
	"testing"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
	"github.com/ddpstore/ddpstore/iwarp/rdmap"
)

// TestCounters: each Device counts the messages and payload octets it sent
// and received, and the Terminates, its own and its peer's, by error; the
// counts of a stream outlive it.
func TestCounters(t *testing.T) {
	const size = 1 << 20
	ini, resp := pair(t, size, ConnConfig{}, ConnConfig{})
	if err := resp.qp.PostRecv(&RecvWR{ID: 9, SGL: []SGE{resp.sge(size/2, 4096)}}); err != nil {
		t.Fatal(err)
	}
	wrs := []SendWR{
		{ID: 1, Op: OpWrite, SGL: []SGE{ini.sge(0, 100000)}, RemoteSTag: resp.mr.STag(), RemoteTO: resp.mr.BaseTO()},
		{ID: 2, Op: OpWrite, SGL: []SGE{ini.sge(0, 5000)}, RemoteSTag: resp.mr.STag(), RemoteTO: resp.mr.BaseTO()},
		{ID: 3, Op: OpRead, SGL: []SGE{ini.sge(0, 70000)}, RemoteSTag: resp.mr.STag(), RemoteTO: resp.mr.BaseTO()},
		{ID: 4, Op: OpSend, SGL: []SGE{ini.sge(0, 1000)}},
	}
	for i := range wrs {
		if err := ini.qp.PostSend(&wrs[i]); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range wrs {
		n := uint32(0)
		for _, g := range w.SGL {
			n += g.Len
		}
		ini.expect(ini.scq, w.ID, w.Op.wcOpcode(), StatusSuccess, n)
	}
	resp.expect(resp.rcq, 9, WCRecv, StatusSuccess, 1000)

	var sent, recv [NumMessages]uint64
	sent[MsgWrite], sent[MsgReadRequest], sent[MsgSend] = 2, 1, 1
	recv[MsgReadResponse] = 1
	got := ini.dev.Counters()
	if got.Sent != sent || got.Received != recv || got.SentOctets != 106000 || got.ReceivedOctets != 70000 {
		t.Errorf("initiator counted %+v", got)
	}
	got = resp.dev.Counters()
	if got.Sent != recv || got.Received != sent || got.SentOctets != 70000 || got.ReceivedOctets != 106000 {
		t.Errorf("responder counted %+v", got)
	}

	// A Write to a bad STag: the responder terminates, the initiator
	// receives it.
	bad := SendWR{ID: 5, Op: OpWrite, SGL: []SGE{ini.sge(0, 16)}, RemoteSTag: resp.mr.STag() ^ 0x5a, RemoteTO: resp.mr.BaseTO()}
	if err := ini.qp.PostSend(&bad); err != nil {
		t.Fatal(err)
	}
	waitDone(t, "responder", resp.qp)
	waitDone(t, "initiator", ini.qp)
	want := rdmap.FromDDP(ddp.ErrInvalidSTag)
	if ts := resp.dev.Counters().Terminates; len(ts) != 1 || ts[0] != (TerminateCount{Remote: false, Err: want, Count: 1}) {
		t.Errorf("responder's Terminates %+v, want one local %v", ts, want)
	}
	got = ini.dev.Counters()
	if ts := got.Terminates; len(ts) != 1 || ts[0] != (TerminateCount{Remote: true, Err: want, Count: 1}) {
		t.Errorf("initiator's Terminates %+v, want one remote %v", ts, want)
	}
	// The ended stream's counts stay (the bad Write was sent too).
	if got.Sent[MsgWrite] != 3 || got.SentOctets != 106016 {
		t.Errorf("after the stream ended the initiator counts %+v", got)
	}
}
