package target

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/iwarp/mem"
	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/iser"
	"github.com/ddpstore/ddpstore/transport/iserconn"
	"github.com/ddpstore/ddpstore/transport/login"
	"github.com/ddpstore/ddpstore/transport/lu"
)

// iserTransport carries a session over one iSER connection (RFC 7145):
// PDUs in Sends with an iSER header, read data by RDMA Write from the
// store's registered mapping, write data by RDMA Read into the registered
// staging region or, for a placed WRITE (lu.Placement), into the store's
// mapping through a memory window of the command's blocks alone.
type iserTransport struct {
	c  *conn
	ic *iserconn.Conn

	sendInv       bool // the initiator accepts Send with Invalidate
	solicitedOnly bool // Write Base Offsets skip the unsolicited data (writeTO)
	sq            int  // free send queue entries
	hdr           iser.Header
	xf            []iserTask // by task index
	// storeMR registers each LU's store mapping for local access: the
	// source of RDMA Writes of read data.
	storeMR map[*lu.LU]*mem.MR
	// windows are each LU's fast-register regions over its store mapping
	// not in use: a placed WRITE's RDMA Reads write into one, registered
	// over the command's blocks with remote write access for as long as
	// they are outstanding (sinkWindow).
	windows map[*lu.LU][]*mem.MR
}

// iserTask is what the iSER header of a task's command said about the
// initiator's buffers (RFC 7145 section 9.1), and the window its placed
// WRITE's data go through.
type iserTask struct {
	rstag, wstag mem.STag
	rto, wto     uint64
	win          *mem.MR // nil: none
	winLU        *lu.LU
	winOff       int64 // store offset of the window's first octet
}

