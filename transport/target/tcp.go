package target

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ddpstore/ddpstore/iwarp/mem"
	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/login"
	"github.com/ddpstore/ddpstore/transport/lu"
	"github.com/ddpstore/ddpstore/transport/tcpconn"
)

// tcpTransport carries a session over one TCP connection as RFC 7143
// defines iSCSI ("traditional" mode, beside iSER): every PDU on the byte
// stream, with header and data digests when negotiated (section 13.1);
// read data in SCSI Data-In PDUs (section 11.7.2) of at most the
// initiator's MaxRecvDataSegmentLength; write data beyond the immediate
// data solicited burst by burst with R2Ts (section 11.8) and taken from
// the SCSI Data-Out PDUs that answer them (section 11.7.1), straight into
// the staging region, or, for a placed WRITE (lu.Placement) without data
// digests, straight into the LU's store.
//
// A reader goroutine parses the stream: Data-Out data it reads in place,
// every other PDU into one of a ring of receive buffers that it hands to
// the connection's goroutine, which runs the session core and writes PDUs
// with writev.
type tcpTransport struct {
	c  *conn
	nc net.Conn

	stage *mem.Mapping
	slots [][]byte // send buffers, from the BHS
	done  []int    // slots written whose sent the loop has yet to call

	// Receive side. The reader owns the socket's read half; rbufs[i] is
	// the reader's between a take from free and a send on rx, the loop's
	// after.
	rbufs    [][]byte
	free     chan int
	rx       chan tcpRx
	loginAck chan struct{}
	quit     chan struct{}
	readDone chan struct{}
	maxRecv  int // the longest data segment accepted: tcpRecvData
	// rbufLen is a receive buffer's size; keepRecv the largest it stays
	// at once grown (room for immediate data of FirstBurstLength).
	rbufLen, keepRecv int

	digests tcpconn.Digests
	w       tcpconn.Writer
	r       tcpconn.Reader
	// open: w holds a batch not yet written, of batchBytes data octets;
	// pending are the slots of its PDUs.
	open       bool
	batchBytes int
	pending    []int

	// xf is each task's write data solicitation. The burst fields are
	// read and advanced by the reader under mu; the rest is the loop's.
	mu sync.Mutex
	xf []tcpTask

	scratch []byte // the reader's, for discarded Data-Out data

	peerMaxSeg  uint32 // the initiator's MaxRecvDataSegmentLength
	extendedAt  time.Time
	disconnects bool
}

// tcpRecvData is the MaxRecvDataSegmentLength the target declares over TCP
// (section 13.12), the longest data segment an initiator may send it.
// Data-Out segments are read straight into the staging or the store, so
// long ones cost nothing but save a PDU's reads each: 256 KiB, as the
// initiator declares, against 8 KiB: 4 Data-Out PDUs per MiB, not 128.
// Other PDUs go into receive buffers of Config.RecvDataSegment, each grown
// once when a longer segment (immediate data up to FirstBurstLength)
// comes; one grown further (a long Text or NOP-Out) is not kept so.
const tcpRecvData = 256 << 10

// The loop's batch: what it posts while more PDUs wait for it goes out
// together, in one writev, when none waits any more or the batch holds
// this much data or this many PDUs.
const (
	tcpBatchBytes = 256 << 10
	tcpBatchPDUs  = 64
)

// sendSlotLen is a send buffer's size: a BHS and a data segment of up to
// 8 KiB (sense data, text answers; longer NOP-In echoes: growSend).
const sendSlotLen = iscsi.BHSLen + loginData + 4

// tcpTask is one task's R2T state (section 11.8).
type tcpTask struct {
	itt   uint32
	lun   iscsi.LUN
	gen   uint16
	r2tsn uint32
	queue []tcpBurst // bursts fetch asked for, not yet solicited
	// r2tOut: an R2T is out and the loop has not yet taken its burst's
	// completion (the reader's active may already be false).
	r2tOut bool
	// The solicited burst, under mu.
	active bool
	ttt    uint32
	burst  tcpBurst
	got    uint32 // octets of it received
	dataSN uint32 // the next Data-Out's DataSN
	// reading: the reader is reading a Data-Out's data into the burst's
	// staging; cancelled: the task was aborted meanwhile, and the reader
	// ends the burst when that read is done. deadTTT is the TTT of the
	// last burst cancelled, whose Data-Out PDUs still in flight are
	// discarded (under mu).
	reading, cancelled bool
	deadTTT            uint32
	// held: the store octets of the task's placement, held in their
	// mapping (mem.Mapping.Hold) from its first fetch to endPlacement, so
	// that a reload cannot unmap them under the reader. Set by the loop
	// while the task has no active burst; read by the reader under mu.
	held    []byte
	heldMap *mem.Mapping
}

