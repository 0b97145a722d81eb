package initiator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/login"
)

// received handles a PDU from the target, its BHS and data segment, as
// the transport delivers it.
func (s *Session) received(b iscsi.BHS, data []byte) error {
	s.lastRx = time.Now()
	if b.Opcode() == iscsi.OpLoginResp {
		if s.ffp.Load() {
			return errors.New("initiator: Login Response in full feature phase")
		}
		select {
		case s.loginCh <- append(append([]byte(nil), b[:iscsi.BHSLen]...), data...):
			return nil
		default:
			return errors.New("initiator: unexpected Login Response")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.window(b)
	itt := b.ITT()
	switch b.Opcode() {
	case iscsi.OpNOPIn:
		if itt == iscsi.ReservedITT {
			in, _ := iscsi.AsNOPIn(b)
			return s.pong(in.TTT())
		}
	case iscsi.OpReject:
		if len(data) < iscsi.BHSLen {
			return errors.New("initiator: Reject without the rejected header")
		}
		itt = iscsi.BHS(data[:iscsi.BHSLen]).ITT()
	case iscsi.OpLogoutResp:
		// The target closes the connection next: that is the end of the
		// session, not a loss to recover from.
		if l, err := iscsi.AsLogoutResp(b); err == nil && l.Response() == iscsi.LogoutOK {
			s.loggedOut = true
		}
	case iscsi.OpSCSIResponse, iscsi.OpTaskMgmtResp, iscsi.OpTextResp:
	case iscsi.OpAsyncMsg:
		s.log.Infof("initiator: asynchronous message from the target (event %d)", b[36])
		return nil
	default:
		return fmt.Errorf("initiator: unexpected %v from the target", b.Opcode())
	}
	ti := int(itt & 0xffff)
	if ti >= len(s.tasks) || !s.tasks[ti].busy || s.tasks[ti].replied || uint32(s.tasks[ti].gen) != itt>>16 {
		s.log.Warnf("initiator: %v for ITT %#x, which is not outstanding", b.Opcode(), itt)
		return nil
	}
	t := &s.tasks[ti]
	if t.cmd != nil {
		s.tr.release(ti) // the command has its answer: its buffer is closed
	}
	copy(t.resp[:], b)
	t.via = s.cur.Load()
	switch b.Opcode() {
	case iscsi.OpSCSIResponse:
		copy(t.sense[:], data)
	default:
		t.data = append([]byte(nil), data...)
	}
	t.replied = true
	t.done <- struct{}{}
	return nil
}

// window takes ExpCmdSN, MaxCmdSN and StatSN from a target PDU (RFC 7143
// section 4.2.2.1: a MaxCmdSN below ExpCmdSN-1 is ignored).
func (s *Session) window(b iscsi.BHS) {
	switch b.Opcode() {
	case iscsi.OpSCSIResponse, iscsi.OpTaskMgmtResp, iscsi.OpTextResp, iscsi.OpLogoutResp, iscsi.OpReject, iscsi.OpNOPIn, iscsi.OpAsyncMsg:
	default:
		return
	}
	sn := iscsi.TargetSNs{BHS: b}
	statSN, exp, maxSN := sn.StatSN(), sn.ExpCmdSN(), sn.MaxCmdSN()
	if int32(maxSN-exp) >= -1 && int32(maxSN-s.maxCmdSN) > 0 {
		s.maxCmdSN = maxSN
		s.cond.Broadcast()
	}
	if b.Opcode() != iscsi.OpNOPIn || b.ITT() != iscsi.ReservedITT {
		if int32(statSN+1-s.expStat) > 0 {
			s.expStat = statSN + 1
		}
	}
}

// pong answers the target's NOP-In ping (called with s.mu held).
func (s *Session) pong(ttt uint32) error {
	if ttt == iscsi.ReservedITT {
		return nil // no answer wanted
	}
	if len(s.free) == 0 {
		s.log.Warn("initiator: no request record free to answer a NOP-In")
		return nil
	}
	ti := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	t := &s.tasks[ti]
	t.gen++
	t.busy, t.sent, t.replied, t.released = true, false, true, true
	buf := s.tr.sendBuf(int(ti))
	n, _ := iscsi.NewNOPOut(buf)
	n.SetFinal(true)
	n.SetImmediate(true)
	n.SetITT(iscsi.ReservedITT)
	n.SetTTT(ttt)
	n.SetLUN(0)
	n.SetCmdSN(s.cmdSN)
	n.SetExpStatSN(s.expStat)
	return s.tr.postPDU(int(ti), iscsi.BHSLen)
}

// sent is called by the transport when slot's send buffer is free again.
func (s *Session) sent(slot int) {
	s.mu.Lock()
	t := &s.tasks[slot]
	t.sent = true
	if t.busy && t.released {
		s.putLocked(int32(slot))
	}
	s.mu.Unlock()
}

// idle is called by the transport's loop when woken or on its ticker: the
// NOP-Out keepalive.
func (s *Session) idle() error {
	if s.cfg.NopInterval < 0 || !s.ffp.Load() {
		return nil
	}
	now := time.Now()
	if !s.pingOut.IsZero() {
		if now.Sub(s.pingOut) > s.cfg.NopTimeout {
			return fmt.Errorf("initiator: target silent for %v after a NOP-Out", s.cfg.NopTimeout)
		}
		if s.lastRx.After(s.pingOut) {
			s.pingOut = time.Time{}
		}
		return nil
	}
	if now.Sub(s.lastRx) < s.cfg.NopInterval {
		return nil
	}
	s.pingOut = now
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.NopTimeout)
		defer cancel()
		s.Nop(ctx, nil)
	}()
	return nil
}

