package initiator

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/scsi"
)

// Direction is a command's data direction.
type Direction uint8

// The data directions.
const (
	NoData  Direction = iota
	DataIn            // the target sends data (READ)
	DataOut           // the initiator sends data (WRITE)
)

// Command is one SCSI command and, after Do, its outcome.
type Command struct {
	LUN uint16
	CDB []byte
	Dir Direction
	// Data is the data buffer: a slice of a buffer from Session.Alloc,
	// len(Data) is the expected data transfer length.
	Data []byte

	// Status is the SAM status; Sense the sense data of a CHECK
	// CONDITION (valid until the Command is used again).
	Status uint8
	Sense  []byte
	// Residual is the residual count; Underflow and Overflow say which.
	Residual            uint32
	Underflow, Overflow bool

	sense [128]byte
}

// StatusError is a SCSI command that completed with a status other than
// GOOD.
type StatusError struct {
	Status uint8
	Sense  []byte
}

func (e *StatusError) Error() string {
	if len(e.Sense) >= 14 {
		return fmt.Sprintf("initiator: SCSI status %#02x, sense key %#x ASC/ASCQ %#02x/%#02x", e.Status, e.Sense[2]&0xf, e.Sense[12], e.Sense[13])
	}
	return fmt.Sprintf("initiator: SCSI status %#02x", e.Status)
}

// resetRetries bounds how often Do reissues a command answered with a
// reset unit attention: one per LU is the rule, a few more cover resets
// that happen meanwhile.
const resetRetries = 3

// ResetUnitAttention says whether a command's outcome is CHECK CONDITION
// with sense key UNIT ATTENTION and ASC 29h (POWER ON, RESET, OR BUS
// DEVICE RESET OCCURRED, any ASCQ; SPC-4 4.5.6, 6.1): the target did not
// run the command and reports only that the LU was reset, so the command
// may simply be sent again. Fixed (70h/71h) and descriptor (72h/73h)
// sense data are both read.
func ResetUnitAttention(status uint8, sense []byte) bool {
	if status != scsi.StatusCheckCondition || len(sense) < 3 {
		return false
	}
	const asc = scsi.ASCPowerOnReset >> 8
	switch sense[0] & 0x7f {
	case scsi.SenseFixedCurrent, scsi.SenseFixedDeferred:
		return len(sense) >= 13 && sense[2]&0xf == scsi.SenseUnitAttention && sense[12] == asc
	case scsi.SenseDescriptorCurrent, scsi.SenseDescriptorDeferred:
		return sense[1]&0xf == scsi.SenseUnitAttention && sense[2] == asc
	}
	return false
}

// PortUnavailable reports whether a command's status and sense say that
// the target port it went through cannot run it in its ALUA state: NOT
// READY, LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN STANDBY STATE or IN
// UNAVAILABLE STATE (SPC-4 5.15.2.4.4, 5.15.2.4.5). Another gateway's port
// may.
func PortUnavailable(status uint8, sense []byte) bool {
	if status != scsi.StatusCheckCondition || len(sense) < 3 {
		return false
	}
	var key, asc, ascq byte
	switch sense[0] & 0x7f {
	case scsi.SenseFixedCurrent, scsi.SenseFixedDeferred:
		if len(sense) < 14 {
			return false
		}
		key, asc, ascq = sense[2]&0xf, sense[12], sense[13]
	case scsi.SenseDescriptorCurrent, scsi.SenseDescriptorDeferred:
		if len(sense) < 4 {
			return false
		}
		key, asc, ascq = sense[1]&0xf, sense[2], sense[3]
	default:
		return false
	}
	return key == scsi.SenseNotReady && asc == 0x04 && (ascq == 0x0b || ascq == 0x0c)
}

// leavePortal moves the session off portal number from, whose target port
// answered that it cannot serve commands (PortUnavailable), to the next
// portal: the connection is dropped, and recovery logs in at the next
// portal and reissues what was outstanding. It reports false when the
// session cannot move (one portal, no recovery); when it has already moved
// off from, it reports true and does nothing.
func (s *Session) leavePortal(from int32) bool {
	if len(s.portals) < 2 || s.cfg.RecoveryTimeout <= 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur.Load() != from || s.err != nil {
		return s.err == nil
	}
	next := (from + 1) % int32(len(s.portals))
	s.log.Warnf("initiator: %s's target port is in standby or unavailable (ALUA); moving to %s", s.portals[from], s.portals[next])
	s.cur.Store(next)
	s.tr.abort()
	return true
}

