package target

import (
	"fmt"
	"time"

	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/login"
)

// reservedTag is the reserved ITT/TTT value 0xffffffff (RFC 7143 11.2.1.8).
const reservedTag = iscsi.ReservedITT

// pdu takes a send buffer, has fill write a BHS at b[:48] and data after it
// (returning the data length), and posts it. A target PDU's StatSN, ExpCmdSN
// and MaxCmdSN sit at the same octets whatever its opcode (TargetSNs).
func (c *conn) pdu(op iscsi.Opcode, advanceStatSN bool, fill func(b iscsi.BHS, data []byte) (int, error)) error {
	return c.pduRoom(op, advanceStatSN, 0, fill)
}

// pduRoom is pdu with room for a data segment of room octets, more than a
// send buffer may hold (a NOP-In's echo of ping data).
func (c *conn) pduRoom(op iscsi.Opcode, advanceStatSN bool, room int, fill func(b iscsi.BHS, data []byte) (int, error)) error {
	slot, ok := c.takeSlot()
	if !ok {
		return c.drop(fmt.Errorf("target: no send buffer for a %v: the initiator exceeds MaxOutstandingUnexpectedPDUs", op))
	}
	buf := c.tr.sendBuf(slot)
	if iscsi.BHSLen+room+4 > len(buf) {
		buf = c.tr.growSend(slot, room)
	}
	b, err := iscsi.Init(buf[:iscsi.BHSLen], op)
	if err != nil {
		return err
	}
	b.SetFinal(true)
	sn := iscsi.TargetSNs{BHS: b}
	sn.SetStatSN(c.statSN)
	if advanceStatSN {
		c.statSN++
	}
	sn.SetExpCmdSN(c.expCmdSN)
	sn.SetMaxCmdSN(c.maxCmdSN())
	n, err := fill(b, buf[iscsi.BHSLen:])
	if err != nil {
		return err
	}
	if err := b.SetDataSegmentLength(uint32(n)); err != nil {
		return err
	}
	end := iscsi.BHSLen + n
	for end%4 != 0 {
		buf[end] = 0
		end++
	}
	return c.tr.postPDU(slot, end, -1)
}

// reject answers a PDU the target will not act on with a Reject carrying
// its header (RFC 7143 section 11.17).
func (c *conn) reject(bad iscsi.BHS, reason uint8) error {
	return c.rejectWhy(bad, reason, "")
}

// rejectWhy is reject with the reason in words for the log.
func (c *conn) rejectWhy(bad iscsi.BHS, reason uint8, why string) error {
	if why != "" {
		why = ": " + why
	}
	c.log.Warnf("target: rejecting %v (ITT %#x): reason %#02x%s", bad.Opcode(), bad.ITT(), reason, why)
	if c.obs != nil {
		c.obs.Rejected(reason)
	}
	return c.pdu(iscsi.OpReject, true, func(b iscsi.BHS, data []byte) (int, error) {
		r, _ := iscsi.AsReject(b)
		r.SetReason(reason)
		r.SetITT(reservedTag)
		return copy(data, bad[:iscsi.BHSLen]), nil
	})
}

// nopOut answers a ping with a NOP-In echoing its data, or takes the
// answer to the target's own ping (RFC 7143 sections 11.18, 11.19).
func (c *conn) nopOut(bhs iscsi.BHS, data []byte) error {
	n, _ := iscsi.AsNOPOut(bhs)
	if bhs.ITT() == reservedTag {
		if n.TTT() == c.pingTTT && !c.pingSent.IsZero() {
			c.pingSent = time.Time{}
			c.log.Debug("target: NOP-Out answers our ping")
		}
		return nil
	}
	if !c.admit(bhs) {
		return nil // outside the window: silently ignored (acceptCmdSN)
	}
	c.log.Debugf("target: NOP-Out ping (ITT %#x)", bhs.ITT())
	// The ping data come back whole (RFC 7143 section 11.19), however
	// long the initiator could send them, up to its own
	// MaxRecvDataSegmentLength ("The length of the reflected data is
	// limited to MaxRecvDataSegmentLength").
	if c.peerRecvData > 0 && len(data) > c.peerRecvData {
		data = data[:c.peerRecvData]
	}
	return c.pduRoom(iscsi.OpNOPIn, true, len(data), func(b iscsi.BHS, out []byte) (int, error) {
		in, _ := iscsi.AsNOPIn(b)
		in.SetITT(bhs.ITT())
		in.SetTTT(reservedTag)
		return copy(out, data), nil
	})
}

