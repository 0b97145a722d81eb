package initiator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/login"
	"github.com/ddpstore/ddpstore/transport/tcpconn"
)

// NetworkISCSITCP is the network name Dial takes for iSCSI over plain TCP
// (RFC 7143, no iSER): for targets without RDMA, such as Linux's LIO or
// tgtd on their TCP portals, or ddptarget's iscsi-tcp portals.
const NetworkISCSITCP = "iscsi-tcp"

// tcpRxData is the data segment a receive buffer holds: responses, their
// sense data and text answers fit; a longer one gets a buffer of its own.
const tcpRxData = loginData

// tcpRecvData is the MaxRecvDataSegmentLength the initiator declares over
// TCP: Data-In segments are read straight into the caller's buffer, so
// large ones cost nothing.
const tcpRecvData = 256 << 10

// tcpBatchPDUs bounds the PDUs one writev carries.
const tcpBatchPDUs = 64

// tcpTransport carries the session over one TCP connection as RFC 7143
// defines iSCSI: read data arrives in SCSI Data-In PDUs (section 11.7.2)
// that the reader goroutine reads straight into the command's buffer;
// write data beyond the immediate data goes in the SCSI Data-Out PDUs
// (section 11.7.1) that answer the target's R2Ts (section 11.8), written
// by the reader from the command's buffer; header and data digests
// (CRC32C) when negotiated. Other PDUs are handed to the session's loop.
//
// Posted PDUs go out in batches, as iSER's work requests do (iwarp's
// conn.post): a PDU posted when the target has answered since the last
// write is written by its poster, at once (a command alone: queue depth
// 1); one posted in a burst, with nothing come in since, waits in the
// queue for the sender goroutine, which yields once when woken so that
// the other posters a batch of answers readied queue theirs too, and then
// writes them all in one writev. The queue keeps the posting order, the
// CmdSN order.
type tcpTransport struct {
	s  *Session
	nc net.Conn

	slots [][]byte // send buffers, from the BHS

	wmu sync.Mutex // one batch of PDUs (or one burst of Data-Outs) on the wire at a time
	w   tcpconn.Writer
	r   tcpconn.Reader // the reader goroutine's

	qmu    sync.Mutex
	queue  []tcpPosted // posted, not yet taken for a write (under qmu)
	batch  []tcpPosted // the batch being written (under wmu)
	wakeTx chan struct{}
	txDone chan struct{}
	// rxPDUs counts the PDUs the reader took off the stream; rxSeen is
	// its value when the last batch was written: a poster writes itself
	// only when they differ (an answer came since).
	rxPDUs atomic.Uint64
	rxSeen atomic.Uint64
	writes atomic.Uint64 // writev calls of posted PDUs (tests)

	// xf[slot] describes the data buffer of the SCSI command in the
	// slot, for the reader (under xmu).
	xmu sync.Mutex
	xf  []tcpXfer
	// busy is the slot whose buffer the reader is reading Data-In into or
	// writing Data-Out from, or -1 (under xmu).
	busy int

	digests    tcpconn.Digests
	peerMaxSeg atomic.Uint32 // the target's MaxRecvDataSegmentLength

	rx       chan tcpRx
	bufs     chan []byte // receive buffers for PDUs the loop handles
	doneMu   sync.Mutex
	done     []int         // slots written, for the loop to report
	spare    []int         // the loop's other list (no allocation per I/O)
	nudge    chan struct{} // done has entries
	quit     chan struct{}
	readDone chan struct{}
	failed   atomic.Pointer[error]
	closed   sync.Once
}

// tcpPosted is a posted PDU: the first n octets of slot's send buffer.
type tcpPosted struct{ slot, n int }

// tcpXfer is one command's buffer: octets [off, off+n) of the region.
type tcpXfer struct {
	itt  uint32
	dir  Direction
	off  int
	n    uint32
	got  uint32 // Data-In octets read so far, in order
	live bool
}

// tcpRx is a PDU the reader hands the loop: BHS and data segment, copied.
type tcpRx struct {
	pdu []byte
	err error
}