// RejectError is a request the target answered with a Reject PDU.
type RejectError struct{ Reason uint8 }

func (e *RejectError) Error() string {
	return fmt.Sprintf("initiator: target rejected the PDU (reason %#02x)", e.Reason)
}

// Do runs cmd and waits for its outcome. It returns nil when the command
// completed (whatever its SCSI status: check cmd.Status), a *RejectError,
// or the error that ended the session. If ctx ends first, the command is
// aborted (ABORT TASK) before Do returns, so its buffer is free to reuse.
//
// A command answered with a reset unit attention (ResetUnitAttention) was
// not run by the target, which reports it once per logical unit: Do sends
// it again, up to resetRetries times, as the SCSI layer of other
// initiators does. Targets such as Linux's tgt report one to the first
// command on each LU of every new session.
func (s *Session) Do(ctx context.Context, cmd *Command) error {
	if cmd.Dir == NoData && len(cmd.Data) > 0 {
		return errors.New("initiator: data buffer on a command without data")
	}
	var off int
	if len(cmd.Data) > 0 {
		var ok bool
		if off, ok = s.offset(cmd.Data); !ok {
			return errors.New("initiator: data buffer not from Session.Alloc")
		}
	}
	if len(cmd.CDB) == 0 || len(cmd.CDB) > 16 {
		return fmt.Errorf("initiator: CDB of %d octets", len(cmd.CDB))
	}
	lun, err := iscsi.MakeLUN(cmd.LUN)
	if err != nil {
		return err
	}
	if s.mp != nil {
		return s.mp.do(ctx, s, cmd)
	}
	var start time.Time
	if s.cfg.Observer != nil {
		start = time.Now()
	}
	hops := 0
	for try := 0; ; try++ {
		ti, terr := s.take(ctx, true, cmd, off, lun)
		if terr != nil {
			return terr
		}
		if err := s.postCommand(ti); err != nil {
			return err
		}
		var via int32
		if via, err = s.waitVia(ctx, ti); err != nil {
			break
		}
		if hops < len(s.portals)-1 && PortUnavailable(cmd.Status, cmd.Sense) && s.leavePortal(via) {
			// SPC-4 5.15.2.4.4/5: this gateway's port cannot run it
			// (standby, unavailable): try the command through the next.
			hops++
			try--
			continue
		}
		if try >= resetRetries || !ResetUnitAttention(cmd.Status, cmd.Sense) {
			break
		}
		s.log.Debugf("LUN %d: unit attention %x (a reset), opcode %#02x reissued", cmd.LUN, cmd.Sense, cmd.CDB[0])
	}
	if err == nil && s.cfg.Observer != nil {
		info := CommandInfo{LUN: cmd.LUN, Opcode: cmd.CDB[0], Status: cmd.Status, Latency: time.Since(start)}
		switch cmd.Dir {
		case DataIn:
			info.DataIn = uint32(len(cmd.Data))
		case DataOut:
			info.DataOut = uint32(len(cmd.Data))
		}
		s.cfg.Observer.Command(info)
	}
	return err
}

// buildCommand writes task ti's SCSI Command PDU into its send slot, with
// the transport's description of its buffer, and returns its length.
// s.mu held.
func (s *Session) buildCommand(ti int32) (int, error) {
	t := &s.tasks[ti]
	cmd := t.cmd
	buf := s.tr.sendBuf(int(ti))
	edtl := uint32(len(cmd.Data))
	imm := 0
	if cmd.Dir == DataOut {
		imm = min(len(cmd.Data), s.maxImm)
	}
	if err := s.tr.command(int(ti), cmd.Dir, t.off, edtl, imm); err != nil {
		return 0, err
	}
	c, _ := iscsi.NewSCSICommand(buf)
	c.SetFinal(true)
	c.SetRead(cmd.Dir == DataIn)
	c.SetWrite(cmd.Dir == DataOut)
	c.SetAttr(1) // SIMPLE
	c.SetLUN(t.lun)
	c.SetITT(s.itt(ti))
	c.SetExpectedDataTransferLength(edtl)
	c.SetCDB(cmd.CDB)
	n := iscsi.BHSLen
	if imm > 0 {
		copy(buf[n:], cmd.Data[:imm])
		c.SetDataSegmentLength(uint32(imm))
		n += imm
		for n%4 != 0 {
			buf[n] = 0
			n++
		}
	}
	return n, nil
}

