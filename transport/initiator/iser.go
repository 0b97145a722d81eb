package initiator

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
)

// iserTransport carries the session over one iSER connection (RFC 7145):
// PDUs in Sends behind an iSER header; each command's data buffer
// fast-registered on its own in the connection's PD (as Linux's ib_iser
// does), so that the command names exactly its buffer by an STag of its
// own and the target moves the data by RDMA Write and Read.
type iserTransport struct {
	s  *Session
	ic *iserconn.Conn
	// described[slot]: its iSER header is written (a SCSI Command's
	// STags); postPDU writes a plain header otherwise.
	described []bool
	// mrs[slot] is the fast-register MR over the whole buffer region that
	// the command in slot gets its STag from (none for the login's slot):
	// each command registers exactly its buffer with the access its
	// direction needs, under a fresh key.
	mrs []*mem.MR
	// stags[slot] is the STag of slot's command until it is invalidated
	// (the target's Send with Invalidate, or release). Under s.mu.
	stags []mem.STag
	// inv is the STag the Send being handled invalidated (loop only).
	inv mem.STag
}

// bufAccess is the most a command's buffer may allow: the target writes
// read data (RDMA Write), reads write data (RDMA Read) and invalidates the
// STag with its response (Send with Invalidate).
const bufAccess = mem.LocalWrite | mem.RemoteWrite | mem.RemoteRead | mem.RemoteInvalidate

// connectISER makes a connection: a QP with a fast-register MR over the
// buffer region for each task record, connected to the target with
// iSER's private data.
func (s *Session) connectISER(ctx context.Context, addr string) (*iserTransport, error) {
	n := len(s.tasks)
	c, err := iserconn.New(s.dev, iserconn.Config{
		RecvSlots: n, RecvData: loginData, SendSlots: n, SendData: loginData, SendWRs: n + extra,
	})
	if err != nil {
		return nil, err
	}
	t := &iserTransport{s: s, ic: c, described: make([]bool, n), mrs: make([]*mem.MR, n-1), stags: make([]mem.STag, n)}
	for i := range t.mrs {
		if t.mrs[i], err = s.dev.AllocFastReg(c.PD, s.bufs, 0, s.bufs.Len(), bufAccess); err != nil {
			t.close()
			return nil, fmt.Errorf("initiator: registering the buffers of %d commands: %w", len(t.mrs), err)
		}
	}
	// Every STag is the command's own: the target may invalidate it with
	// its response (RFC 7145 section 9.4; the flag stays clear).
	var pd [iser.CMHeaderLen]byte
	iser.CMFields{}.Encode(pd[:])
	cc := s.cfg.Conn
	cc.PrivateData = append(append([]byte(nil), cc.PrivateData...), pd[:]...)
	if _, err := c.QP.Connect(ctx, s.network, addr, cc); err != nil {
		t.close()
		return nil, fmt.Errorf("initiator: connecting to %s: %w", addr, err)
	}
	return t, nil
}

func (t *iserTransport) loginConfig(ic *login.InitiatorConfig) {
	p := &ic.Offer
	p.RDMAExtensions = true
	// Write Base Offsets name the solicited data, as Linux's and
	// libiscsi's initiators do without saying so and as Linux's target
	// (which ignores the key) assumes; declaring it keeps an RFC 7145
	// target that honours the key right too.
	p.TaggedBufferForSolicitedDataOnly = true
}

// negotiated: immediate data is bounded by FirstBurstLength and the
// target's receive buffers (RFC 7145 section 6.4).
func (t *iserTransport) negotiated(p login.Params) int {
	if !p.ImmediateData {
		return 0
	}
	return int(min(p.FirstBurstLength, p.TargetRecvDataSegmentLength))
}

func (t *iserTransport) sendBuf(slot int) []byte { return t.ic.SendBuf(slot)[iser.HeaderLen:] }

// command fast-registers the command's buffer under a fresh STag of slot's
// MR and writes the iSER header naming it: for data-in the read STag over
// the edtl octets at off, remote write only; for data-out the write STag
// over the octets beyond the immediate data, remote read only
// (TaggedBufferForSolicitedDataOnly=Yes: the Write Base Offset is the TO
// of the first octet after the immediate data). s.mu held.
func (t *iserTransport) command(slot int, dir Direction, off int, edtl uint32, imm int) error {
	h := iser.HeaderFields{}
	t.release(slot) // nothing of the slot's last command stays reachable
	var n int
	var acc mem.Access
	switch dir {
	case DataIn:
		n, acc = int(edtl), mem.LocalWrite|mem.RemoteWrite|mem.RemoteInvalidate
	case DataOut:
		off, n, acc = off+imm, int(edtl)-imm, mem.RemoteRead|mem.RemoteInvalidate
	}
	if n > 0 {
		mr := t.mrs[slot]
		stag, err := t.s.dev.FastRegister(mr, off, n, acc)
		if err != nil {
			return fmt.Errorf("initiator: registering a command's buffer: %w", err)
		}
		t.stags[slot] = stag
		if dir == DataIn {
			h.ReadValid, h.ReadSTag, h.ReadBaseOffset = true, uint32(stag), mr.BaseTO()
		} else {
			h.WriteValid, h.WriteSTag, h.WriteBaseOffset = true, uint32(stag), mr.BaseTO()
		}
	}
	h.Encode(t.ic.SendBuf(slot))
	t.described[slot] = true
	return nil
}

