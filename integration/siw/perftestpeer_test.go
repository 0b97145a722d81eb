package siw

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/iwarp/mem"
)

// ptPeer is our end of one perftest run (see perftest_test.go): a Device
// with the control QP and the test QP, and the test's buffers.
type ptPeer struct {
	p      ptParams
	client bool
	dev    *iwarp.Device
	pd     mem.PD
	comm   ptComm

	// the test connection
	qp       *iwarp.QP
	scq, rcq *iwarp.CQ
	buf      *mem.MR // two halves of p.bufSize(): ours (source/sink), and the one named in our pingpong_dest
	credit   *mem.MR // send: [0:4] the credit word the receiver writes, [64:] the words we write from
	recvAt   ptCycle // send_bw's receiver: where the next receive goes
	mine     ptDest
	theirs   ptDest

	remVersion string
	// report is what the client measured: ours, or the one perftest sent.
	report ptReport
	// notes say what was checked on our side, for the scenario's outcome.
	notes []string
}

// ptPattern fills our buffers before the test, so that what the peer
// placed in them shows.
const ptPattern = 0xa5

// newPtPeer creates the Device and the control QP; the test QP and its
// buffers follow once both ends have agreed on cycle_buffer (setup).
func newPtPeer(t testing.TB, p ptParams, client bool) (*ptPeer, error) {
	pp := &ptPeer{p: p, client: client, dev: iwarp.NewDevice(0)}
	t.Cleanup(func() { pp.dev.Close() })
	pp.pd = pp.dev.AllocPD()
	var err error
	c := &pp.comm
	c.client = client
	if c.scq, err = pp.dev.NewCQ(16); err != nil {
		return nil, err
	}
	if c.rcq, err = pp.dev.NewCQ(16); err != nil {
		return nil, err
	}
	if c.qp, err = pp.dev.NewQP(iwarp.QPConfig{PD: pp.pd, SendCQ: c.scq, RecvCQ: c.rcq, MaxSendWR: 4, MaxRecvWR: 4}); err != nil {
		return nil, err
	}
	m, err := mem.Anonymous(4096)
	if err != nil {
		return nil, err
	}
	if c.msgs, err = pp.dev.Register(pp.pd, m, 0, 128, mem.LocalWrite); err != nil {
		return nil, err
	}
	// perftest posts its control receive before it connects or accepts:
	// so do we (the client Sends first, the server may be slow to ask).
	return pp, c.postRecv()
}