// tcpBurst is a span of write data: octets [off, off+n) of the command's
// data, for staging()[dst:], or, placed, for the task's held[dst:].
type tcpBurst struct {
	dst    int
	off, n uint32
	placed bool
}

// tcpRx is what the reader hands the loop.
type tcpRx struct {
	kind      int
	buf       int   // rxPDU: receive buffer
	n         int   // rxPDU: BHS and data segment octets in it
	ti        int32 // rxBurst: the task whose burst is in
	cancelled bool  // rxBurst: the burst ended because its task was aborted
	err       error // rxEnd
}

const (
	rxPDU = iota
	rxBurst
	rxEnd
)

// serveTCP runs an iSCSI/TCP connection from accept to its end.
func (c *conn) serveTCP(nc net.Conn) {
	cfg := &c.srv.cfg
	n := cfg.QueueDepth + extraTasks
	stage, err := mem.AnonymousLazy(cfg.Staging)
	if err != nil {
		c.log.Errorf("target: connection resources: %v", err)
		nc.Close()
		return
	}
	t := &tcpTransport{c: c, nc: nc, stage: stage,
		maxRecv: max(cfg.RecvDataSegment, tcpRecvData), free: make(chan int, n), rx: make(chan tcpRx, n+2),
		loginAck: make(chan struct{}), quit: make(chan struct{}), readDone: make(chan struct{}),
		xf: make([]tcpTask, taskRecords(cfg.QueueDepth)), peerMaxSeg: loginData,
		rbufLen: iscsi.BHSLen + max(cfg.RecvDataSegment, loginData)}
	t.keepRecv = max(t.rbufLen, iscsi.BHSLen+cfg.FirstBurst)
	for i := range t.xf {
		t.xf[i].deadTTT = iscsi.ReservedITT
	}
	for i := 0; i < n; i++ {
		t.slots = append(t.slots, make([]byte, sendSlotLen))
		t.rbufs = append(t.rbufs, make([]byte, t.rbufLen))
		t.free <- i
	}
	t.w = tcpconn.Writer{Conn: nc, Digests: &t.digests}
	t.r = tcpconn.Reader{Conn: nc, Digests: &t.digests, Max: t.maxRecv, Spin: cfg.TCPReadSpin, Writing: &t.w.Writing, Turn: &t.w.Turn}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	c.asyncMu.Lock()
	c.hangup = func() { nc.Close() }
	c.asyncMu.Unlock()
	wake := c.start(t)
	go t.read()
	tick := time.NewTicker(time.Second)
	err = t.loop(wake, tick.C)
	tick.Stop()
	close(t.quit)
	nc.Close()
	<-t.readDone
	// Nothing reads into a store any more: placements end (before
	// stopWorkers, as a worker's UNMAP may wait for them).
	t.releaseHolds()
	c.endPlacements()
	c.stopWorkers() // a slow command still running uses the LU
	stage.Close()
	c.ended(err)
}