// release invalidates slot's STag locally, unless the target did: from
// now on a touch of the buffer through it is a Terminate. It does not wait
// for a placement already under way (settle does). s.mu held.
func (t *iserTransport) release(slot int) {
	if stag := t.stags[slot]; stag != 0 {
		t.stags[slot] = 0
		t.ic.Dev.Invalidate(stag, t.ic.PD)
	}
}

// settle makes sure that the RNIC is done with slot's buffer: its STag is
// invalid and nothing placed through it (a target's RDMA Write under way)
// or sent from it (an RDMA Read Response) is still in progress. It waits
// up to d; s.mu not held.
func (t *iserTransport) settle(slot int, d time.Duration) error {
	if slot >= len(t.mrs) {
		return nil
	}
	mr := t.mrs[slot]
	if t.ic.Dev.InvalidateWait(doneCtx, mr) == nil {
		return nil // the usual case: allocates nothing
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return t.ic.Dev.InvalidateWait(ctx, mr)
}

// postPDU sends a SCSI Command (described by command) as a command whose
// answer follows (iserconn.Conn.PostCommand), anything else as a PDU.
func (t *iserTransport) postPDU(slot, n int) error {
	if t.described[slot] {
		t.described[slot] = false
		return t.ic.PostCommand(slot, iser.HeaderLen+n)
	}
	iser.HeaderFields{}.Encode(t.ic.SendBuf(slot))
	return t.ic.PostPDU(slot, iser.HeaderLen+n, 0)
}

func (t *iserTransport) awaitAnswer() { t.ic.QP.AwaitAnswer() }

func (t *iserTransport) run(wake <-chan bool, tick <-chan time.Time) error {
	err := t.ic.Loop(context.Background(), t, wake, tick)
	if errors.Is(err, iserconn.ErrStopped) {
		return errStopped
	}
	return err
}

func (t *iserTransport) abort()     { t.ic.QP.Close() }
func (t *iserTransport) err() error { return t.ic.QP.Err() }

// close tears the connection down: the QP first, so that no placement is
// under way when the buffer MRs are deregistered.
func (t *iserTransport) close() error {
	t.ic.QP.Close()
	var mrs []*mem.MR
	for _, mr := range t.mrs {
		if mr != nil {
			mrs = append(mrs, mr)
		}
	}
	err := t.ic.Dev.Deregister(context.Background(), mrs...)
	if e := t.ic.Close(); err == nil {
		err = e
	}
	return err
}

// Invalidated implements iserconn.InvalidateHandler: the target's Send
// with Invalidate of stag, checked against the PDU it carries.
func (t *iserTransport) Invalidated(stag mem.STag) { t.inv = stag }

// PDU implements iserconn.Handler: an answer from the target, which must
// fit in its Send (padding optional). A Send with Invalidate must be a
// SCSI Response invalidating its own command's STag (RFC 7145 section
// 7.3.3): any other STag is a protocol error, which ends the connection.
func (t *iserTransport) PDU(msg []byte) error {
	inv := t.inv
	t.inv = 0
	_, pdu, err := iser.ParseHeader(msg)
	if err != nil {
		return fmt.Errorf("initiator: iSER message from the target: %w", err)
	}
	b, err := iscsi.Parse(pdu)
	if err != nil {
		return fmt.Errorf("initiator: PDU from the target: %w", err)
	}
	dsl := iscsi.BHSLen + int(b.DataSegmentLength())
	if len(pdu) < dsl || b.TotalAHSLength() != 0 {
		return fmt.Errorf("initiator: %v announces %d octets in a %d-octet message", b.Opcode(), b.PDULen(), len(pdu))
	}
	if inv != 0 {
		slot := int(b.ITT() & 0xffff)
		t.s.mu.Lock()
		ok := b.Opcode() == iscsi.OpSCSIResponse && slot < len(t.stags) && t.stags[slot] == inv
		if ok {
			t.stags[slot] = 0
		}
		t.s.mu.Unlock()
		if !ok {
			return fmt.Errorf("initiator: %v for ITT %#x came with Invalidate of %v, not its command's STag", b.Opcode(), b.ITT(), inv)
		}
	}
	return t.s.received(b, pdu[iscsi.BHSLen:dsl])
}

// SendDone implements iserconn.Handler.
func (t *iserTransport) SendDone(slot int, _ iwarp.Status) { t.s.sent(slot) }

// Completed implements iserconn.Handler; the initiator posts no RDMA
// operations of its own.
func (t *iserTransport) Completed(uint64, *iwarp.WC) {}

// Idle implements iserconn.Handler.
func (t *iserTransport) Idle() error { return t.s.idle() }

// doneCtx is a context that is done already: a wait with it only looks.
var doneCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()