// ptConnect connects qp (the control or the test QP) to perftest's server
// on port, retrying while it does not listen yet: the server listens for
// the test connection only after the hand_shake that precedes it, and
// perftest's own client retries likewise.
func ptConnect(ctx context.Context, qp *iwarp.QP, port int) error {
	addr := fmt.Sprintf("%s:%d", guestAddr, port)
	var err error
	for range 100 {
		if _, err = qp.Connect(ctx, "tcp", addr, iwarp.ConnConfig{}); err == nil || !isRefused(err) || ctx.Err() != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// ptAccept accepts the next connection on l with qp.
func ptAccept(ctx context.Context, l *iwarp.Listener, qp *iwarp.QP) error {
	req, err := l.Accept(ctx)
	if err != nil {
		return fmt.Errorf("accept: %w (startup errors: %v)", err, l.StartupErrors())
	}
	if err := req.Accept(qp, nil); err != nil {
		return fmt.Errorf("accepting the MPA Request: %w", err)
	}
	return nil
}

// setup runs everything up to the test: the control connection's
// exchanges, the test connection (on l when we are the server) and the
// three exchanges of pingpong_dest. The control QP must be connected.
func (pp *ptPeer) setup(ctx context.Context, port int, l *iwarp.Listener) error {
	c := &pp.comm
	ver := make([]byte, ptVersionLen)
	copy(ver, ptVersion)
	in, err := c.xchg(ctx, "version", ver)
	if err != nil {
		return err
	}
	if pp.remVersion = cString(in); pp.remVersion != ptVersion {
		return fmt.Errorf("perftest says it is version %q: this peer speaks the exchange of %s (update perftest_test.go)", pp.remVersion, ptVersion)
	}
	cycle, err := c.xchg(ctx, "cycle_buffer", binary.BigEndian.AppendUint32(nil, ptCycleBuffer))
	if err != nil {
		return err
	}
	line, err := c.xchg(ctx, "cache_line_size", binary.BigEndian.AppendUint32(nil, ptCacheLine))
	if err != nil {
		return err
	}
	pp.p.cycle = max(ptCycleBuffer, int(binary.BigEndian.Uint32(cycle)))
	pp.p.line = max(ptCacheLine, int(binary.BigEndian.Uint32(line)))
	if _, err := c.xchg(ctx, "MTU", append([]byte(ptMTU), 0)); err != nil {
		return err
	}
	if err := pp.newTestQP(); err != nil {
		return err
	}
	if _, err := c.handShake(ctx, "hand_shake before the test connection", ptDest{}); err != nil {
		return err
	}
	if pp.client {
		err = ptConnect(ctx, pp.qp, port)
	} else {
		err = ptAccept(ctx, l, pp.qp)
	}
	if err != nil {
		return fmt.Errorf("test connection: %w", err)
	}
	if _, err := c.handShake(ctx, "hand_shake after the test connection", ptDest{}); err != nil {
		return err
	}
	for i, what := range []string{"pingpong_dest", "pingpong_dest (printed as remote)", "pingpong_dest (the last before the test)"} {
		d, err := c.handShake(ctx, what, pp.mine)
		if err != nil {
			return err
		}
		if i == 0 {
			pp.theirs = d
		} else if d != pp.theirs {
			return fmt.Errorf("%s: perftest now says %v, before %v", what, d, pp.theirs)
		}
	}
	return nil
}

// newTestQP creates the test QP and registers its buffers as perftest
// does for the verb (create_single_mr, ctx_alloc_credit), and fills in
// our pingpong_dest (set_up_connection).
func (pp *ptPeer) newTestQP() error {
	p := pp.p
	var err error
	if pp.scq, err = pp.dev.NewCQ(1024); err != nil {
		return err
	}
	if pp.rcq, err = pp.dev.NewCQ(1024); err != nil {
		return err
	}
	// Exactly the receives send_bw's receiver keeps posted: it posts one
	// again as it takes each completion, into a full queue.
	if pp.qp, err = pp.dev.NewQP(iwarp.QPConfig{PD: pp.pd, SendCQ: pp.scq, RecvCQ: pp.rcq, MaxRecvWR: p.rxDepth()}); err != nil {
		return err
	}
	half := p.bufSize()
	m, err := mem.Anonymous(2*half + 4096)
	if err != nil {
		return err
	}
	acc := mem.LocalWrite
	switch p.verb {
	case ptWrite:
		acc |= mem.RemoteWrite
	case ptRead:
		acc |= mem.RemoteRead | mem.RemoteWrite // iWARP: an RDMA Read's sink must allow remote write
	}
	if pp.buf, err = pp.dev.Register(pp.pd, m, 0, 2*half, acc); err != nil {
		return err
	}
	for i := range pp.buf.Bytes() {
		pp.buf.Bytes()[i] = ptPattern
	}
	pp.mine = ptDest{OutReads: 1, QPN: pp.qp.QPN(), PSN: rand.Uint32() & 0xffffff,
		RKey: uint32(pp.buf.STag()), VAddr: pp.buf.BaseTO() + uint64(half)}
	switch p.verb {
	case ptRead:
		pp.mine.OutReads = iwarp.DefaultReadDepth
	case ptSend:
		if pp.credit, err = pp.dev.Register(pp.pd, m, 2*half, 4096, mem.LocalWrite|mem.RemoteWrite); err != nil {
			return err
		}
		pp.mine.RKey, pp.mine.VAddr = uint32(pp.credit.STag()), pp.credit.BaseTO()
	}
	return nil
}

// run runs the test and the exchanges after it (see perftest_test.go).
func (pp *ptPeer) run(ctx context.Context) error {
	c := &pp.comm
	var err error
	switch {
	case pp.p.verb == ptSend && pp.client:
		if _, err = c.handShake(ctx, "hand_shake before the test", pp.mine); err == nil {
			err = pp.sendTraffic(ctx)
		}
	case pp.p.verb == ptSend:
		if err = pp.postReceives(); err == nil {
			if _, err = c.handShake(ctx, "hand_shake before the test", pp.mine); err == nil {
				err = pp.receiveTraffic(ctx)
			}
		}
	default:
		if pp.client {
			err = pp.rdmaTraffic(ctx)
		}
		if err == nil {
			if _, err = c.handShake(ctx, "hand_shake after the test", pp.mine); err == nil {
				err = pp.xchgReports(ctx)
			}
		}
		if err == nil && !pp.client && pp.p.verb == ptWrite {
			err = pp.checkPlaced("perftest's RDMA Writes", pp.theirHalf())
		}
	}
	if err != nil {
		return err
	}
	if err := c.closeHandShake(ctx, pp.mine); err != nil {
		return err
	}
	// perftest's server may have closed the test connection by now, right
	// after its half of the last hand_shake: only an error counts.
	if err := pp.qp.Err(); err != nil {
		return fmt.Errorf("the test QP is %v after the test: %w", pp.qp.State(), err)
	}
	return nil
}

func (pp *ptPeer) ourHalf() []byte   { return pp.buf.Bytes()[:pp.p.bufSize()] }
func (pp *ptPeer) theirHalf() []byte { return pp.buf.Bytes()[pp.p.bufSize():] }

// checkPlaced checks that the peer's data arrived: perftest fills its
// buffers with rand(), so some octets must differ from our pattern.
func (pp *ptPeer) checkPlaced(what string, b []byte) error {
	n := len(b) - bytes.Count(b, []byte{ptPattern})
	if n == 0 {
		return fmt.Errorf("%s: none of the %d octets of our buffer changed", what, len(b))
	}
	pp.notes = append(pp.notes, fmt.Sprintf("%s changed %d octets of our buffer", what, n))
	return nil
}

// xchgReports is xchg_bw_reports: the client's report goes to the server,
// which prints it; the server's is garbage (write_bw and read_bw never
// fill it), and perftest's client ignores it.
func (pp *ptPeer) xchgReports(ctx context.Context) error {
	mine := ptReport{Size: uint64(pp.p.size), Iters: uint64(pp.p.iters)}
	if pp.client {
		mine = pp.report
	}
	f := mine.fields()
	var theirs [5][]byte
	for i, what := range []string{"report: size", "report: iters", "report: bw_peak", "report: bw_avg", "report: msgRate_avg"} {
		in, err := pp.comm.xchg(ctx, what, f[i])
		if err != nil {
			return err
		}
		theirs[i] = in
	}
	if !pp.client {
		pp.report = parsePtReport(theirs)
	}
	return nil
}

// rdmaTraffic is run_iter_bw for write_bw and read_bw: -n RDMA Writes or
// Reads of -s octets, at most tx_depth outstanding, stepping through both
// buffers as perftest does; it measures what the client reports.
func (pp *ptPeer) rdmaTraffic(ctx context.Context) error {
	op := iwarp.OpWrite
	if pp.p.verb == ptRead {
		op = iwarp.OpRead
	}
	loc, rem := newPtCycle(pp.buf.BaseTO(), pp.p), newPtCycle(pp.theirs.VAddr, pp.p)
	start := time.Now()
	var wcs [64]iwarp.WC
	for scnt, ccnt := 0, 0; ccnt < pp.p.iters; {
		for scnt < pp.p.iters && scnt-ccnt < pp.p.txDepth() {
			wr := iwarp.SendWR{ID: uint64(scnt), Op: op, SGL: []iwarp.SGE{{STag: pp.buf.STag(), TO: loc.next(scnt), Len: uint32(pp.p.size)}},
				RemoteSTag: mem.STag(pp.theirs.RKey), RemoteTO: rem.next(scnt)}
			if err := pp.qp.PostSend(&wr); err != nil {
				return fmt.Errorf("%v %d: %w", op, scnt, err)
			}
			scnt++
		}
		n, err := pp.poll(ctx, pp.scq, wcs[:], fmt.Sprintf("%v %d of %d", op, ccnt, pp.p.iters))
		if err != nil {
			return err
		}
		ccnt += n
	}
	pp.report = measured(pp.p, time.Since(start))
	if op == iwarp.OpRead {
		return pp.checkPlaced("the RDMA Read Responses", pp.ourHalf())
	}
	return nil
}

// poll waits for completions on cq and fails on an unsuccessful one.
func (pp *ptPeer) poll(ctx context.Context, cq *iwarp.CQ, wcs []iwarp.WC, what string) (int, error) {
	for {
		n := cq.Poll(wcs)
		for _, wc := range wcs[:n] {
			if wc.Status != iwarp.StatusSuccess {
				return 0, fmt.Errorf("%s: %v completed %v (test QP %v: %v)", what, wc.Op, wc.Status, pp.qp.State(), pp.qp.Err())
			}
		}
		if n > 0 {
			return n, nil
		}
		if err := cq.Wait(ctx, false); err != nil {
			return 0, fmt.Errorf("%s: %w (test QP %v: %v)", what, err, pp.qp.State(), pp.qp.Err())
		}
	}
}

// measured is a client's report of iters messages of size in d.
func measured(p ptParams, d time.Duration) ptReport {
	s := d.Seconds()
	avg := float64(p.size) * float64(p.iters) / s / (1 << 20)
	return ptReport{Size: uint64(p.size), Iters: uint64(p.iters), Peak: avg, Avg: avg, MsgRate: float64(p.iters) / s / 1e6}
}

// creditWord reads the credit perftest's receiver RDMA-Wrote: a uint32 in
// its (x86, little-endian) host order, which is ours too.
func (pp *ptPeer) creditWord() uint32 {
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&pp.credit.Bytes()[0])))
}