// admit checks the CmdSN of a request that is not a SCSI task (NOP-Out,
// task management, text, logout) and, since it is answered at once, gives
// its place in the window straight back. A request it refuses is ignored.
func (c *conn) admit(bhs iscsi.BHS) bool {
	windowed, ok := c.acceptCmdSN(bhs)
	c.windowDone(windowed)
	return ok
}

// windowDone gives back the window place of a PDU that is answered at
// once or rejected.
func (c *conn) windowDone(windowed bool) {
	if windowed {
		c.busy--
	}
}

// keepalive pings a silent initiator with a NOP-In and drops it when the
// answer does not come (RFC 7143 section 11.19: a NOP-In with a valid TTT
// asks for a NOP-Out).
func (c *conn) keepalive() error {
	cfg := &c.srv.cfg
	if !c.ffp || cfg.NopInterval < 0 {
		return nil
	}
	now := time.Now()
	if !c.pingSent.IsZero() {
		if now.Sub(c.pingSent) > cfg.NopTimeout {
			return c.drop(fmt.Errorf("target: no answer to NOP-In for %v", cfg.NopTimeout))
		}
		return nil
	}
	if now.Sub(c.lastRx) < cfg.NopInterval {
		return nil
	}
	c.pingTTT++
	if c.pingTTT == reservedTag {
		c.pingTTT = 1
	}
	c.pingSent = now
	return c.pdu(iscsi.OpNOPIn, false, func(b iscsi.BHS, _ []byte) (int, error) {
		in, _ := iscsi.AsNOPIn(b)
		in.SetITT(reservedTag)
		in.SetTTT(c.pingTTT)
		return 0, nil
	})
}

// taskMgmt runs a task management function (RFC 7143 sections 11.5, 11.6).
// Commands execute as soon as their data is in, so what can be aborted is
// a command still waiting for staging or its write data, or for room to
// send its response: it is dropped without a response.
func (c *conn) taskMgmt(bhs iscsi.BHS) error {
	r, _ := iscsi.AsTaskMgmtReq(bhs)
	if !c.admit(bhs) {
		return nil // outside the window: silently ignored (acceptCmdSN)
	}
	resp := iscsi.TMFComplete
	fn := r.Function()
	switch fn {
	case iscsi.TMFAbortTask:
		resp = iscsi.TMFNoTask
		for i := range c.tasks {
			t := &c.tasks[i]
			if t.state != stFree && t.state != stSent && t.itt == r.ReferencedTaskTag() {
				c.abort(int32(i))
				resp = iscsi.TMFComplete
			}
		}
	case iscsi.TMFAbortTaskSet, iscsi.TMFClearTaskSet, iscsi.TMFLUNReset:
		n, err := bhs.LUN().Number()
		if err != nil || c.tgt == nil || c.tgt.LU(n) == nil {
			resp = iscsi.TMFNoLUN
			break
		}
		for i := range c.tasks {
			if t := &c.tasks[i]; t.state != stFree && t.state != stSent && t.lun == bhs.LUN() {
				c.abort(int32(i))
			}
		}
		if fn == iscsi.TMFLUNReset {
			c.tgt.LogicalUnitReset(n) // and its reservation (SPC-2 5.5.1)
		}
	case iscsi.TMFTargetWarmReset:
		for i := range c.tasks {
			if t := &c.tasks[i]; t.state != stFree && t.state != stSent {
				c.abort(int32(i))
			}
		}
		if c.tgt != nil {
			c.tgt.Reset()
		}
	default:
		resp = iscsi.TMFNotSupported
	}
	c.log.Infof("target: task management function %d (ITT %#x): response %d", fn, r.ReferencedTaskTag(), resp)
	return c.pdu(iscsi.OpTaskMgmtResp, true, func(b iscsi.BHS, _ []byte) (int, error) {
		m, _ := iscsi.AsTaskMgmtResp(b)
		m.SetITT(bhs.ITT())
		m.SetResponse(resp)
		return 0, nil
	})
}