// connectTCP dials the target's iSCSI/TCP portal.
func (s *Session) connectTCP(ctx context.Context, addr string) (*tcpTransport, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("initiator: connecting to %s: %w", addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	n := len(s.tasks)
	t := &tcpTransport{s: s, nc: nc, xf: make([]tcpXfer, n), busy: -1, rx: make(chan tcpRx, 16),
		nudge: make(chan struct{}, 1), quit: make(chan struct{}), readDone: make(chan struct{}),
		queue: make([]tcpPosted, 0, n), batch: make([]tcpPosted, 0, n),
		wakeTx: make(chan struct{}, 1), txDone: make(chan struct{})}
	t.bufs = make(chan []byte, n+4)
	for i := 0; i < n; i++ {
		t.slots = append(t.slots, make([]byte, iscsi.BHSLen+loginData+4))
	}
	for i := 0; i < n+4; i++ {
		t.bufs <- make([]byte, iscsi.BHSLen+tcpRxData)
	}
	t.peerMaxSeg.Store(loginData)
	t.w = tcpconn.Writer{Conn: nc, Digests: &t.digests}
	// The same read spin as over iSER (Config.Conn.ReadSpin and
	// ReadSpinAwaitedOnly).
	t.r = tcpconn.Reader{Conn: nc, Digests: &t.digests, Max: tcpRecvData, Spin: max(s.cfg.Conn.ReadSpin, 0),
		AwaitedOnly: s.cfg.Conn.ReadSpinAwaitedOnly, Writing: &t.w.Writing, Turn: &t.w.Turn}
	go t.read()
	go t.send()
	return t, nil
}

func (t *tcpTransport) loginConfig(ic *login.InitiatorConfig) {
	ic.Traditional = true
	ic.Offer.MaxRecvDataSegmentLength = tcpRecvData
	ic.Offer.HeaderDigest, ic.Offer.DataDigest = t.s.cfg.HeaderDigest, t.s.cfg.DataDigest
}

// negotiated switches the digests on and bounds immediate data by
// FirstBurstLength and the target's MaxRecvDataSegmentLength. The send
// slots, sized for login PDUs, grow to hold that much immediate data
// (the session copies it in after the BHS): a target declaring more than
// 8 KiB must not make a write overrun them.
func (t *tcpTransport) negotiated(p login.Params) int {
	t.peerMaxSeg.Store(p.PeerMaxRecvDataSegmentLength)
	t.digests.Header.Store(p.HeaderDigest)
	t.digests.Data.Store(p.DataDigest)
	if !p.ImmediateData {
		return 0
	}
	imm := int(min(p.FirstBurstLength, p.PeerMaxRecvDataSegmentLength))
	if need := iscsi.BHSLen + imm + 4; need > len(t.slots[0]) {
		for i := range t.slots {
			t.slots[i] = make([]byte, need)
		}
	}
	return imm
}

func (t *tcpTransport) sendBuf(slot int) []byte { return t.slots[slot] }

// command records the command's buffer for the Data-In and R2Ts that
// will name its ITT. The ITT is in the BHS the caller is building: it is
// read when the PDU is posted.
func (t *tcpTransport) command(slot int, dir Direction, off int, edtl uint32, _ int) error {
	t.xmu.Lock()
	t.xf[slot] = tcpXfer{dir: dir, off: off, n: edtl}
	t.xmu.Unlock()
	return nil
}

// release ends the reader's access to slot's buffer: a later Data-In or
// R2T for it is a protocol error.
func (t *tcpTransport) release(slot int) {
	t.xmu.Lock()
	t.xf[slot].live = false
	t.xmu.Unlock()
}

// settle ends the reader's access to slot's buffer and waits up to d
// until the reader is not reading Data-In into it or writing Data-Out
// from it.
func (t *tcpTransport) settle(slot int, d time.Duration) error {
	t.xmu.Lock()
	t.xf[slot].live = false
	busy := t.busy == slot
	t.xmu.Unlock()
	if !busy {
		return nil
	}
	deadline := time.Now().Add(d)
	for {
		time.Sleep(100 * time.Microsecond)
		t.xmu.Lock()
		busy = t.busy == slot
		t.xmu.Unlock()
		if !busy {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("initiator: the connection still moves data of a finished command after %v", d)
		}
	}
}

// done ends the reader's use of the buffer lookup handed out.
func (t *tcpTransport) unbusy() {
	t.xmu.Lock()
	t.busy = -1
	t.xmu.Unlock()
}

func (t *tcpTransport) awaitAnswer() { t.r.AwaitAnswer() }

// postPDU queues the PDU, to be written with its digests: by the poster
// at once when the target has answered since the last write, else by
// the sender goroutine with the others posted meanwhile. A SCSI Command's
// buffer becomes live for the reader first. The error is the poster's own
// write's; a failed write of the sender goroutine ends the connection,
// which the loop reports.
func (t *tcpTransport) postPDU(slot, n int) error {
	bhs := iscsi.BHS(t.slots[slot][:iscsi.BHSLen])
	if bhs.Opcode() == iscsi.OpSCSICommand {
		t.xmu.Lock()
		t.xf[slot].itt, t.xf[slot].live = bhs.ITT(), true
		t.xmu.Unlock()
	}
	t.qmu.Lock()
	t.queue = append(t.queue, tcpPosted{slot, n})
	t.qmu.Unlock()
	if t.rxPDUs.Load() == t.rxSeen.Load() || !t.wmu.TryLock() {
		t.wakeSender()
		return nil
	}
	err := t.writeQueued()
	t.wmu.Unlock()
	// A poster that came meanwhile found the lock taken and woke the
	// sender goroutine; what a full batch left is the sender's too.
	if t.queued() {
		t.wakeSender()
	}
	return err
}

func (t *tcpTransport) wakeSender() {
	select {
	case t.wakeTx <- struct{}{}:
	default:
	}
}

func (t *tcpTransport) queued() bool {
	t.qmu.Lock()
	defer t.qmu.Unlock()
	return len(t.queue) > 0
}

// send is the sender goroutine: woken by posts, it writes what is queued
// until the connection ends.
func (t *tcpTransport) send() {
	defer close(t.txDone)
	for {
		select {
		case <-t.wakeTx:
		case <-t.quit:
			return
		}
		// The wake-up readied this goroutine ahead of the posters the
		// same batch of answers readied (Go runs the goroutine a wake-up
		// readies next): let them post first, to go in this batch.
		runtime.Gosched()
		for t.queued() {
			t.wmu.Lock()
			err := t.writeQueued()
			t.wmu.Unlock()
			if err != nil {
				// The reader fails on the closed connection and reports
				// this error to the loop.
				t.failed.CompareAndSwap(nil, &err)
				t.nc.Close()
				return
			}
		}
	}
}

// writeQueued writes up to tcpBatchPDUs queued PDUs in one writev and
// reports their slots sent. t.wmu held.
func (t *tcpTransport) writeQueued() error {
	t.qmu.Lock()
	k := min(len(t.queue), tcpBatchPDUs)
	t.batch = append(t.batch[:0], t.queue[:k]...)
	t.queue = t.queue[:copy(t.queue, t.queue[k:])]
	t.qmu.Unlock()
	if k == 0 {
		return nil
	}
	t.rxSeen.Store(t.rxPDUs.Load())
	t.w.Begin(k)
	for _, p := range t.batch {
		b := t.slots[p.slot][:p.n]
		t.w.Append(iscsi.BHS(b[:iscsi.BHSLen]), b[iscsi.BHSLen:])
	}
	t.writes.Add(1)
	if err := t.write(); err != nil {
		return err
	}
	t.doneMu.Lock()
	for _, p := range t.batch {
		t.done = append(t.done, p.slot)
	}
	t.doneMu.Unlock()
	select {
	case t.nudge <- struct{}{}:
	default:
	}
	return nil
}

func (t *tcpTransport) write() error {
	if err := t.w.Flush(); err != nil {
		return fmt.Errorf("initiator: writing to the target: %w", err)
	}
	return nil
}

// run hands the reader's PDUs to the session and reports written slots,
// until the connection fails or wake is closed.
func (t *tcpTransport) run(wake <-chan bool, tick <-chan time.Time) error {
	s := t.s
	for {
		var err error
		select {
		case m := <-t.rx:
			if m.err != nil {
				return m.err
			}
			b := iscsi.BHS(m.pdu[:iscsi.BHSLen])
			err = s.received(b, m.pdu[iscsi.BHSLen:])
			if cap(m.pdu) == iscsi.BHSLen+tcpRxData {
				t.bufs <- m.pdu // received copies what it keeps
			}
		case <-t.nudge:
		case w := <-wake:
			if !w {
				return errStopped
			}
		case <-tick:
		}
		t.doneMu.Lock()
		done := t.done
		t.done = t.spare[:0]
		t.doneMu.Unlock()
		for _, slot := range done {
			s.sent(slot)
		}
		t.spare = done
		if err == nil {
			err = s.idle()
		}
		if err != nil {
			return err
		}
	}
}

func (t *tcpTransport) abort() {
	t.closed.Do(func() {
		close(t.quit)
		t.nc.Close()
	})
}

func (t *tcpTransport) err() error {
	if e := t.failed.Load(); e != nil {
		return *e
	}
	return nil
}

func (t *tcpTransport) close() error {
	t.abort()
	<-t.readDone
	<-t.txDone
	return nil
}

// read parses the stream until it ends.
func (t *tcpTransport) read() {
	defer close(t.readDone)
	end := func(err error) {
		if errors.Is(err, net.ErrClosed) {
			err = io.EOF
		}
		if !t.failed.CompareAndSwap(nil, &err) {
			err = *t.failed.Load() // the sender's failed write closed it
		}
		select {
		case t.rx <- tcpRx{err: err}:
		case <-t.quit:
		}
	}
	for {
		bhs, err := t.r.Header()
		t.rxPDUs.Add(1)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				err = fmt.Errorf("initiator: PDU from the target: %w", err)
			}
			end(err)
			return
		}
		switch bhs.Opcode() {
		case iscsi.OpSCSIDataIn:
			err = t.dataIn(bhs)
		case iscsi.OpR2T:
			err = t.r2t(bhs)
		default:
			if bhs.Opcode() == iscsi.OpSCSIResponse {
				r, _ := iscsi.AsSCSIResponse(bhs)
				if err = t.retire(bhs.ITT(), r.Status(), r.Underflow(), r.Overflow(), r.ResidualCount()); err != nil {
					end(err)
					return
				}
			}
			dsl := int(bhs.DataSegmentLength())
			var pdu []byte
			if dsl <= tcpRxData {
				select {
				case pdu = <-t.bufs:
				case <-t.quit:
					return
				}
			} else {
				pdu = make([]byte, iscsi.BHSLen+dsl) // a large text or ping answer: rare
			}
			pdu = pdu[:iscsi.BHSLen+dsl]
			copy(pdu, bhs)
			if err = t.r.Data(pdu[iscsi.BHSLen:]); err != nil {
				err = fmt.Errorf("initiator: %v (%v)", err, iscsi.BHS(pdu).Opcode())
				break
			}
			select {
			case t.rx <- tcpRx{pdu: pdu}:
			case <-t.quit:
				return
			}
		}
		if err != nil {
			end(err)
			return
		}
	}
}

