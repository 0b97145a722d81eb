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
	return pair(t, testBuf, icfg, rcfg)
}

// wait polls cq until one completion arrives.
func (e *end) wait(cq *CQ) WC {
	e.t.Helper()
	for {
		if n := cq.Poll(e.wcs[:1]); n == 1 {
			return e.wcs[0]
		}
		if err := cq.Wait(e.ctx, false); err != nil {
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