// abort drops task ti: at once unless RDMA Reads of its data are still
// outstanding, then when they complete.
func (c *conn) abort(ti int32) {
	t := &c.tasks[ti]
	t.aborted = true
	if t.reads > 0 {
		// Over TCP the initiator need not send the data of an aborted
		// task (RFC 7143 section 11.5.1): waiting for it would hold the
		// task and its staging for the life of the session, and the
		// commands behind it that need staging would never run.
		if n := c.tr.cancel(ti); n > 0 {
			t.reads -= n
			t.failed = true
		}
	}
	if t.windowed {
		t.windowed = false
		c.busy--
	}
	if t.reads == 0 && !t.queued && t.state != stRunning {
		c.release(ti)
	}
}

// text answers a Text Request: SendTargets (RFC 7143 appendix C) is the
// only key a target must answer in full feature phase.
func (c *conn) text(bhs iscsi.BHS, data []byte) error {
	r, _ := iscsi.AsTextReq(bhs)
	if !c.admit(bhs) {
		return nil // outside the window: silently ignored (acceptCmdSN)
	}
	if r.Continue() {
		return c.reject(bhs, iscsi.RejectCommandNotSupported)
	}
	var out []byte
	it := iscsi.ParseText(data)
	for it.Next() {
		k, v := string(it.Key()), string(it.Value())
		if k != "SendTargets" {
			var err error
			if out, err = iscsi.AppendText(out, k, "NotUnderstood"); err != nil {
				return c.reject(bhs, iscsi.RejectInvalidPDUField)
			}
			continue
		}
		if c.tgt != nil && v == "All" {
			v = "" // a normal session learns only its own target
		}
		if v == "" && c.tgt != nil {
			v = c.tgt.Name()
		}
		var err error
		if out, err = login.AppendSendTargets(out, v, c.srv.targetInfo()); err != nil {
			return c.reject(bhs, iscsi.RejectInvalidPDUField)
		}
	}
	if it.Err() != nil {
		return c.reject(bhs, iscsi.RejectProtocolError)
	}
	if len(out) > loginData {
		return c.reject(bhs, iscsi.RejectOutOfResources)
	}
	return c.pdu(iscsi.OpTextResp, true, func(b iscsi.BHS, dst []byte) (int, error) {
		t, _ := iscsi.AsTextResp(b)
		t.SetITT(bhs.ITT())
		t.SetTTT(reservedTag)
		return copy(dst, out), nil
	})
}

// targetInfo lists the exports for SendTargets.
func (s *Server) targetInfo() []login.TargetInfo {
	list := s.ex.Load().list
	ts := make([]login.TargetInfo, 0, len(list))
	for _, e := range list {
		ts = append(ts, login.TargetInfo{Name: e.Target.Name(), Portals: s.cfg.Portals})
	}
	return ts
}

// logout answers a Logout Request and closes the connection once the
// answer is out (RFC 7143 sections 11.14, 11.15).
func (c *conn) logout(bhs iscsi.BHS) error {
	r, _ := iscsi.AsLogoutReq(bhs)
	if !c.admit(bhs) {
		return nil // outside the window: silently ignored (acceptCmdSN)
	}
	resp := iscsi.LogoutOK
	if r.ReasonCode() == iscsi.LogoutRemoveForRecovery {
		resp = iscsi.LogoutNoRecovery
	}
	if resp == iscsi.LogoutOK {
		c.closing = true
		// The session ends with this connection: its I_T nexus is gone
		// once the initiator has the answer, so its reservations go
		// before the answer does (SAM-5, SPC-2 5.5.1). Released only
		// when the loop ends (ended), they outlived the answer, and an
		// initiator that reserved from its other session the moment this
		// one logged out (libiscsi's Reserve6.Logout) met RESERVATION
		// CONFLICT.
		c.nexusLoss()
	}
	return c.pdu(iscsi.OpLogoutResp, true, func(b iscsi.BHS, _ []byte) (int, error) {
		l, _ := iscsi.AsLogoutResp(b)
		l.SetITT(bhs.ITT())
		l.SetResponse(resp)
		return 0, nil
	})
}