// loop runs the session core on what the reader delivers, the wake-ups of
// slow commands and the ticker, until the connection ends.
func (t *tcpTransport) loop(wake <-chan bool, tick <-chan time.Time) error {
	c := t.c
	for {
		var err error
		select {
		case m := <-t.rx:
			switch m.kind {
			case rxPDU:
				b := t.rbufs[m.buf][:m.n]
				bhs := iscsi.BHS(b[:iscsi.BHSLen])
				login := bhs.Opcode() == iscsi.OpLoginReq
				err = c.received(bhs, b[iscsi.BHSLen:])
				if len(t.rbufs[m.buf]) > t.keepRecv {
					// Grown for a segment longer than immediate data may
					// be (a Text or NOP-Out): not kept at that size, so
					// that such PDUs cannot hold 256 KiB per buffer.
					t.rbufs[m.buf] = make([]byte, t.rbufLen)
				}
				t.free <- m.buf
				if login {
					t.loginAck <- struct{}{}
				}
			case rxBurst:
				t.xf[m.ti].r2tOut = false
				if m.cancelled {
					c.fetched(m.ti, false)
				} else if err = t.solicit(m.ti); err == nil {
					c.fetched(m.ti, true)
				}
			case rxEnd:
				t.flush()
				t.flushDone()
				if t.disconnects || errors.Is(m.err, io.EOF) && c.closing {
					return nil
				}
				return m.err
			}
		case w := <-wake:
			if !w {
				t.flush()
				t.flushDone()
				return errStopped
			}
		case <-tick:
		}
		if err == nil {
			err = t.flushDone()
		}
		if err == nil {
			err = c.idle()
		}
		// What this turn posted waits for the PDUs the reader has
		// already handed over: their answers go out with it.
		if len(t.rx) == 0 || err != nil || t.disconnects {
			if ferr := t.flush(); err == nil {
				err = ferr
			}
		}
		if ferr := t.flushDone(); err == nil {
			err = ferr
		}
		if err != nil {
			return err
		}
		if t.disconnects {
			// Every PDU is written: close our half; the initiator closes
			// its own and the reader sees the end.
			if tc, ok := t.nc.(*net.TCPConn); ok {
				tc.CloseWrite()
			} else {
				t.nc.Close()
			}
		}
	}
}

// flushDone reports the written slots to the core.
func (t *tcpTransport) flushDone() error {
	for len(t.done) > 0 {
		d := t.done
		t.done = t.done[:0]
		for _, s := range d {
			t.c.sent(s)
		}
	}
	return nil
}

// read parses the stream until it ends, handing PDUs to the loop.
func (t *tcpTransport) read() {
	defer close(t.readDone)
	end := func(err error) {
		select {
		case t.rx <- tcpRx{kind: rxEnd, err: err}:
		case <-t.quit:
		}
	}
	for {
		bhs, err := t.r.Header()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				err = fmt.Errorf("%w: %v", errProtocol, err)
			}
			end(err)
			return
		}
		if bhs.Opcode() == iscsi.OpSCSIDataOut {
			if err := t.dataOut(bhs); err != nil {
				end(err)
				return
			}
			continue
		}
		var i int
		select {
		case i = <-t.free:
		case <-t.quit:
			return
		}
		dsl := int(bhs.DataSegmentLength())
		b := t.rbufs[i]
		if len(b) < iscsi.BHSLen+dsl {
			// Once per buffer: then it holds such segments for good.
			b = make([]byte, iscsi.BHSLen+dsl)
			t.rbufs[i] = b
		}
		copy(b, bhs)
		if err := t.r.Data(b[iscsi.BHSLen : iscsi.BHSLen+dsl]); err != nil {
			// Section 7.8: a PDU with a data digest error is discarded; at
			// ErrorRecoveryLevel 0 the connection ends.
			end(fmt.Errorf("%w: %v (%v)", errProtocol, err, bhs.Opcode()))
			return
		}
		op := bhs.Opcode()
		select {
		case t.rx <- tcpRx{kind: rxPDU, buf: i, n: iscsi.BHSLen + dsl}:
		case <-t.quit:
			return
		}
		if op == iscsi.OpLoginReq {
			// The login may end with this PDU and switch digests on:
			// read on once the loop has taken it.
			select {
			case <-t.loginAck:
			case <-t.quit:
				return
			}
		}
	}
}