// lookup finds the live command with this ITT and the octets of its
// buffer [off, off+n); nil when there is none or the span is outside it.
func (t *tcpTransport) lookup(itt uint32, dir Direction, off, n uint32) []byte {
	slot := int(itt & 0xffff)
	t.xmu.Lock()
	defer t.xmu.Unlock()
	if slot >= len(t.xf) {
		return nil
	}
	x := &t.xf[slot]
	if !x.live || x.itt != itt || x.dir != dir || uint64(off)+uint64(n) > uint64(x.n) {
		return nil
	}
	if dir == DataIn {
		// DataPDUInOrder and DataSequenceInOrder are Yes (we offer Yes
		// and they are OR keys): each Data-In continues the last one.
		if off != x.got {
			return nil
		}
		x.got += n
	}
	t.busy = slot // until unbusy: settle waits
	return t.s.bufs.Bytes()[x.off+int(off) : x.off+int(off)+int(n)]
}

// retire ends the buffer access of the command with this ITT: its answer
// is in, and no later Data-In or R2T may touch its buffer. A read that
// completes GOOD must have had exactly the data its residual says: a
// target that says more than it sent would have the caller take stale
// octets for data, and loses the connection.
func (t *tcpTransport) retire(itt uint32, status uint8, under, over bool, residual uint32) error {
	slot := int(itt & 0xffff)
	t.xmu.Lock()
	defer t.xmu.Unlock()
	if slot >= len(t.xf) || t.xf[slot].itt != itt || !t.xf[slot].live {
		return nil // not outstanding: the session ignores the answer
	}
	x := &t.xf[slot]
	x.live = false
	if x.dir != DataIn || status != 0 || under && over || under && residual > x.n {
		return nil // no data promised, or a residual the session refuses
	}
	want := x.n
	if under {
		want -= residual
	}
	if x.got != want {
		return fmt.Errorf("initiator: ITT %#x completed GOOD with %d octets of data promised but %d sent", itt, want, x.got)
	}
	return nil
}