// sendTraffic is send_bw's run_iter_bw over iWARP: -n Sends of -s octets,
// at most tx_depth outstanding, and fewer than rx_depth beyond the
// receiver's last credit.
func (pp *ptPeer) sendTraffic(ctx context.Context) error {
	loc := newPtCycle(pp.buf.BaseTO(), pp.p)
	start := time.Now()
	var wcs [64]iwarp.WC
	waits := 0
	for scnt, ccnt := 0, 0; ccnt < pp.p.iters; {
		for scnt < pp.p.iters && scnt-ccnt < pp.p.txDepth() && scnt+1-int(pp.creditWord()) < pp.p.rxDepth() {
			wr := iwarp.SendWR{ID: uint64(scnt), Op: iwarp.OpSend, SGL: []iwarp.SGE{{STag: pp.buf.STag(), TO: loc.next(scnt), Len: uint32(pp.p.size)}}}
			if err := pp.qp.PostSend(&wr); err != nil {
				return fmt.Errorf("Send %d: %w", scnt, err)
			}
			scnt++
		}
		if ccnt == scnt && scnt < pp.p.iters {
			// Everything sent has completed: waiting for a credit, which
			// comes as an RDMA Write and completes nothing here.
			if err := pp.qp.Err(); err != nil || ctx.Err() != nil {
				return fmt.Errorf("waiting for a credit after %d Sends (credit %d): %w", scnt, pp.creditWord(), cmpErr(err, ctx.Err()))
			}
			waits++
			time.Sleep(100 * time.Microsecond)
			continue
		}
		n, err := pp.poll(ctx, pp.scq, wcs[:], fmt.Sprintf("Send %d of %d", ccnt, pp.p.iters))
		if err != nil {
			return err
		}
		ccnt += n
	}
	pp.report = measured(pp.p, time.Since(start))
	pp.notes = append(pp.notes, fmt.Sprintf("%d Sends; credit word at the end %d; %d waits for a credit", pp.p.iters, pp.creditWord(), waits))
	return nil
}