// dataOut reads the data segment of a Data-Out PDU into the staging of the
// burst it answers (its TTT names the task and the R2T): in order and
// within the burst (DataPDUInOrder and DataSequenceInOrder are Yes). When
// the burst is complete the loop is told.
func (t *tcpTransport) dataOut(bhs iscsi.BHS) error {
	d, _ := iscsi.AsSCSIDataOut(bhs)
	dsl := int(bhs.DataSegmentLength())
	ttt := d.TTT()
	ti := int32(ttt & 0xffff)
	t.mu.Lock()
	ok := ttt != iscsi.ReservedITT && int(ti) < len(t.xf)
	var x *tcpTask
	var dst []byte
	discard := false
	if ok {
		x = &t.xf[ti]
		off := d.BufferOffset()
		ok = x.active && !x.cancelled && x.ttt == ttt && x.itt == bhs.ITT() && off == x.burst.off+x.got &&
			uint64(off)+uint64(dsl) <= uint64(x.burst.off)+uint64(x.burst.n) && d.DataSN() == x.dataSN
		if ok {
			p := x.burst.dst + int(off-x.burst.off)
			if x.burst.placed {
				dst = x.held[p : p+dsl]
			} else {
				dst = t.stage.Bytes()[p : p+dsl]
			}
			x.reading = true
		} else if x.deadTTT == ttt || x.cancelled && x.ttt == ttt {
			// Data of an aborted task, sent before the initiator knew:
			// discarded (RFC 7143 section 11.5.1).
			discard = true
		}
	}
	t.mu.Unlock()
	if discard {
		if len(t.scratch) < dsl {
			t.scratch = make([]byte, t.maxRecv)
		}
		if err := t.r.Data(t.scratch[:dsl]); err != nil {
			return fmt.Errorf("%w: %v (Data-Out of an aborted task, ITT %#x)", errProtocol, err, bhs.ITT())
		}
		return nil
	}
	if !ok {
		return fmt.Errorf("%w: Data-Out (ITT %#x, TTT %#x, offset %d, DataSN %d, %d octets) that no R2T asked for",
			errProtocol, bhs.ITT(), ttt, d.BufferOffset(), d.DataSN(), dsl)
	}
	itt, final := bhs.ITT(), bhs.Final() // bhs is the Reader's: read before Data
	err := t.r.Data(dst)
	t.mu.Lock()
	x.reading = false
	cancelled := x.cancelled
	if cancelled {
		// Its task was aborted during the read: the staging is no longer
		// written, and the loop may let it go.
		x.cancelled, x.active, x.deadTTT = false, false, x.ttt
	}
	t.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%w: %v (Data-Out, ITT %#x)", errProtocol, err, itt)
	}
	if cancelled {
		select {
		case t.rx <- tcpRx{kind: rxBurst, ti: ti, cancelled: true}:
		case <-t.quit:
		}
		return nil
	}
	t.mu.Lock()
	x.got += uint32(dsl)
	x.dataSN++
	complete := x.got == x.burst.n
	if complete {
		x.active = false
	}
	t.mu.Unlock()
	if final != complete {
		return fmt.Errorf("%w: Data-Out sequence of ITT %#x: F bit %v after %d of %d octets", errProtocol, itt, final, x.got, x.burst.n)
	}
	if complete {
		select {
		case t.rx <- tcpRx{kind: rxBurst, ti: ti}:
		case <-t.quit:
		}
	}
	return nil
}

func (t *tcpTransport) name() string { return "iscsi-tcp" }

// loginConfig asks for traditional mode, declares the receive buffers'
// data segment length and accepts CRC32C digests when the initiator asks.
func (t *tcpTransport) loginConfig(tc *login.TargetConfig) {
	tc.Traditional = true
	tc.Offer.MaxRecvDataSegmentLength = uint32(t.maxRecv)
	tc.Offer.HeaderDigest, tc.Offer.DataDigest = true, true
}

func (t *tcpTransport) negotiated(p login.Params) {
	t.peerMaxSeg = p.PeerMaxRecvDataSegmentLength
	t.digests.Header.Store(p.HeaderDigest)
	t.digests.Data.Store(p.DataDigest)
}

func (t *tcpTransport) sendSlots() int          { return len(t.slots) }
func (t *tcpTransport) sendBuf(slot int) []byte { return t.slots[slot] }

// growSend gives slot a buffer with room for n data octets (a NOP-In's
// echo of up to 256 KiB of ping data); postPDU puts the usual one back.
func (t *tcpTransport) growSend(slot, n int) []byte {
	t.slots[slot] = make([]byte, iscsi.BHSLen+n+4)
	return t.slots[slot]
}
func (t *tcpTransport) room(int) bool   { return true }
func (t *tcpTransport) staging() []byte { return t.stage.Bytes() }

// useLUs writes the batch first: its Data-In may point into a store the
// new LUN map no longer holds, which may be closed once this returns.
func (t *tcpTransport) useLUs(*lu.Target) error { return t.flush() }
func (t *tcpTransport) disconnect()             { t.disconnects = true }

