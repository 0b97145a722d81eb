package iwarp

import (
	"context"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/iwarp/mem"
)

// end is one side of a test connection: a Device, a QP with its CQs, and a
// registered buffer.
type end struct {
	t    testing.TB
	dev  *Device
	pd   mem.PD
	scq  *CQ
	rcq  *CQ
	qp   *QP
	m    *mem.Mapping
	mr   *mem.MR
	buf  []byte
	wcs  [16]WC
	name string
	ctx  context.Context // bounds every wait of the test
}

const testBuf = 32 << 20

func newEnd(t testing.TB, name string, dev *Device) *end {
	t.Helper()
	if dev == nil {
		dev = NewDevice(0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	e := &end{t: t, dev: dev, pd: dev.AllocPD(), name: name, ctx: ctx}
	var err error
	if e.scq, err = dev.NewCQ(1024); err != nil {
		t.Fatal(err)
	}
	if e.rcq, err = dev.NewCQ(1024); err != nil {
		t.Fatal(err)
	}
	if e.qp, err = dev.NewQP(QPConfig{PD: e.pd, SendCQ: e.scq, RecvCQ: e.rcq}); err != nil {
		t.Fatal(err)
	}
	if e.m, err = mem.Anonymous(testBuf); err != nil {
		t.Fatal(err)
	}
	if e.mr, err = dev.Register(e.pd, e.m, 0, testBuf, mem.LocalWrite|mem.RemoteWrite|mem.RemoteRead|mem.RemoteInvalidate); err != nil {
		t.Fatal(err)
	}
	e.buf = e.mr.Bytes()
	t.Cleanup(e.close)
	return e
}

func (e *end) close() {
	e.qp.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.dev.Deregister(ctx, e.mr); err != nil {
		e.t.Errorf("%s: deregister: %v", e.name, err)
	}
	if err := e.m.Close(); err != nil {
		e.t.Errorf("%s: munmap: %v", e.name, err)
	}
}

// sge returns an SGE for n octets at off of the end's buffer.
func (e *end) sge(off, n int) SGE { return SGEOf(e.mr, off, n) }

// connect connects a fresh pair of ends through a loopback Listener.
func connect(t testing.TB, icfg, rcfg ConnConfig) (ini, resp *end) {
	t.Helper()
	ini, resp = newEnd(t, "initiator", nil), newEnd(t, "responder", nil)
	ln, err := resp.dev.Listen("tcp", "127.0.0.1:0", rcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	accepted := make(chan error, 1)
	go func() {
		req, err := ln.Accept(ctx)
		if err != nil {
			accepted <- err
			return
		}
		accepted <- req.Accept(resp.qp, []byte("welcome"))
	}()
	pd, err := ini.qp.Connect(ctx, "tcp", ln.Addr().String(), icfg)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if string(pd) != "welcome" {
		t.Fatalf("reply private data %q", pd)
	}
	if err := <-accepted; err != nil {
		t.Fatalf("accept: %v", err)
	}
	return ini, resp
}

// wait polls cq until one completion arrives.
func (e *end) wait(cq *CQ) WC {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if n := cq.Poll(e.wcs[:1]); n == 1 {
			return e.wcs[0]
		}
		if err := cq.Wait(ctx, false); err != nil {
			e.t.Fatalf("%s: waiting for a completion: %v (QP %v, err %v)", e.name, err, e.qp.State(), e.qp.Err())
		}
	}
}

// expect waits for a completion and checks it.
func (e *end) expect(cq *CQ, id uint64, op WCOpcode, st Status, n uint32) WC {
	e.t.Helper()
	wc := e.wait(cq)
	if wc.WRID != id || wc.Op != op || wc.Status != st || (st == StatusSuccess && wc.ByteLen != n) {
		e.t.Fatalf("%s: completion %+v, want id %d %v %v %d octets (QP err %v)", e.name, wc, id, op, st, n, e.qp.Err())
	}
	return wc
}