// dataIn reads a Data-In's data into its command's buffer. A Data-In
// with status (S bit) ends the command: the loop gets it as the SCSI
// Response it stands for (section 11.7.2).
func (t *tcpTransport) dataIn(bhs iscsi.BHS) error {
	d, _ := iscsi.AsSCSIDataIn(bhs)
	dsl := int(bhs.DataSegmentLength())
	dst := t.lookup(bhs.ITT(), DataIn, d.BufferOffset(), uint32(dsl))
	if dst == nil {
		return fmt.Errorf("initiator: Data-In for ITT %#x (offset %d, %d octets) outside any outstanding read", bhs.ITT(), d.BufferOffset(), dsl)
	}
	err := t.r.Data(dst)
	t.unbusy()
	if err != nil {
		return fmt.Errorf("initiator: %v (Data-In, ITT %#x)", err, bhs.ITT())
	}
	if !d.HasStatus() {
		return nil
	}
	if err := t.retire(bhs.ITT(), d.Status(), d.Underflow(), d.Overflow(), d.ResidualCount()); err != nil {
		return err
	}
	var resp []byte
	select {
	case resp = <-t.bufs:
	case <-t.quit:
		return nil
	}
	resp = resp[:iscsi.BHSLen]
	clear(resp)
	r, _ := iscsi.NewSCSIResponse(resp)
	r.SetFinal(true)
	r.SetOverflow(d.Overflow())
	r.SetUnderflow(d.Underflow())
	r.SetStatus(d.Status())
	r.SetITT(bhs.ITT())
	r.SetStatSN(d.StatSN())
	r.SetExpCmdSN(d.ExpCmdSN())
	r.SetMaxCmdSN(d.MaxCmdSN())
	r.SetResidualCount(d.ResidualCount())
	select {
	case t.rx <- tcpRx{pdu: resp}:
	case <-t.quit:
	}
	return nil
}