// postPDU adds the PDU, with its digests, to the loop's batch.
func (t *tcpTransport) postPDU(slot, n int, _ int32) error {
	b := t.slots[slot][:n]
	if err := t.reserve(1, n-iscsi.BHSLen); err != nil {
		return err
	}
	t.w.Append(iscsi.BHS(b[:iscsi.BHSLen]), b[iscsi.BHSLen:])
	t.pending = append(t.pending, slot)
	if len(t.slots[slot]) > sendSlotLen {
		// Grown for one PDU, which the batch now holds: the next gets the
		// usual size.
		t.slots[slot] = make([]byte, sendSlotLen)
	}
	return nil
}

// reserve makes room in the batch for k more PDUs carrying n data octets:
// it writes the batch first when that would take it past its bounds. Data
// past tcpBatchBytes goes in a batch of its own, but a PDU without data
// joins any (a read's SCSI Response, after its Data-In).
func (t *tcpTransport) reserve(k, n int) error {
	if t.open && (!t.w.Room(k) || n > 0 && t.batchBytes > 0 && t.batchBytes+n > tcpBatchBytes) {
		if err := t.flush(); err != nil {
			return err
		}
	}
	if !t.open {
		t.w.Begin(max(k, tcpBatchPDUs))
		t.open, t.batchBytes = true, 0
	}
	t.batchBytes += n
	return nil
}

// flush writes the batch; its slots are then the core's again (flushDone).
func (t *tcpTransport) flush() error {
	if !t.open {
		return nil
	}
	t.open = false
	t.done = append(t.done, t.pending...)
	t.pending = t.pending[:0]
	return t.write()
}

// write flushes the Writer's batch. A write that blocks for the NOP
// timeout fails: the deadline moves on at most once a second while writes
// progress.
func (t *tcpTransport) write() error {
	if now := time.Now(); now.Sub(t.extendedAt) > time.Second {
		t.extendedAt = now
		t.nc.SetWriteDeadline(now.Add(t.c.srv.cfg.NopTimeout))
	}
	tcpWrites.Add(1)
	if err := t.w.Flush(); err != nil {
		return fmt.Errorf("target: writing to the initiator: %w", err)
	}
	return nil
}

// tcpWrites counts the writev calls of every iSCSI/TCP connection (tests).
var tcpWrites atomic.Uint64

// command records the task's ITT and LUN for its R2Ts and Data-Ins and
// starts a new generation of its Target Transfer Tags.
func (t *tcpTransport) command(ti int32, cmd iscsi.SCSICommand, imm int) bool {
	x := &t.xf[ti]
	t.mu.Lock()
	x.active, x.itt = false, cmd.ITT()
	t.mu.Unlock()
	x.lun, x.r2tsn, x.queue, x.r2tOut = cmd.LUN(), 0, x.queue[:0], false
	x.gen++
	return true
}

// fetch queues a burst of write data and solicits it when no R2T of the
// task is outstanding (MaxOutstandingR2T is 1). A placed task's first
// fetch holds its placement's octets in the store's mapping.
func (t *tcpTransport) fetch(ti int32, dst dataRef, off, n uint32) error {
	x := &t.xf[ti]
	b := tcpBurst{dst: int(dst.off), off: off, n: n}
	if dst.lu != nil {
		p := &t.c.tasks[ti].place
		if x.held == nil {
			m := dst.lu.Store().Mapping()
			held, err := m.Hold(int(p.Offset()), int(p.Len()))
			if err != nil {
				return fmt.Errorf("target: placing a WRITE: %w", err)
			}
			t.mu.Lock()
			x.held, x.heldMap = held, m
			t.mu.Unlock()
		}
		b.dst, b.placed = int(dst.off-p.Offset()), true
	}
	x.queue = append(x.queue, b)
	if x.r2tOut {
		return nil
	}
	return t.solicit(ti)
}

// placesWrites: the reader reads Data-Out straight into the store, unless
// data digests are on: a digest is checked only after its data are read,
// and data that fail it must not reach the store (they are staged, and the
// WRITE stays all-or-nothing).
func (t *tcpTransport) placesWrites() bool { return !t.digests.Data.Load() }

// endPlacement releases task ti's hold on the store: no Data-Out of it is
// being read, nor will be.
func (t *tcpTransport) endPlacement(ti int32) {
	x := &t.xf[ti]
	if x.held == nil {
		return
	}
	t.mu.Lock()
	m := x.heldMap
	x.held, x.heldMap = nil, nil
	t.mu.Unlock()
	m.Release()
}