// postCommand builds and sends task ti's SCSI command; while the session
// is reconnecting it only marks it, and the reconnection sends it.
func (s *Session) postCommand(ti int32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unreserveLocked(ti) // it gets its CmdSN now, or never
	t := &s.tasks[ti]
	if s.err != nil {
		t.sent = true
		s.freeLocked(ti)
		return s.err
	}
	if s.recovering {
		if s.cfg.failFast != nil && s.cfg.failFast() {
			// A path of a round-robin session: another path takes it.
			t.err, t.sent, t.replied = errPathLost, true, true
			select {
			case t.done <- struct{}{}:
			default:
			}
			return nil
		}
		t.reissue = true
		return nil
	}
	return s.sendCommandLocked(ti)
}

// sendCommandLocked builds task ti's command with the next CmdSN and posts
// it. When the connection has failed under it and the session recovers,
// the command is left to be reissued instead of failing. s.mu held.
func (s *Session) sendCommandLocked(ti int32) error {
	t := &s.tasks[ti]
	n, err := s.buildCommand(ti)
	if err != nil {
		// Not sent: the command ends with err (finish returns it).
		t.err, t.sent, t.replied = err, true, true
		select {
		case t.done <- struct{}{}:
		default:
		}
		return nil
	}
	t.cmdSN = s.cmdSN
	b := iscsi.BHS(s.tr.sendBuf(int(ti))[:iscsi.BHSLen])
	b.SetImmediate(false)
	sn := iscsi.InitiatorSNs{BHS: b}
	sn.SetCmdSN(s.cmdSN)
	sn.SetExpStatSN(s.expStat)
	s.cmdSN++
	if !s.aloneLocked(ti) {
		s.alone = 0
	} else if s.alone++; s.alone >= 2 {
		// Its caller waits for this answer alone (queue depth 1); one
		// command alone now and then at a higher depth is not that: its
		// caller may well have work, and the spin would take the CPU
		// from it. Said before the command goes: a quick answer could
		// otherwise come before it is awaited, and the receiver spin for
		// the next.
		s.tr.awaitAnswer()
	}
	if err := s.tr.postPDU(int(ti), n); err != nil {
		if s.cfg.RecoveryTimeout > 0 {
			t.reissue = true
			return nil
		}
		t.sent = true
		s.freeLocked(ti)
		return err
	}
	return nil
}

// aloneLocked reports whether task ti's command is the only one whose
// answer is outstanding. Records whose answer is in but whose send has
// not completed yet do not count. s.mu held.
func (s *Session) aloneLocked(ti int32) bool {
	// The last record is the login's (Dial); a few taken records may
	// still wait for their sends' completions.
	if len(s.tasks)-1-len(s.free) > 4 {
		return false
	}
	for i := range s.tasks {
		if t := &s.tasks[i]; int32(i) != ti && t.busy && !t.replied {
			return false
		}
	}
	return true
}

// itt is task ti's Initiator Task Tag: its index and a generation, so a
// late answer to an earlier use of the record is recognised.
func (s *Session) itt(ti int32) uint32 { return uint32(s.tasks[ti].gen)<<16 | uint32(ti) }