// r2t answers an R2T with the Data-Out PDUs of the octets it asks for, at
// most the target's MaxRecvDataSegmentLength each.
func (t *tcpTransport) r2t(bhs iscsi.BHS) error {
	r, _ := iscsi.AsR2T(bhs)
	off, n := r.BufferOffset(), r.DesiredDataTransferLength()
	data := t.lookup(bhs.ITT(), DataOut, off, n)
	if data != nil {
		defer t.unbusy()
	}
	if data == nil || n == 0 {
		return fmt.Errorf("initiator: R2T for ITT %#x asks for %d octets at %d, outside any outstanding write", bhs.ITT(), n, off)
	}
	t.s.mu.Lock()
	expStat := t.s.expStat
	t.s.mu.Unlock()
	seg := int(t.peerMaxSeg.Load())
	k := (len(data) + seg - 1) / seg
	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.w.Begin(k)
	for i := 0; i < k; i++ {
		part := data[i*seg : min((i+1)*seg, len(data))]
		o, _ := iscsi.NewSCSIDataOut(t.w.Header())
		o.SetFinal(i == k-1)
		o.SetDataSegmentLength(uint32(len(part)))
		o.SetLUN(bhs.LUN())
		o.SetITT(bhs.ITT())
		o.SetTTT(r.TTT())
		o.SetExpStatSN(expStat)
		o.SetDataSN(uint32(i))
		o.SetBufferOffset(off + uint32(i*seg))
		t.w.Append(o.BHS, part)
	}
	return t.write()
}