// releaseHolds releases the holds of every task, once the reader is gone.
func (t *tcpTransport) releaseHolds() {
	for ti := range t.xf {
		t.endPlacement(int32(ti))
	}
}

// cancel gives up task ti's bursts: those queued, and the solicited one
// unless its completion is already on its way to the loop or the reader is
// reading its data into the staging right now (then the reader ends it
// when that read is done). Data-Out PDUs for it still in flight are
// discarded.
func (t *tcpTransport) cancel(ti int32) int {
	x := &t.xf[ti]
	n := len(x.queue)
	x.queue = x.queue[:0]
	if !x.r2tOut {
		return n
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case !x.active:
		// Complete: its rxBurst comes and is counted as usual.
	case x.reading:
		x.cancelled = true
	default:
		x.active, x.deadTTT, x.r2tOut = false, x.ttt, false
		n++
	}
	return n
}

// solicit sends the R2T for the task's next queued burst, if any.
func (t *tcpTransport) solicit(ti int32) error {
	x := &t.xf[ti]
	if len(x.queue) == 0 {
		return nil
	}
	b := x.queue[0]
	x.queue = x.queue[:copy(x.queue, x.queue[1:])]
	x.r2tOut = true
	ttt := uint32(x.gen)<<16 | uint32(ti)
	if ttt == iscsi.ReservedITT {
		x.gen++
		ttt = uint32(x.gen)<<16 | uint32(ti)
	}
	t.mu.Lock()
	x.active, x.ttt, x.burst, x.got, x.dataSN = true, ttt, b, 0, 0
	t.mu.Unlock()
	if err := t.reserve(1, 0); err != nil {
		return err
	}
	r, _ := iscsi.NewR2T(t.w.Header())
	r.SetLUN(x.lun)
	r.SetITT(x.itt)
	r.SetTTT(ttt)
	r.SetStatSN(t.c.statSN)
	r.SetExpCmdSN(t.c.expCmdSN)
	r.SetMaxCmdSN(t.c.maxCmdSN())
	r.SetR2TSN(x.r2tsn)
	x.r2tsn++
	r.SetBufferOffset(b.off)
	r.SetDesiredDataTransferLength(b.n)
	t.w.Append(r.BHS, nil)
	return nil
}

// dataIn frames the read data in Data-In PDUs of at most the initiator's
// MaxRecvDataSegmentLength into the batch: the SCSI Response the core
// posts next joins them, and the whole read goes out in one writev with
// the batch, one system call and one wake-up of the initiator fewer per
// read.
func (t *tcpTransport) dataIn(ti int32, src dataRef, n uint32) error {
	var data []byte
	if src.lu != nil {
		data = src.lu.Store().Mapping().Bytes()[src.off : src.off+int64(n)]
	} else {
		data = t.stage.Bytes()[src.off : src.off+int64(n)]
	}
	x := &t.xf[ti]
	seg := int(t.peerMaxSeg)
	k := (len(data) + seg - 1) / seg
	if err := t.reserve(k+1, len(data)); err != nil { // and the SCSI Response
		return err
	}
	for i := 0; i < k; i++ {
		part := data[i*seg : min((i+1)*seg, len(data))]
		d, _ := iscsi.NewSCSIDataIn(t.w.Header())
		d.SetFinal(i == k-1)
		d.SetDataSegmentLength(uint32(len(part)))
		d.SetLUN(x.lun)
		d.SetITT(x.itt)
		d.SetTTT(iscsi.ReservedITT)
		d.SetExpCmdSN(t.c.expCmdSN)
		d.SetMaxCmdSN(t.c.maxCmdSN())
		d.SetDataSN(uint32(i))
		d.SetBufferOffset(uint32(i * seg))
		t.w.Append(d.BHS, part)
	}
	return nil
}

// ServeTCP accepts iSCSI connections over TCP (RFC 7143, without iSER) on
// l until l or the server is closed; it returns nil after Close. Sessions
// on it share the exports, the login, the SCSI layer and the limits with
// the iSER portals.
func (s *Server) ServeTCP(l net.Listener) error {
	return s.serve(l, func() (func(*conn), string, func(), error) {
		nc, err := l.Accept()
		if err != nil {
			return nil, "", nil, err
		}
		return func(c *conn) { c.serveTCP(nc) }, nc.RemoteAddr().String(), func() { nc.Close() }, nil
	}, "iscsi-tcp")
}