// take reserves a task record for cmd (nil for a request that is not a
// SCSI command), whose data buffer is at off in the region; windowed ones
// wait until the target's MaxCmdSN lets one more command in. The record's
// command is set under the lock: a connection loss between take and the
// post must see what the record is for (startRecovery).
func (s *Session) take(ctx context.Context, windowed bool, cmd *Command, off int, lun iscsi.LUN) (int32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var stop func() bool
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	for {
		if s.err != nil {
			return 0, s.err
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		// Windowed requests leave `extra` records for the others.
		room := len(s.free) > 0
		if windowed {
			// Requests taken but not yet sent hold CmdSNs too: without
			// counting them, many callers at once would all see room.
			room = len(s.free) > extra && int32(s.maxCmdSN-s.cmdSN-s.reserved) >= 0 && !s.recovering
		}
		if room {
			ti := s.free[len(s.free)-1]
			s.free = s.free[:len(s.free)-1]
			t := &s.tasks[ti]
			t.gen++
			t.busy, t.sent, t.replied, t.released, t.data, t.err = true, false, false, false, nil, nil
			t.cmd, t.off, t.lun, t.losses = cmd, off, lun, 0
			if windowed {
				t.reserved = true
				s.reserved++
			}
			select {
			case <-t.done:
			default:
			}
			return ti, nil
		}
		if stop == nil && ctx.Done() != nil {
			stop = context.AfterFunc(ctx, func() { s.mu.Lock(); s.cond.Broadcast(); s.mu.Unlock() })
		}
		s.cond.Wait()
	}
}

// post sets CmdSN and ExpStatSN in the request's BHS and sends it. The
// CmdSN is taken and the Send posted under one lock so that requests go
// out in CmdSN order.
func (s *Session) post(ti int32, b iscsi.BHS, n int, immediate bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unreserveLocked(ti)
	if s.err != nil {
		s.tasks[ti].sent = true
		s.freeLocked(ti)
		return s.err
	}
	if s.recovering {
		s.tasks[ti].sent = true
		s.freeLocked(ti)
		return ErrReconnecting
	}
	return s.postLocked(ti, b, n, immediate)
}

// postLocked stamps CmdSN and ExpStatSN and posts the Send; s.mu held.
func (s *Session) postLocked(ti int32, b iscsi.BHS, n int, immediate bool) error {
	b.SetImmediate(immediate)
	sn := iscsi.InitiatorSNs{BHS: b}
	sn.SetCmdSN(s.cmdSN)
	sn.SetExpStatSN(s.expStat)
	if !immediate {
		s.cmdSN++
	}
	if err := s.tr.postPDU(int(ti), n); err != nil {
		s.tasks[ti].sent = true
		s.freeLocked(ti)
		return err
	}
	return nil
}

// wait waits for task ti's answer; on ctx's end it aborts the task first.
func (s *Session) wait(ctx context.Context, ti int32) error {
	_, err := s.waitVia(ctx, ti)
	return err
}

// waitVia is wait that also returns the number of the portal whose
// connection brought the answer.
func (s *Session) waitVia(ctx context.Context, ti int32) (int32, error) {
	t := &s.tasks[ti]
	select {
	case <-t.done:
		via := t.via
		return via, s.finish(ti)
	case <-ctx.Done():
	}
	// Abort the task, then ping: the RDMA Reads the target asked for
	// before answering are served before the ping goes out (Read
	// Responses go ahead of Sends), so once the ping is answered the
	// target has all it will get of the buffer.
	actx, cancel := context.WithTimeout(context.Background(), s.abortTimeout())
	_, err := s.TaskMgmt(actx, iscsi.TMFAbortTask, t.cmd.LUN, s.itt(ti))
	if err == nil {
		err = s.Nop(actx, nil)
	}
	cancel()
	s.mu.Lock()
	// Neither a late answer nor a reconnection takes the command up again.
	t.replied, t.reissue = true, false
	tr, live := s.tr, s.err == nil && !s.recovering
	s.mu.Unlock()
	if err != nil && live {
		// No answer: only dropping the connection makes sure that the
		// target no longer reaches the buffer.
		s.log.Warnf("initiator: aborting ITT %#x: %v; dropping the connection", s.itt(ti), err)
		tr.abort()
	}
	select {
	case <-t.done:
	default:
	}
	s.settle(ti)
	s.mu.Lock()
	s.freeLocked(ti)
	s.mu.Unlock()
	return -1, ctx.Err()
}

// abortTimeout bounds the wait for an ABORT TASK's answer.
func (s *Session) abortTimeout() time.Duration {
	if s.cfg.NopTimeout > 0 {
		return s.cfg.NopTimeout
	}
	return 15 * time.Second
}

// settleTimeout bounds how long a finished command waits for the RNIC to
// stop moving its data: only a target that goes on writing into (or
// reading from) a command's buffer after answering it, and then stalls,
// makes the wait longer than a moment.
const settleTimeout = 2 * time.Second

// settle ends the target's access to task ti's buffer and waits until
// nothing is moving its data any more, so that the caller has the buffer
// to itself once Do returns. A target that still holds it after
// settleTimeout loses the connection; settle returns an error then.
func (s *Session) settle(ti int32) error {
	s.mu.Lock()
	tr := s.tr
	s.mu.Unlock()
	err := tr.settle(int(ti), settleTimeout)
	if err == nil {
		return nil
	}
	s.log.Warnf("initiator: %v; dropping the connection", err)
	tr.abort()
	if e := tr.settle(int(ti), settleTimeout); e != nil {
		s.log.Errorf("initiator: a command's buffer still in use after the connection was dropped: %v", e)
	}
	return fmt.Errorf("initiator: the target kept moving data of a command after its end: %w", err)
}

// finish copies task ti's SCSI Response into its Command and frees it.
func (s *Session) finish(ti int32) error {
	t := &s.tasks[ti]
	serr := s.settle(ti)
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.freeLocked(ti)
	if t.err != nil {
		return t.err
	}
	if s.err != nil && t.resp[0] == 0 && t.data == nil {
		return s.err
	}
	if serr != nil {
		return serr
	}
	b := iscsi.BHS(t.resp[:])
	switch b.Opcode() {
	case iscsi.OpReject:
		r, _ := iscsi.AsReject(b)
		return &RejectError{Reason: r.Reason()}
	case iscsi.OpSCSIResponse:
	default:
		return s.errOr(fmt.Errorf("initiator: unexpected %v for a SCSI command", b.Opcode()))
	}
	r, _ := iscsi.AsSCSIResponse(b)
	cmd := t.cmd
	if r.Response() != iscsi.ResponseCompleted {
		return fmt.Errorf("initiator: target failure (response %#02x)", r.Response())
	}
	// A residual that cannot be (RFC 7143 section 11.4.5) says nothing
	// true about the data: the command fails rather than complete with it.
	switch edtl := uint32(len(cmd.Data)); {
	case r.Underflow() && r.Overflow():
		return fmt.Errorf("initiator: SCSI Response with both underflow and overflow (residual %d)", r.ResidualCount())
	case r.Underflow() && r.ResidualCount() > edtl:
		return fmt.Errorf("initiator: SCSI Response with a residual underflow of %d octets for a command of %d", r.ResidualCount(), edtl)
	}
	cmd.Status = r.Status()
	cmd.Residual, cmd.Underflow, cmd.Overflow = r.ResidualCount(), r.Underflow(), r.Overflow()
	if !cmd.Underflow && !cmd.Overflow {
		cmd.Residual = 0 // the field is reserved then (section 11.4.5.2)
	}
	cmd.Sense = cmd.sense[:copy(cmd.sense[:], t.sense[:min(int(b.DataSegmentLength()), len(t.sense))])]
	if len(cmd.Sense) >= 2 {
		n := int(binary.BigEndian.Uint16(cmd.Sense))
		cmd.Sense = cmd.Sense[2:min(2+n, len(cmd.Sense))]
	}
	return nil
}

func (s *Session) errOr(err error) error {
	if s.err != nil {
		return s.err
	}
	return err
}

// freeLocked releases task ti for the caller; the record returns to the
// free list once its Send has completed too (the send buffer is the
// record's).
func (s *Session) freeLocked(ti int32) {
	s.unreserveLocked(ti)
	t := &s.tasks[ti]
	if !t.busy || t.released {
		return
	}
	t.released = true
	if t.sent {
		s.putLocked(ti)
	}
}

func (s *Session) putLocked(ti int32) {
	t := &s.tasks[ti]
	t.busy, t.released, t.cmd, t.data = false, false, nil, nil
	clear(t.resp[:])
	s.free = append(s.free, ti)
	s.cond.Broadcast()
}

// unreserveLocked gives back the window place task ti held since take,
// once it has its CmdSN or will never get one. s.mu held.
func (s *Session) unreserveLocked(ti int32) {
	if t := &s.tasks[ti]; t.reserved {
		t.reserved = false
		s.reserved--
	}
}