// serveISER runs the connection of req from its MPA Request to its end.
func (c *conn) serveISER(req *iwarp.ConnRequest) {
	cfg := &c.srv.cfg
	hdr, err := iser.ParseCMHeader(req.PrivateData())
	if err != nil {
		c.log.Warnf("target: refusing a connection without iSER private data: %v", err)
		req.Reject(nil)
		return
	}
	c.log.Debugf("target: MPA revision %d, iSER CM flags: ZBVA not supported %v, Send with Invalidate not supported %v",
		req.Revision(), hdr.ZBVANotSupported(), hdr.SendInvNotSupported())
	depth := cfg.QueueDepth
	t := &iserTransport{c: c, sendInv: !hdr.SendInvNotSupported(), sq: 3*depth + 2*extraTasks,
		xf: make([]iserTask, taskRecords(depth)), storeMR: map[*lu.LU]*mem.MR{}, windows: map[*lu.LU][]*mem.MR{}}
	t.ic, err = iserconn.New(c.srv.dev, iserconn.Config{
		RecvSlots: depth + extraTasks, RecvData: max(cfg.RecvDataSegment, loginData),
		SendSlots: depth + extraTasks, SendData: loginData,
		SendWRs: 3*depth + 2*extraTasks,
		Extra:   cfg.Staging, ExtraAccess: mem.LocalWrite | mem.RemoteWrite,
	})
	if err != nil {
		c.log.Errorf("target: connection resources: %v", err)
		req.Reject(nil)
		return
	}
	defer func() {
		t.ic.QP.Close()
		// Deregistering waits until nothing is being placed through a
		// window; then no data of a placed WRITE can arrive any more,
		// and its placement ends. That comes before stopWorkers: a
		// worker's COMPARE AND WRITE, UNMAP or WRITE SAME may be waiting
		// for these placements to end.
		for _, ws := range t.windows {
			c.srv.dev.Deregister(context.Background(), ws...)
		}
		for ti := range t.xf {
			if x := &t.xf[ti]; x.win != nil {
				c.srv.dev.Deregister(context.Background(), x.win) // in use
			}
		}
		c.endPlacements()
		c.stopWorkers() // a slow command still running uses the LU
		for _, mr := range t.storeMR {
			c.srv.dev.Deregister(context.Background(), mr)
		}
		t.ic.Close()
	}()
	var reply [iser.CMHeaderLen]byte
	iser.CMFields{}.Encode(reply[:])
	wake := c.start(t)
	if err := req.Accept(t.ic.QP, reply[:]); err != nil {
		c.log.Warnf("target: MPA accept: %v", err)
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	err = t.ic.Loop(context.Background(), t, wake, tick.C)
	if errors.Is(err, iserconn.ErrStopped) {
		err = errStopped
	}
	c.ended(err)
}

func (t *iserTransport) name() string { return "iser" }

func (t *iserTransport) loginConfig(tc *login.TargetConfig) { tc.Offer.RDMAExtensions = true }

func (t *iserTransport) negotiated(p login.Params) {
	t.solicitedOnly = p.TaggedBufferForSolicitedDataOnly || !p.TaggedBufferDeclared
}

func (t *iserTransport) sendSlots() int { return t.ic.SendSlots() }

func (t *iserTransport) sendBuf(slot int) []byte { return t.ic.SendBuf(slot)[iser.HeaderLen:] }

// growSend returns the usual buffer: the only data segment whose length
// the initiator chooses, a ping's echo, came in a receive buffer of
// TargetRecvDataSegmentLength, which is the send buffers' size (8 KiB)
// unless Config.RecvDataSegment raises it; then a longer echo is cut, as
// it always was over iSER.
func (t *iserTransport) growSend(slot, n int) []byte { return t.sendBuf(slot) }

func (t *iserTransport) room(n int) bool { return t.sq >= n }

func (t *iserTransport) staging() []byte { return t.ic.ExtraMR().Bytes() }

// PDU implements iserconn.Handler: one Send's message. The Send delimits
// the PDU, so the PDU is the message after the iSER header: its BHS says
// how much of it is data segment. The initiator may leave out the padding
// of the data segment (libiscsi does; RFC 7143 section 11.1 makes padding
// part of the PDU, but the Send already says where the PDU ends); anything
// longer than the padded length, or an AHS, is refused.
func (t *iserTransport) PDU(msg []byte) error {
	c := t.c
	op, err := iser.MessageOpcode(msg)
	if err != nil {
		return c.drop(fmt.Errorf("%w: iSER message: %v", errProtocol, err))
	}
	if op == iser.OpHello {
		return t.hello(msg)
	}
	h, pdu, err := iser.ParseHeader(msg)
	if err != nil {
		return c.drop(fmt.Errorf("%w: iSER header: %v", errProtocol, err))
	}
	bhs, err := iscsi.Parse(pdu)
	if err != nil {
		return c.drop(fmt.Errorf("%w: iSCSI PDU: %v", errProtocol, err))
	}
	dsl := int(bhs.DataSegmentLength())
	if bhs.TotalAHSLength() != 0 || len(pdu) < iscsi.BHSLen+dsl || len(pdu) > bhs.PDULen() {
		return c.malformed(bhs, fmt.Errorf("%w: PDU of %d octets announces %d (AHS %d words)", errProtocol, len(pdu), bhs.PDULen(), bhs.TotalAHSLength()))
	}
	t.hdr = h
	return c.received(bhs, pdu[iscsi.BHSLen:iscsi.BHSLen+dsl])
}

// hello answers an iSER Hello (RFC 7145 section 9.2) with a HelloReply
// accepting version 0xA. Linux never sends one; others may, before login.
func (t *iserTransport) hello(msg []byte) error {
	c := t.c
	hm, err := iser.ParseHello(msg)
	if err != nil || c.ffp {
		return c.drop(fmt.Errorf("%w: iSER Hello: %v", errProtocol, err))
	}
	slot, ok := c.takeSlot()
	if !ok {
		return c.drop(errors.New("target: no send buffer for a HelloReply"))
	}
	buf := t.ic.SendBuf(slot)
	reject := hm.MinVer() > iser.Version || hm.MaxVer() < iser.Version
	n, err := iser.HelloReplyFields{Reject: reject, MaxVer: iser.Version, CurVer: iser.Version, ORD: hm.IRD()}.Encode(buf)
	if err != nil {
		return err
	}
	if reject {
		c.closing = true
		c.closeWhy = fmt.Errorf("iSER Hello for versions %d..%d", hm.MinVer(), hm.MaxVer())
	}
	t.sq--
	return t.ic.PostPDU(slot, n, 0)
}

// postPDU sends the PDU with an iSER header, with Send with Invalidate of
// the initiator's STag when this is a task's response and the initiator
// accepts that (RFC 7145 section 7.3.3).
func (t *iserTransport) postPDU(slot, n int, ti int32) error {
	iser.HeaderFields{}.Encode(t.ic.SendBuf(slot))
	var inv mem.STag
	if ti >= 0 && t.sendInv {
		x, task := &t.xf[ti], &t.c.tasks[ti]
		if task.read && x.rstag != 0 {
			inv = x.rstag
		} else if task.write && x.wstag != 0 && task.edtl > 0 {
			inv = x.wstag
		}
	}
	t.sq--
	return t.ic.PostPDU(slot, iser.HeaderLen+n, inv)
}

// command takes the STags and Base Offsets of the command's iSER header: a
// read with data needs a read STag, a write with data beyond its immediate
// data a write STag.
func (t *iserTransport) command(ti int32, cmd iscsi.SCSICommand, imm int) bool {
	h := t.hdr
	edtl := cmd.ExpectedDataTransferLength()
	if cmd.Read() && edtl > 0 && !h.ReadValid() || cmd.Write() && uint32(imm) < edtl && !h.WriteValid() {
		return false
	}
	t.xf[ti] = iserTask{rstag: mem.STag(h.ReadSTag()), rto: h.ReadBaseOffset(),
		wstag: mem.STag(h.WriteSTag()), wto: h.WriteBaseOffset()}
	return true
}

// writeTO is the Tagged Offset in the initiator's buffer of write data
// octet off. The Write Base Offset names the first octet of the data
// (RFC 7145 section 9.1), or, when the initiator declared
// TaggedBufferForSolicitedDataOnly=Yes, the first octet after the
// unsolicited data (section 6.9). An initiator that declares nothing gets
// the latter too: Linux's and libiscsi's iSER initiators declare nothing
// and advance the offset past their immediate data, as Linux's own target
// expects (docs/interop.md, "Linux iSER initiator").
func (t *iserTransport) writeTO(ti int32, off uint32) uint64 {
	if t.solicitedOnly {
		return t.xf[ti].wto + uint64(off-t.c.tasks[ti].unsol)
	}
	return t.xf[ti].wto + uint64(off)
}

// fetch posts an RDMA Read of the write data (RFC 7145 section 7.3.4):
// into the staging, or through the task's window into the store.
func (t *iserTransport) fetch(ti int32, dst dataRef, off, n uint32) error {
	var sge iwarp.SGE
	if dst.lu != nil {
		var err error
		if sge, err = t.sinkWindow(ti, dst, n); err != nil {
			return err
		}
	} else {
		sge = iwarp.SGEOf(t.ic.ExtraMR(), int(dst.off), int(n))
	}
	if err := t.ic.Post(iwarp.OpRead, uint64(ti), sge, t.xf[ti].wstag, t.writeTO(ti, off)); err != nil {
		return fmt.Errorf("target: posting an RDMA Read: %w", err)
	}
	t.sq--
	return nil
}

// placesWrites: RDMA Reads can write into a store's mapping.
func (t *iserTransport) placesWrites() bool { return true }

// sinkWindow returns the Data Sink of an RDMA Read of n octets into the
// store at dst, through task ti's window. The task's first fetch
// registers the window over the rest of its placement, with the remote
// write access a Read Response needs (RFC 5040 section 6.3: it is placed
// as a Tagged Buffer of the sink STag); the store's own registration stays
// local, so the initiator can reach no other blocks.
func (t *iserTransport) sinkWindow(ti int32, dst dataRef, n uint32) (iwarp.SGE, error) {
	x := &t.xf[ti]
	if x.win == nil {
		p := &t.c.tasks[ti].place
		free := t.windows[dst.lu]
		var mr *mem.MR
		if k := len(free); k > 0 {
			mr, t.windows[dst.lu] = free[k-1], free[:k-1]
		} else {
			var err error
			if mr, err = t.c.srv.dev.AllocFastReg(t.ic.PD, dst.lu.Store().Mapping(), 0, int(dst.lu.Size()), windowAccess); err != nil {
				return iwarp.SGE{}, fmt.Errorf("target: a memory window for a placed WRITE: %w", err)
			}
			if _, ok := t.windows[dst.lu]; !ok {
				t.windows[dst.lu] = nil // the LU's pool, until useLUs drops the LU
			}
		}
		end := p.Offset() + p.Len()
		if _, err := t.c.srv.dev.FastRegister(mr, int(dst.off), int(end-dst.off), windowAccess); err != nil {
			t.windows[dst.lu] = append(t.windows[dst.lu], mr)
			return iwarp.SGE{}, fmt.Errorf("target: registering a placed WRITE's window: %w", err)
		}
		x.win, x.winLU, x.winOff = mr, dst.lu, dst.off
	}
	return iwarp.SGE{STag: x.win.STag(), TO: x.win.BaseTO() + uint64(dst.off-x.winOff), Len: n}, nil
}

// windowAccess is a placed WRITE's window's: the Read Responses' data are
// placed only once their CRC has checked (mem.Verified), so a corrupted
// stream never reaches the store.
const windowAccess = mem.LocalWrite | mem.RemoteWrite | mem.Verified

// endPlacement invalidates task ti's window, so that the initiator can no
// longer write the store through it, and keeps it for another task.
func (t *iserTransport) endPlacement(ti int32) {
	x := &t.xf[ti]
	if x.win == nil {
		return
	}
	t.c.srv.dev.Invalidate(x.win.STag(), t.ic.PD)
	if free, ok := t.windows[x.winLU]; ok {
		t.windows[x.winLU] = append(free, x.win)
	} else {
		// The LU is no longer served: useLUs deregistered its pool.
		t.c.srv.dev.Deregister(context.Background(), x.win)
	}
	x.win, x.winLU = nil, nil
}

// cancel gives up nothing: RDMA Reads are answered by the initiator's
// RNIC, or flushed when the connection ends, and complete through
// Completed either way.
func (t *iserTransport) cancel(int32) int { return 0 }

// dataIn posts an RDMA Write of the read data into the initiator's buffer
// (RFC 7145 section 7.3.3), straight from the store's mapping when the data
// is the store's.
func (t *iserTransport) dataIn(ti int32, src dataRef, n uint32) error {
	var sge iwarp.SGE
	if src.lu != nil {
		sge = iwarp.SGEOf(t.storeMR[src.lu], int(src.off), int(n))
	} else {
		sge = iwarp.SGEOf(t.ic.ExtraMR(), int(src.off), int(n))
	}
	x := &t.xf[ti]
	if err := t.ic.Post(iwarp.OpWrite, uint64(ti), sge, x.rstag, x.rto); err != nil {
		return fmt.Errorf("target: posting an RDMA Write: %w", err)
	}
	t.sq--
	return nil
}

// useLUs registers the store mappings of tg's LUs (local access only) in
// the connection's PD and deregisters those of LUs no longer served.
func (t *iserTransport) useLUs(tg *lu.Target) error {
	keep := map[*lu.LU]bool{}
	for _, n := range tg.LUNs() {
		l := tg.LU(n)
		keep[l] = true
		if t.storeMR[l] != nil || l.Remote() {
			continue // a remote store's reads go through staging
		}
		mr, err := t.c.srv.dev.Register(t.ic.PD, l.Store().Mapping(), 0, int(l.Size()), 0)
		if err != nil {
			return fmt.Errorf("target: registering LUN %d: %w", n, err)
		}
		t.storeMR[l] = mr
	}
	for l, mr := range t.storeMR {
		if !keep[l] {
			// Waits for RDMA Writes still reading it.
			t.c.srv.dev.Deregister(context.Background(), mr)
			delete(t.storeMR, l)
		}
	}
	for l, ws := range t.windows {
		if !keep[l] {
			// A window in use stays with its task until endPlacement.
			t.c.srv.dev.Deregister(context.Background(), ws...)
			delete(t.windows, l)
		}
	}
	return nil
}

func (t *iserTransport) disconnect() { t.ic.QP.Disconnect() }

// SendDone implements iserconn.Handler.
func (t *iserTransport) SendDone(slot int, _ iwarp.Status) {
	t.sq++
	t.c.sent(slot)
}

// Completed implements iserconn.Handler: RDMA Reads of write data and
// RDMA Writes of read data.
func (t *iserTransport) Completed(id uint64, wc *iwarp.WC) {
	t.sq++
	if wc.Op == iwarp.WCRead {
		t.c.fetched(int32(id), wc.Status == iwarp.StatusSuccess)
	}
}

// Idle implements iserconn.Handler.
func (t *iserTransport) Idle() error { return t.c.idle() }