func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return errors.New("no error")
}

// postReceives is ctx_set_recv_wqes: rx_depth receives of -s octets into
// the half of the buffer perftest receives into, stepping as perftest.
func (pp *ptPeer) postReceives() error {
	pp.recvAt = newPtCycle(pp.buf.BaseTO()+uint64(pp.p.bufSize()), pp.p)
	for i := range pp.p.rxDepth() {
		if err := pp.postReceive(i); err != nil {
			return err
		}
	}
	return nil
}

func (pp *ptPeer) postReceive(i int) error {
	return pp.qp.PostRecv(&iwarp.RecvWR{ID: uint64(i), SGL: []iwarp.SGE{{STag: pp.buf.STag(), TO: pp.recvAt.next(i), Len: uint32(pp.p.size)}}})
}

// receiveTraffic is send_bw's run_iter_bw_server over iWARP: it takes -n
// Sends of -s octets, posts a receive again while fewer than -n were
// posted, and RDMA-Writes its count of receives to the sender's credit
// word whenever that count modulo rx_depth is a multiple of credit_cnt.
func (pp *ptPeer) receiveTraffic(ctx context.Context) error {
	p := pp.p
	const slots = 64 // the words our credits are written from
	posted, credits, creditsDone := p.rxDepth(), 0, 0
	var wcs [64]iwarp.WC
	start := time.Now()
	for rcnt := 0; rcnt < p.iters; {
		n, err := pp.poll(ctx, pp.rcq, wcs[:], fmt.Sprintf("receive %d of %d", rcnt, p.iters))
		if err != nil {
			return err
		}
		for _, wc := range wcs[:n] {
			if int(wc.ByteLen) != p.size {
				return fmt.Errorf("receive %d: a Send of %d octets, want %d", rcnt, wc.ByteLen, p.size)
			}
			rcnt++
			if posted < p.iters {
				if err := pp.postReceive(posted); err != nil {
					return err
				}
				posted++
			}
			if (rcnt%p.rxDepth())%p.creditEvery() != 0 {
				continue
			}
			for credits-creditsDone >= slots-1 { // keep the words of credits in flight unchanged
				k, err := pp.poll(ctx, pp.scq, wcs[:], "credit RDMA Write")
				if err != nil {
					return err
				}
				creditsDone += k
			}
			off := 64 + 4*(credits%slots)
			binary.LittleEndian.PutUint32(pp.credit.Bytes()[off:], uint32(rcnt))
			if err := pp.qp.PostSend(&iwarp.SendWR{ID: uint64(rcnt), Op: iwarp.OpWrite, SGL: []iwarp.SGE{iwarp.SGEOf(pp.credit, off, ptCreditWordLen)},
				RemoteSTag: mem.STag(pp.theirs.RKey), RemoteTO: pp.theirs.VAddr}); err != nil {
				return fmt.Errorf("credit after receive %d: %w", rcnt, err)
			}
			credits++
		}
	}
	elapsed := time.Since(start)
	for creditsDone < credits {
		k, err := pp.poll(ctx, pp.scq, wcs[:], "credit RDMA Write")
		if err != nil {
			return err
		}
		creditsDone += k
	}
	pp.report = measured(p, elapsed)
	pp.notes = append(pp.notes, fmt.Sprintf("%d Sends of %d octets received; %d credits RDMA-Written", p.iters, p.size, credits))
	return pp.checkPlaced("perftest's Sends", pp.theirHalf())
}

