package initiator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/login"
)

// NetworkISCSITCP is the network name Dial takes for iSCSI over plain TCP
// (RFC 7143, no iSER): for targets without RDMA, such as Linux's LIO or
// tgtd on their TCP portals, or ddptarget's iscsi-tcp portals.
const NetworkISCSITCP = "iscsi-tcp"

// tcpRecvData is the MaxRecvDataSegmentLength the initiator declares over
// TCP: Data-In segments are read straight into the caller's buffer, so
// large ones cost nothing.
const tcpRecvData = 256 << 10

// tcpTransport carries the session over one TCP connection as RFC 7143
// defines iSCSI: read data arrives in SCSI Data-In PDUs (section 11.7.2)
// that the reader goroutine reads straight into the command's buffer;
// write data beyond the immediate data goes in the SCSI Data-Out PDUs
// (section 11.7.1) that answer the target's R2Ts (section 11.8), written
// by the reader from the command's buffer; header and data digests
// (CRC32C) when negotiated. Other PDUs are handed to the session's loop.
type tcpTransport struct {
	s  *Session
	nc net.Conn

	slots [][]byte // send buffers, from the BHS

	wmu  sync.Mutex // one PDU (or one burst of Data-Outs) on the wire at a time
	iov  net.Buffers
	iovs [][]byte
	hdrs []byte
	zero [8]byte

	// xf[slot] describes the data buffer of the SCSI command in the
	// slot, for the reader (under xmu).
	xmu sync.Mutex
	xf  []tcpXfer

	hdrDigest, dataDigest atomic.Bool
	peerMaxSeg            atomic.Uint32 // the target's MaxRecvDataSegmentLength

	rx       chan tcpRx
	doneMu   sync.Mutex
	done     []int         // slots written, for the loop to report
	nudge    chan struct{} // done has entries
	quit     chan struct{}
	readDone chan struct{}
	failed   atomic.Pointer[error]
	closed   sync.Once
}

// tcpXfer is one command's buffer: octets [off, off+n) of the region.
type tcpXfer struct {
	itt  uint32
	dir  Direction
	off  int
	n    uint32
	live bool
}

// tcpRx is a PDU the reader hands the loop: BHS and data segment, copied.
type tcpRx struct {
	pdu []byte
	err error
}

