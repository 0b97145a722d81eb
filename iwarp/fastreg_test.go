package iwarp

import (
	"bytes"
	"context"
	"testing"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
	"github.com/ddpstore/ddpstore/iwarp/mem"
	"github.com/ddpstore/ddpstore/iwarp/rdmap"
)

// fastMR creates a fast-register MR over a fresh mapping of e's device, in
// e's PD, deregistered at the end of the test.
func (e *end) fastMR(n int) *mem.MR {
	e.t.Helper()
	m, err := mem.Anonymous(n)
	if err != nil {
		e.t.Fatal(err)
	}
	mr, err := e.dev.AllocFastReg(e.pd, m, 0, n, mem.LocalWrite|mem.RemoteWrite|mem.RemoteRead|mem.RemoteInvalidate)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := e.dev.Deregister(ctx, mr); err != nil {
			e.t.Errorf("deregister: %v", err)
		}
		m.Close()
	})
	return mr
}

// A peer reaches exactly a fast-registered window with exactly its access,
// through the data path: what lies outside it, a right it lacks, a stale
// key after the next FastRegister, and an STag it invalidated itself with
// a Send with Invalidate each get the Terminate that names them.
func TestFastRegisterOverTheWire(t *testing.T) {
	const size, win, at = 1 << 20, 8192, 64 << 10
	rwAcc := mem.LocalWrite | mem.RemoteWrite | mem.RemoteInvalidate
	cases := []struct {
		name string
		// bad returns the faulty request from ini toward resp's window
		// (mr, fast-registered with acc at at, win octets), given its STag.
		acc  mem.Access
		bad  func(ini, resp *end, mr *mem.MR, stag mem.STag) SendWR
		want rdmap.Error
	}{
		{name: "write/one-octet-past", acc: rwAcc, want: rdmap.FromDDP(ddp.ErrBaseBounds), bad: func(ini, _ *end, mr *mem.MR, stag mem.STag) SendWR {
			return SendWR{Op: OpWrite, SGL: []SGE{ini.sge(0, 1)}, RemoteSTag: stag, RemoteTO: mr.BaseTO() + win}
		}},
		{name: "write/one-octet-before", acc: rwAcc, want: rdmap.FromDDP(ddp.ErrBaseBounds), bad: func(ini, _ *end, mr *mem.MR, stag mem.STag) SendWR {
			return SendWR{Op: OpWrite, SGL: []SGE{ini.sge(0, 1)}, RemoteSTag: stag, RemoteTO: mr.BaseTO() - 1}
		}},
		{name: "write/longer-than-window", acc: rwAcc, want: rdmap.FromDDP(ddp.ErrBaseBounds), bad: func(ini, _ *end, mr *mem.MR, stag mem.STag) SendWR {
			return SendWR{Op: OpWrite, SGL: []SGE{ini.sge(0, win+1)}, RemoteSTag: stag, RemoteTO: mr.BaseTO()}
		}},
		{name: "write/read-only-window", acc: mem.RemoteRead, want: rdmap.ErrAccessRights, bad: func(ini, _ *end, mr *mem.MR, stag mem.STag) SendWR {
			return SendWR{Op: OpWrite, SGL: []SGE{ini.sge(0, 8)}, RemoteSTag: stag, RemoteTO: mr.BaseTO()}
		}},
		{name: "read/past-window", acc: mem.RemoteRead, want: rdmap.ErrBaseBounds, bad: func(ini, _ *end, mr *mem.MR, stag mem.STag) SendWR {
			return SendWR{Op: OpRead, SGL: []SGE{ini.sge(0, win+1)}, RemoteSTag: stag, RemoteTO: mr.BaseTO()}
		}},
		{name: "read/write-only-window", acc: rwAcc, want: rdmap.ErrAccessRights, bad: func(ini, _ *end, mr *mem.MR, stag mem.STag) SendWR {
			return SendWR{Op: OpRead, SGL: []SGE{ini.sge(0, 8)}, RemoteSTag: stag, RemoteTO: mr.BaseTO()}
		}},
		{name: "write/stale-key", acc: rwAcc, want: rdmap.FromDDP(ddp.ErrInvalidSTag), bad: func(ini, resp *end, mr *mem.MR, stag mem.STag) SendWR {
			resp.dev.Invalidate(stag, resp.pd)
			if _, err := resp.dev.FastRegister(mr, at, win, rwAcc); err != nil {
				t.Fatal(err)
			}
			return SendWR{Op: OpWrite, SGL: []SGE{ini.sge(0, 8)}, RemoteSTag: stag, RemoteTO: mr.BaseTO()}
		}},
		{name: "write/after-local-invalidate", acc: rwAcc, want: rdmap.FromDDP(ddp.ErrInvalidSTag), bad: func(ini, resp *end, mr *mem.MR, stag mem.STag) SendWR {
			if err := resp.dev.InvalidateWait(context.Background(), mr); err != nil {
				t.Fatal(err)
			}
			return SendWR{Op: OpWrite, SGL: []SGE{ini.sge(0, 8)}, RemoteSTag: stag, RemoteTO: mr.BaseTO()}
		}},
		{name: "write/after-send-with-invalidate", acc: rwAcc, want: rdmap.FromDDP(ddp.ErrInvalidSTag), bad: func(ini, resp *end, mr *mem.MR, stag mem.STag) SendWR {
			if err := resp.qp.PostRecv(&RecvWR{ID: 70, SGL: []SGE{resp.sge(0, 64)}}); err != nil {
				t.Fatal(err)
			}
			if err := ini.qp.PostSend(&SendWR{ID: 71, Op: OpSendInv, SGL: []SGE{ini.sge(0, 16)}, InvalidateSTag: stag}); err != nil {
				t.Fatal(err)
			}
			ini.expect(ini.scq, 71, WCSend, StatusSuccess, 16)
			if wc := resp.expect(resp.rcq, 70, WCRecv, StatusSuccess, 16); wc.Invalidated != stag || mr.Valid() {
				t.Fatalf("Send with Invalidate: completion %+v, MR valid %v", wc, mr.Valid())
			}
			return SendWR{Op: OpWrite, SGL: []SGE{ini.sge(0, 8)}, RemoteSTag: stag, RemoteTO: mr.BaseTO()}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ini, resp := pair(t, size, ConnConfig{}, ConnConfig{})
			mr := resp.fastMR(size)
			stag, err := resp.dev.FastRegister(mr, at, win, c.acc)
			if err != nil {
				t.Fatal(err)
			}
			// The window works first, both ways its access allows.
			fill(ini.buf[:win], 3)
			if c.acc&mem.RemoteWrite != 0 {
				if err := ini.qp.PostSend(&SendWR{ID: 5, Op: OpWrite, SGL: []SGE{ini.sge(0, win)}, RemoteSTag: stag, RemoteTO: mr.BaseTO()}); err != nil {
					t.Fatal(err)
				}
				ini.expect(ini.scq, 5, WCWrite, StatusSuccess, win)
				ping(t, ini, resp, 6) // the Write is placed once the Send after it arrived
				if !bytes.Equal(mr.Bytes(), ini.buf[:win]) {
					t.Fatal("the Write did not land in the window")
				}
			} else {
				fill(mr.Bytes(), 9)
				if err := ini.qp.PostSend(&SendWR{ID: 5, Op: OpRead, SGL: []SGE{ini.sge(win, win)}, RemoteSTag: stag, RemoteTO: mr.BaseTO()}); err != nil {
					t.Fatal(err)
				}
				ini.expect(ini.scq, 5, WCRead, StatusSuccess, win)
				if !bytes.Equal(mr.Bytes(), ini.buf[win:2*win]) {
					t.Fatal("the Read did not return the window")
				}
			}
			wr := c.bad(ini, resp, mr, stag)
			wr.ID = 1
			if err := ini.qp.PostSend(&wr); err != nil {
				t.Fatal(err)
			}
			waitDone(t, "responder", resp.qp)
			terminateErr(t, "responder", resp.qp, false, c.want)
			waitDone(t, "initiator", ini.qp)
			terminateErr(t, "initiator", ini.qp, true, c.want)
			whole := mr.Mapping().Bytes()
			for i, b := range whole {
				if (i < at || i >= at+win) && b != 0 && c.acc&mem.RemoteWrite != 0 {
					t.Fatalf("octet %d outside the window written", i)
				}
			}
		})
	}
}