// finish waits (bounded) for perftest, which has exited, to have closed
// both connections, closes what is left and says how each one ended.
func (pp *ptPeer) finish() string {
	var out []string
	for _, q := range []struct {
		name string
		qp   *iwarp.QP
	}{{"control", pp.comm.qp}, {"test", pp.qp}} {
		if q.qp == nil {
			continue
		}
		how := "closed by perftest"
		select {
		case <-q.qp.Done():
		case <-time.After(5 * time.Second):
			how = "still " + q.qp.State().String() + " 5 s after perftest exited; disconnected by us"
			q.qp.Disconnect()
			select {
			case <-q.qp.Done():
			case <-time.After(5 * time.Second):
				q.qp.Close()
			}
		}
		if err := q.qp.Err(); err != nil {
			how += fmt.Sprintf(" (Err: %v)", err)
		}
		out = append(out, q.name+" QP "+how)
	}
	return strings.Join(out, "; ")
}

// ptSizes are the message sizes of every perftest scenario, each with its
// -n: a single octet, more often than send_bw's sender may send before a
// credit (511 with rx_depth 512; the receiver returns one every 170), so
// that the credits must work (whether the sender actually waits for one
// depends on timing: the scenario logs it); and 1 MiB, the largest the
// issue asks for, in 5 iterations, perftest's least. Each run costs about a second of perftest's own setup
// under TCG (two more for write_bw, which sleeps one), so the sizes in
// between (64 KiB was one) are left out: 1 MiB is already segmented into
// many FPDUs. perftest's -a would run every power of two from 2 octets to
// 8 MiB, about 16 MiB per iteration: with TCG and a capture of every
// octet, too much for make test.
var ptSizes = []struct{ size, iters int }{{1, 600}, {1 << 20, 5}}