// request sends a non-SCSI request that fill builds (BHS at b, data after,
// returning the data length) and waits for its answer: the answer's BHS
// and data segment.
func (s *Session) request(ctx context.Context, op iscsi.Opcode, immediate bool, fill func(b iscsi.BHS, data []byte) (int, error)) (iscsi.BHS, []byte, error) {
	ti, err := s.take(ctx, !immediate, nil, 0, 0)
	if err != nil {
		return nil, nil, err
	}
	buf := s.tr.sendBuf(int(ti))
	b, _ := iscsi.Init(buf[:iscsi.BHSLen], op)
	b.SetFinal(true)
	b.SetITT(s.itt(ti))
	n, err := fill(b, buf[iscsi.BHSLen:])
	if err == nil {
		err = b.SetDataSegmentLength(uint32(n))
	}
	if err != nil {
		s.mu.Lock()
		s.tasks[ti].sent = true
		s.freeLocked(ti)
		s.mu.Unlock()
		return nil, nil, err
	}
	end := iscsi.BHSLen + n
	for end%4 != 0 {
		buf[end] = 0
		end++
	}
	if err := s.post(ti, b, end, immediate); err != nil {
		return nil, nil, err
	}
	t := &s.tasks[ti]
	select {
	case <-t.done:
	case <-ctx.Done():
		// The answer may still come; the record is freed then.
		s.mu.Lock()
		s.freeLocked(ti)
		s.mu.Unlock()
		return nil, nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.freeLocked(ti)
	if t.resp[0] == 0 {
		return nil, nil, s.errOr(ErrSessionClosed)
	}
	resp := append(iscsi.BHS(nil), t.resp[:]...)
	if resp.Opcode() == iscsi.OpReject {
		r, _ := iscsi.AsReject(resp)
		return nil, nil, &RejectError{Reason: r.Reason()}
	}
	return resp, t.data, nil
}

// Nop pings the target with a NOP-Out carrying data and checks that the
// NOP-In echoes it (RFC 7143 sections 11.18, 11.19).
func (s *Session) Nop(ctx context.Context, data []byte) error {
	if s.mp != nil {
		return s.mp.onePath(func(p *Session) error { return p.Nop(ctx, data) })
	}
	resp, echo, err := s.request(ctx, iscsi.OpNOPOut, true, func(b iscsi.BHS, d []byte) (int, error) {
		n, _ := iscsi.AsNOPOut(b)
		n.SetTTT(iscsi.ReservedITT)
		if len(data) > len(d) {
			return 0, fmt.Errorf("initiator: ping data of %d octets", len(data))
		}
		return copy(d, data), nil
	})
	if err != nil {
		return err
	}
	if resp.Opcode() != iscsi.OpNOPIn || string(echo) != string(data) {
		return fmt.Errorf("initiator: NOP-Out answered by %v with %d octets of %d", resp.Opcode(), len(echo), len(data))
	}
	return nil
}

// TaskMgmt runs a task management function and returns the target's
// response code (RFC 7143 section 11.6.1).
func (s *Session) TaskMgmt(ctx context.Context, fn uint8, lun uint16, refITT uint32) (uint8, error) {
	if s.mp != nil {
		// Task management reaches the I_T nexus of one path: a round-
		// robin session's commands have none of their own to name.
		var resp uint8
		err := s.mp.onePath(func(p *Session) (err error) { resp, err = p.TaskMgmt(ctx, fn, lun, refITT); return err })
		return resp, err
	}
	l, err := iscsi.MakeLUN(lun)
	if err != nil {
		return 0, err
	}
	resp, _, err := s.request(ctx, iscsi.OpTaskMgmtReq, true, func(b iscsi.BHS, _ []byte) (int, error) {
		r, _ := iscsi.AsTaskMgmtReq(b)
		if err := r.SetFunction(fn); err != nil {
			return 0, err
		}
		b.SetLUN(l)
		r.SetReferencedTaskTag(refITT)
		if fn != iscsi.TMFAbortTask {
			r.SetReferencedTaskTag(iscsi.ReservedITT)
		}
		return 0, nil
	})
	if err != nil {
		return 0, err
	}
	r, err := iscsi.AsTaskMgmtResp(resp)
	if err != nil {
		return 0, fmt.Errorf("initiator: task management answered by %v", resp.Opcode())
	}
	return r.Response(), nil
}

// SendTargets asks the target which targets and portals it offers
// (RFC 7143 appendix C); query is "All", a target name, or "".
func (s *Session) SendTargets(ctx context.Context, query string) ([]login.TargetInfo, error) {
	if s.mp != nil {
		var ts []login.TargetInfo
		err := s.mp.onePath(func(p *Session) (err error) { ts, err = p.SendTargets(ctx, query); return err })
		return ts, err
	}
	resp, data, err := s.request(ctx, iscsi.OpTextReq, false, func(b iscsi.BHS, d []byte) (int, error) {
		t, _ := iscsi.AsTextReq(b)
		t.SetTTT(iscsi.ReservedITT)
		out, err := iscsi.AppendText(d[:0], "SendTargets", query)
		return len(out), err
	})
	if err != nil {
		return nil, err
	}
	if resp.Opcode() != iscsi.OpTextResp {
		return nil, fmt.Errorf("initiator: SendTargets answered by %v", resp.Opcode())
	}
	return login.ParseSendTargets(data)
}

// Logout closes the session (RFC 7143 section 11.14); the target closes
// the connection after answering. While the session is reconnecting there
// is no connection to log out on: it returns ErrReconnecting at once.
func (s *Session) Logout(ctx context.Context) error {
	if s.mp != nil {
		return nil // each path logs out as Close closes it
	}
	s.mu.Lock()
	recovering := s.recovering
	s.mu.Unlock()
	if recovering {
		return ErrReconnecting
	}
	resp, _, err := s.request(ctx, iscsi.OpLogoutReq, false, func(b iscsi.BHS, _ []byte) (int, error) {
		l, _ := iscsi.AsLogoutReq(b)
		return 0, l.SetReasonCode(iscsi.LogoutCloseSession)
	})
	if err != nil {
		return err
	}
	l, err := iscsi.AsLogoutResp(resp)
	if err != nil {
		return fmt.Errorf("initiator: logout answered by %v", resp.Opcode())
	}
	if l.Response() != iscsi.LogoutOK {
		return fmt.Errorf("initiator: logout refused (response %d)", l.Response())
	}
	s.shutdown(ErrSessionClosed)
	return nil
}

// login runs the login phase on the connection tr (for iSER, RFC 7145
// section 6: iSER-assisted login in Sends, no Hello).
func (s *Session) login(ctx context.Context, tr transport, ended <-chan struct{}) error {
	cfg := &s.cfg
	offer := login.Defaults()
	offer.InitialR2T = true
	offer.ImmediateData = !cfg.NoImmediateData
	offer.InitiatorRecvDataSegmentLength = loginData
	offer.MaxBurstLength = 1 << 20
	offer.FirstBurstLength = 64 << 10
	st := "Normal"
	if cfg.TargetName == "" {
		st = "Discovery"
	}
	isid := cfg.ISID
	if isid == 0 {
		isid = 0x80<<40 | uint64(time.Now().UnixNano())&(1<<40-1) // random format (RFC 7143 11.12.5)
	}
	ic := &login.InitiatorConfig{
		InitiatorName: cfg.InitiatorName, TargetName: cfg.TargetName, SessionType: st,
		CHAP: cfg.CHAP, Offer: offer, ISID: isid,
	}
	tr.loginConfig(ic)
	li := login.NewInitiator(ic)
	// The last task record is the login's own: during a reconnection
	// every other one may be waiting to be reissued.
	slot := int32(len(s.tasks) - 1)
	out := li.Start(nil)
	select {
	case <-s.loginCh: // a stray answer from an earlier connection
	default:
	}
	var err error
	answered := false // a Login Response came
	for {
		buf := tr.sendBuf(int(slot))
		if len(out) > len(buf) {
			return fmt.Errorf("initiator: Login Request of %d octets", len(out))
		}
		copy(buf, out)
		if err := tr.postPDU(int(slot), len(out)); err != nil {
			return err
		}
		var resp []byte
		select {
		case resp = <-s.loginCh:
		case <-ended: // the loop polled everything the connection brought
			select {
			case resp = <-s.loginCh: // the last answer came with the close
			default:
				s.mu.Lock()
				err := s.errOr(tr.err())
				s.mu.Unlock()
				if !answered && s.network == NetworkISCSITCP {
					// An iSER target takes the Login Request for an MPA
					// Request and closes the connection.
					return fmt.Errorf("initiator: the target closed the connection before any Login Response (is %s an iSER portal? that is transport tcp): %w", s.Portal(), err)
				}
				return fmt.Errorf("initiator: connection lost during login: %w", err)
			}
		case <-ctx.Done():
			return fmt.Errorf("initiator: login: %w", ctx.Err())
		}
		answered = true
		var done bool
		out, done, err = li.Step(nil, resp)
		if err != nil {
			return err
		}
		if done {
			break
		}
	}
	s.mu.Lock()
	s.res = li.Result()
	s.params = s.res.Params
	s.tasks[slot].sent = true
	s.cmdSN = s.res.CmdSN
	s.expStat = s.res.StatSN
	s.maxCmdSN = s.res.CmdSN // updated by the first answer; Login Response's MaxCmdSN below
	if m := s.res.MaxCmdSN; int32(m-s.cmdSN) >= -1 {
		s.maxCmdSN = m
	}
	s.maxImm = tr.negotiated(s.params)
	s.mu.Unlock()
	s.ffp.Store(true)
	return nil
}
