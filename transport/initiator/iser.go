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
// PDUs in Sends behind an iSER header; the buffer region registered in the
// connection's PD, so that a command names its buffer by STag and Base
// Offset and the target moves the data by RDMA Write and Read.
type iserTransport struct {
	s  *Session
	ic *iserconn.Conn
	// described[slot]: its iSER header is written (a SCSI Command's
	// STags); postPDU writes a plain header otherwise.
	described []bool
}

// connectISER makes a connection: a QP with the buffer region registered
// in its PD, connected to the target with iSER's private data.
func (s *Session) connectISER(ctx context.Context) (*iserTransport, error) {
	n := len(s.tasks)
	c, err := iserconn.New(s.dev, iserconn.Config{
		RecvSlots: n, RecvData: loginData, SendSlots: n, SendData: loginData, SendWRs: n + extra,
		ExtraMapping: s.bufs, ExtraAccess: mem.LocalWrite | mem.RemoteRead | mem.RemoteWrite,
	})
	if err != nil {
		return nil, err
	}
	// The buffer region is registered once for the whole connection, so
	// the target must not invalidate its STag: say so (RFC 7145 9.4).
	var pd [iser.CMHeaderLen]byte
	iser.CMFields{SendInvNotSupported: true}.Encode(pd[:])
	cc := s.cfg.Conn
	cc.PrivateData = append(append([]byte(nil), cc.PrivateData...), pd[:]...)
	if _, err := c.QP.Connect(ctx, s.network, s.addr, cc); err != nil {
		c.Close()
		return nil, fmt.Errorf("initiator: connecting to %s: %w", s.addr, err)
	}
	return &iserTransport{s: s, ic: c, described: make([]bool, n)}, nil
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

// command writes the iSER header naming the buffer by the connection's
// STag for the region: the read STag for data-in, the write STag for the
// data beyond the immediate data (TaggedBufferForSolicitedDataOnly=Yes:
// the offset of the first octet after the immediate data).
func (t *iserTransport) command(slot int, dir Direction, off int, edtl uint32, imm int) {
	h := iser.HeaderFields{}
	mr := t.ic.ExtraMR()
	va := mr.BaseTO() + uint64(off)
	switch dir {
	case DataIn:
		if edtl > 0 {
			h.ReadValid, h.ReadSTag, h.ReadBaseOffset = true, uint32(mr.STag()), va
		}
	case DataOut:
		if uint32(imm) < edtl {
			h.WriteValid, h.WriteSTag, h.WriteBaseOffset = true, uint32(mr.STag()), va+uint64(imm)
		}
	}
	h.Encode(t.ic.SendBuf(slot))
	t.described[slot] = true
}

func (t *iserTransport) postPDU(slot, n int) error {
	if !t.described[slot] {
		iser.HeaderFields{}.Encode(t.ic.SendBuf(slot))
	}
	t.described[slot] = false
	return t.ic.PostPDU(slot, iser.HeaderLen+n, 0)
}

func (t *iserTransport) run(wake <-chan bool, tick <-chan time.Time) error {
	err := t.ic.Loop(context.Background(), t, wake, tick)
	if errors.Is(err, iserconn.ErrStopped) {
		return errStopped
	}
	return err
}

func (t *iserTransport) abort()       { t.ic.QP.Close() }
func (t *iserTransport) err() error   { return t.ic.QP.Err() }
func (t *iserTransport) close() error { return t.ic.Close() }

// PDU implements iserconn.Handler: an answer from the target, which must
// fit in its Send (padding optional).
func (t *iserTransport) PDU(msg []byte) error {
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
	return t.s.received(b, pdu[iscsi.BHSLen:dsl])
}

// SendDone implements iserconn.Handler.
func (t *iserTransport) SendDone(slot int, _ iwarp.Status) { t.s.sent(slot) }

// Completed implements iserconn.Handler; the initiator posts no RDMA
// operations of its own.
func (t *iserTransport) Completed(uint64, *iwarp.WC) {}

// Idle implements iserconn.Handler.
func (t *iserTransport) Idle() error { return t.s.idle() }