// ptOps are the RDMAP operations a perftest capture must hold.
func ptOps(verb ptVerb, client bool) []opMeta {
	cli, srv := "siw", "ours"
	if client {
		cli, srv = srv, cli
	}
	ops := []opMeta{{cli, opSend}, {srv, opSend}} // the control connection
	switch verb {
	case ptSend:
		ops = append(ops, opMeta{srv, opWrite}) // credits
	case ptWrite:
		ops = append(ops, opMeta{cli, opWrite})
	case ptRead:
		ops = append(ops, opMeta{cli, opReadRequest}, opMeta{srv, opReadResponse})
	}
	return ops
}

// TestGuestPerftest runs ib_send_bw, ib_write_bw and ib_read_bw in their
// rdma_cm mode (-R) against our perftest peer, with ours as the client
// (perftest's server on siw) and as the server, for each size in ptSizes.
// One capture per program and role holds the runs of every size.
func TestGuestPerftest(t *testing.T) {
	inGuest(t)
	siwParams(t, siwDefaults)
	port := 7700
	for _, verb := range []ptVerb{ptSend, ptWrite, ptRead} {
		for _, client := range []bool{true, false} {
			role := map[bool]string{true: "client", false: "server"}[client]
			port++
			t.Run(string(verb)+"-"+role, func(t *testing.T) {
				c := startCapture(t, captureMeta{Name: "perftest-" + string(verb) + "-" + role, Port: port, Role: role, Rev: 2,
					CRC: boolp(true), FullOperation: true, Connections: 2 * len(ptSizes), Ops: ptOps(verb, client)})
				var outcomes []string
				for _, sz := range ptSizes {
					p := ptParams{verb: verb, size: sz.size, iters: sz.iters}
					t.Run(fmt.Sprintf("%dB", sz.size), func(t *testing.T) {
						outcomes = append(outcomes, runPerftest(t, p, client, port))
					})
				}
				c.outcome("%s", strings.Join(outcomes, "; "))
			})
		}
	}
}