// connectTCP dials the target's iSCSI/TCP portal.
func (s *Session) connectTCP(ctx context.Context) (*tcpTransport, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return nil, fmt.Errorf("initiator: connecting to %s: %w", s.addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	n := len(s.tasks)
	t := &tcpTransport{s: s, nc: nc, xf: make([]tcpXfer, n), rx: make(chan tcpRx, 16),
		nudge: make(chan struct{}, 1), quit: make(chan struct{}), readDone: make(chan struct{})}
	for i := 0; i < n; i++ {
		t.slots = append(t.slots, make([]byte, iscsi.BHSLen+loginData+4))
	}
	t.peerMaxSeg.Store(loginData)
	go t.read()
	return t, nil
}

func (t *tcpTransport) loginConfig(ic *login.InitiatorConfig) {
	ic.Traditional = true
	ic.Offer.MaxRecvDataSegmentLength = tcpRecvData
	ic.Offer.HeaderDigest, ic.Offer.DataDigest = t.s.cfg.HeaderDigest, t.s.cfg.DataDigest
}

// negotiated switches the digests on and bounds immediate data by
// FirstBurstLength and the target's MaxRecvDataSegmentLength.
func (t *tcpTransport) negotiated(p login.Params) int {
	t.peerMaxSeg.Store(p.PeerMaxRecvDataSegmentLength)
	t.hdrDigest.Store(p.HeaderDigest)
	t.dataDigest.Store(p.DataDigest)
	if !p.ImmediateData {
		return 0
	}
	return int(min(p.FirstBurstLength, p.PeerMaxRecvDataSegmentLength))
}

func (t *tcpTransport) sendBuf(slot int) []byte { return t.slots[slot] }

// command records the command's buffer for the Data-In and R2Ts that
// will name its ITT. The ITT is in the BHS the caller is building: it is
// read when the PDU is posted.
func (t *tcpTransport) command(slot int, dir Direction, off int, edtl uint32, _ int) {
	t.xmu.Lock()
	t.xf[slot] = tcpXfer{dir: dir, off: off, n: edtl}
	t.xmu.Unlock()
}

// postPDU writes the PDU with its digests. A SCSI Command's buffer
// becomes live for the reader first.
func (t *tcpTransport) postPDU(slot, n int) error {
	b := t.slots[slot][:n]
	bhs := iscsi.BHS(b[:iscsi.BHSLen])
	if bhs.Opcode() == iscsi.OpSCSICommand {
		t.xmu.Lock()
		t.xf[slot].itt, t.xf[slot].live = bhs.ITT(), true
		t.xmu.Unlock()
	}
	t.wmu.Lock()
	t.iovs, t.hdrs = t.iovs[:0], t.hdrs[:0]
	t.room(1)
	t.appendPDU(bhs, b[iscsi.BHSLen:], 0)
	err := t.write()
	t.wmu.Unlock()
	if err != nil {
		return err
	}
	t.doneMu.Lock()
	t.done = append(t.done, slot)
	t.doneMu.Unlock()
	select {
	case t.nudge <- struct{}{}:
	default:
	}
	return nil
}

// room makes t.hdrs hold k PDU headers with their digests (wmu held).
func (t *tcpTransport) room(k int) {
	if need := k*(iscsi.BHSLen+2*iscsi.DigestLen) + 2*iscsi.DigestLen; cap(t.hdrs) < need {
		t.hdrs = make([]byte, 0, need)
	}
}

// appendPDU queues a PDU's BHS, header digest, data, padding and data
// digest for write (wmu held; room made).
func (t *tcpTransport) appendPDU(bhs, data []byte, pad int) {
	t.iovs = append(t.iovs, bhs)
	if t.hdrDigest.Load() {
		h := t.hdrs[len(t.hdrs) : len(t.hdrs)+iscsi.DigestLen]
		t.hdrs = t.hdrs[:len(t.hdrs)+iscsi.DigestLen]
		iscsi.PutDigest(h, iscsi.Digest(bhs))
		t.iovs = append(t.iovs, h)
	}
	if len(data) == 0 {
		return
	}
	t.iovs = append(t.iovs, data)
	if pad > 0 {
		t.iovs = append(t.iovs, t.zero[:pad])
	}
	if t.dataDigest.Load() {
		h := t.hdrs[len(t.hdrs) : len(t.hdrs)+iscsi.DigestLen]
		t.hdrs = t.hdrs[:len(t.hdrs)+iscsi.DigestLen]
		iscsi.PutDigest(h, iscsi.DigestUpdate(iscsi.Digest(data), t.zero[:pad]))
		t.iovs = append(t.iovs, h)
	}
}

func (t *tcpTransport) write() error {
	t.iov = t.iovs
	if _, err := t.iov.WriteTo(t.nc); err != nil {
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
		case <-t.nudge:
		case w := <-wake:
			if !w {
				return errStopped
			}
		case <-tick:
		}
		t.doneMu.Lock()
		done := t.done
		t.done = nil
		t.doneMu.Unlock()
		for _, slot := range done {
			s.sent(slot)
		}
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
	return nil
}

// read parses the stream until it ends.
func (t *tcpTransport) read() {
	defer close(t.readDone)
	var hdr [iscsi.BHSLen + iscsi.DigestLen]byte
	var tail [8]byte
	end := func(err error) {
		if errors.Is(err, net.ErrClosed) {
			err = io.EOF
		}
		t.failed.CompareAndSwap(nil, &err)
		select {
		case t.rx <- tcpRx{err: err}:
		case <-t.quit:
		}
	}
	for {
		if _, err := io.ReadFull(t.nc, hdr[:iscsi.BHSLen]); err != nil {
			end(err)
			return
		}
		bhs := iscsi.BHS(hdr[:iscsi.BHSLen])
		// Digests start with the Full Feature Phase, which begins before
		// the target can send its first PDU in it.
		if t.hdrDigest.Load() {
			if _, err := io.ReadFull(t.nc, hdr[iscsi.BHSLen:]); err != nil {
				end(err)
				return
			}
			if iscsi.Digest(bhs) != iscsi.GetDigest(hdr[iscsi.BHSLen:]) {
				end(fmt.Errorf("initiator: header digest error (%v)", bhs.Opcode()))
				return
			}
		}
		if _, err := iscsi.Parse(bhs); err != nil || bhs.TotalAHSLength() != 0 {
			end(fmt.Errorf("initiator: unparsable PDU from the target (%v, AHS %d words): %v", bhs.Opcode(), bhs.TotalAHSLength(), err))
			return
		}
		dsl := int(bhs.DataSegmentLength())
		if dsl > tcpRecvData {
			end(fmt.Errorf("initiator: %v with a data segment of %d octets, more than the %d declared", bhs.Opcode(), dsl, tcpRecvData))
			return
		}
		pad := bhs.PaddedDataLength() - dsl
		dd := t.dataDigest.Load() && dsl > 0
		tl := pad
		if dd {
			tl += iscsi.DigestLen
		}
		var err error
		switch bhs.Opcode() {
		case iscsi.OpSCSIDataIn:
			err = t.dataIn(bhs, dsl, tail[:tl], pad, dd)
		case iscsi.OpR2T:
			err = t.r2t(bhs)
		default:
			if bhs.Opcode() == iscsi.OpSCSIResponse {
				t.retire(bhs.ITT())
			}
			pdu := make([]byte, iscsi.BHSLen+dsl+tl)
			copy(pdu, bhs)
			if _, err = io.ReadFull(t.nc, pdu[iscsi.BHSLen:]); err == nil && dd {
				if iscsi.Digest(pdu[iscsi.BHSLen:iscsi.BHSLen+dsl+pad]) != iscsi.GetDigest(pdu[iscsi.BHSLen+dsl+pad:]) {
					err = fmt.Errorf("initiator: data digest error (%v)", bhs.Opcode())
				}
			}
			if err == nil {
				select {
				case t.rx <- tcpRx{pdu: pdu[:iscsi.BHSLen+dsl]}:
				case <-t.quit:
					return
				}
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
	x := t.xf[slot]
	if !x.live || x.itt != itt || x.dir != dir || uint64(off)+uint64(n) > uint64(x.n) {
		return nil
	}
	return t.s.bufs.Bytes()[x.off+int(off) : x.off+int(off)+int(n)]
}

// retire ends the buffer access of the command with this ITT: its answer
// is in, and no later Data-In or R2T may touch its buffer.
func (t *tcpTransport) retire(itt uint32) {
	slot := int(itt & 0xffff)
	t.xmu.Lock()
	if slot < len(t.xf) && t.xf[slot].itt == itt {
		t.xf[slot].live = false
	}
	t.xmu.Unlock()
}

// dataIn reads a Data-In's data into its command's buffer. A Data-In
// with status (S bit) ends the command: the loop gets it as the SCSI
// Response it stands for (section 11.7.2).
func (t *tcpTransport) dataIn(bhs iscsi.BHS, dsl int, tail []byte, pad int, dd bool) error {
	d, _ := iscsi.AsSCSIDataIn(bhs)
	dst := t.lookup(bhs.ITT(), DataIn, d.BufferOffset(), uint32(dsl))
	if dst == nil {
		return fmt.Errorf("initiator: Data-In for ITT %#x (offset %d, %d octets) outside any outstanding read", bhs.ITT(), d.BufferOffset(), dsl)
	}
	if _, err := io.ReadFull(t.nc, dst); err != nil {
		return err
	}
	if _, err := io.ReadFull(t.nc, tail); err != nil {
		return err
	}
	if dd && iscsi.DigestUpdate(iscsi.Digest(dst), tail[:pad]) != iscsi.GetDigest(tail[pad:]) {
		return fmt.Errorf("initiator: data digest error (Data-In, ITT %#x)", bhs.ITT())
	}
	if !d.HasStatus() {
		return nil
	}
	t.retire(bhs.ITT())
	resp := make([]byte, iscsi.BHSLen)
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
	t.iovs, t.hdrs = t.iovs[:0], t.hdrs[:0]
	t.room(k)
	for i := 0; i < k; i++ {
		part := data[i*seg : min((i+1)*seg, len(data))]
		h := t.hdrs[len(t.hdrs) : len(t.hdrs)+iscsi.BHSLen]
		t.hdrs = t.hdrs[:len(t.hdrs)+iscsi.BHSLen]
		o, _ := iscsi.NewSCSIDataOut(h)
		o.SetFinal(i == k-1)
		o.SetDataSegmentLength(uint32(len(part)))
		o.SetLUN(bhs.LUN())
		o.SetITT(bhs.ITT())
		o.SetTTT(r.TTT())
		o.SetExpStatSN(expStat)
		o.SetDataSN(uint32(i))
		o.SetBufferOffset(off + uint32(i*seg))
		t.appendPDU(h, part, (4-len(part)%4)%4)
	}
	return t.write()
}