// runPerftest runs perftest's program for p against our peer, checks what
// both ends saw and returns a summary.
func runPerftest(t *testing.T, p ptParams, client bool, port int) string {
	ctx := scenarioCtx(t, 60*time.Second)
	pp, err := newPtPeer(t, p, client)
	if err != nil {
		t.Fatal(err)
	}
	args := p.args(port)
	var pt *proc
	var l *iwarp.Listener
	if client {
		pt = startProc(t, p.verb.program(), args...)
		err = ptConnect(ctx, pp.comm.qp, port)
	} else {
		if l, err = pp.dev.Listen("tcp", fmt.Sprintf("%s:%d", guestAddr, port), iwarp.ConnConfig{}); err != nil {
			t.Fatal(err)
		}
		pt = startProc(t, p.verb.program(), append(args, guestAddr)...)
		err = ptAccept(ctx, l, pp.comm.qp)
	}
	if err != nil {
		err = fmt.Errorf("control connection: %w", err)
	} else if err = pp.setup(ctx, port, l); err == nil {
		err = pp.run(ctx)
	}
	if err != nil {
		t.Fatalf("%s: %v\nthe exchanges that completed:\n  %s\nperftest: %v", pt.name, err, strings.Join(pp.comm.transcript, "\n  "), pt.wait(5*time.Second))
	}
	perr := pt.wait(30 * time.Second)
	end := pp.finish()
	t.Logf("exchanges:\n  %s", strings.Join(pp.comm.transcript, "\n  "))
	t.Logf("ours %v; perftest's %v; %s", pp.mine, pp.theirs, end)
	if perr != nil {
		t.Fatalf("%s: %v", pt.name, perr)
	}
	so, err := parsePtStdout(pt.out.String())
	if err != nil {
		t.Fatal(err)
	}
	// perftest prints both pingpong_dests as it sees them: its own must be
	// what we decoded, ours what we encoded.
	if len(so.local) != 1 || so.local[0] != (ptAddr{pp.theirs.QPN, pp.theirs.PSN}) {
		t.Errorf("perftest prints its own address as %+v; we decoded QPN %#x PSN %#x", so.local, pp.theirs.QPN, pp.theirs.PSN)
	}
	if len(so.remote) != 1 || so.remote[0] != (ptAddr{pp.mine.QPN, pp.mine.PSN}) {
		t.Errorf("perftest prints our address as %+v; we sent QPN %#x PSN %#x", so.remote, pp.mine.QPN, pp.mine.PSN)
	}
	if len(so.reports) != 1 {
		t.Fatalf("perftest printed %d report lines, want 1", len(so.reports))
	}
	rep := so.reports[0]
	if rep.Size != uint64(p.size) || rep.Iters != uint64(p.iters) {
		t.Errorf("perftest reports %d octets × %d, want %d × %d", rep.Size, rep.Iters, p.size, p.iters)
	}
	if p.verb != ptSend {
		// The report crossed the control connection: the server prints the
		// client's. Check it survived (perftest prints %.2f and %.6f).
		if !near(rep.Avg, pp.report.Avg, 0.005) || !near(rep.MsgRate, pp.report.MsgRate, 0.0000005) ||
			pp.report.Size != rep.Size || pp.report.Iters != rep.Iters {
			t.Errorf("perftest printed %+v; the report that crossed the wire is %+v", rep, pp.report)
		}
	}
	if strings.Contains(pt.out.String(), "Correlation coefficient") {
		pp.notes = append(pp.notes, "perftest could not calibrate its clock (TCG, r^2 < 0.9): its MB/s are 0, inf or nan")
	}
	who := map[bool]string{true: "perftest's server printed our", false: "perftest's client measured"}[client]
	if p.verb == ptSend {
		who = "perftest measured"
	}
	return fmt.Sprintf("%d B × %d: %s exit 0; %s %.2f MB/s (%.6f Mpps), we measured %.2f MB/s; %s",
		p.size, p.iters, p.verb.program(), who, rep.Avg, rep.MsgRate, pp.report.Avg, strings.Join(append(pp.notes, end), "; "))
}

// near says whether a and b agree within tol; inf and nan (what perftest
// reports when it could not calibrate its clock) agree with themselves.
func near(a, b, tol float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return math.IsNaN(a) && math.IsNaN(b) || a == b
	}
	return a-b <= tol && b-a <= tol
}
