package target

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/lu"
	"github.com/ddpstore/ddpstore/transport/scsi"
)

// Task states, in the order a command goes through them.
const (
	stFree    uint8 = iota
	stStaging       // needs a staging run (write data, or data-in not from the store)
	stFetch         // RDMA Reads of write data to post or outstanding
	stExec          // ready to execute
	stRunning       // executing on a goroutine of its own (a slow command)
	stRespond       // executed; needs a send buffer and send queue room
	stSent          // response posted; released when its Send completes
)

// task is one SCSI command in the target.
type task struct {
	state    uint8
	queued   bool // in conn.waiting
	aborted  bool
	failed   bool // an RDMA Read of its data failed
	windowed bool // counts against the CmdSN window
	read     bool
	write    bool
	itt      uint32
	lun      iscsi.LUN
	cdb      [16]byte
	cdbLen   uint8
	edtl     uint32
	stOff    int // staging run, when stLen > 0
	stLen    int
	nextRead uint32       // octets of write data fetched or being fetched
	unsol    uint32       // octets of write data that came with the command
	reads    int          // RDMA Reads outstanding
	place    lu.Placement // write data placed straight into the store, when Active
	arrived  time.Time    // when the command came (for the Observer)
	exec     lu.Task
	async    asyncArgs // while stRunning on a worker
}

// command handles a SCSI Command PDU (RFC 7143 section 11.3); the
// transport binds its description of the data buffers to the task.
func (c *conn) command(bhs iscsi.BHS, imm []byte) error {
	if c.tgt == nil {
		return c.reject(bhs, iscsi.RejectProtocolError) // discovery session
	}
	cmd, _ := iscsi.AsSCSICommand(bhs)
	windowed, ok := c.acceptCmdSN(bhs)
	if !ok {
		return nil // silently ignored (acceptCmdSN)
	}
	edtl := cmd.ExpectedDataTransferLength()
	bad := len(imm) > 0 && (!cmd.Write() || !c.immediate || uint32(len(imm)) > min(c.firstBurst, edtl) ||
		len(imm) > c.recvData)
	if bad || cmd.Read() && cmd.Write() {
		c.windowDone(windowed)
		return c.rejectWhy(bhs, iscsi.RejectProtocolError, fmt.Sprintf("%s: CDB %02xh, R %v, W %v, EDTL %d, %d octets of immediate data (ImmediateData %v)",
			"bidirectional, or immediate data it may not carry", cmd.CDB()[0], cmd.Read(), cmd.Write(), edtl, len(imm), c.immediate))
	}
	if len(c.free) == 0 {
		c.windowDone(windowed)
		return c.reject(bhs, iscsi.RejectOutOfResources)
	}
	ti := c.free[len(c.free)-1]
	if !c.tr.command(ti, cmd, len(imm)) {
		c.windowDone(windowed)
		return c.rejectWhy(bhs, iscsi.RejectProtocolError, fmt.Sprintf("no buffer for its data (iSER: a read with data needs a read STag, a write a write STag): CDB %02xh, R %v, W %v, EDTL %d",
			cmd.CDB()[0], cmd.Read(), cmd.Write(), edtl))
	}
	c.free = c.free[:len(c.free)-1]
	t := &c.tasks[ti]
	*t = task{state: stExec, windowed: windowed, read: cmd.Read(), write: cmd.Write(),
		itt: bhs.ITT(), lun: bhs.LUN(), edtl: edtl, exec: t.exec}
	t.exec.Nexus, t.exec.Port = c.nexus, c.port
	if c.obs != nil {
		t.arrived = time.Now()
	}
	cdb := cmd.CDB()
	t.cdbLen = uint8(copy(t.cdb[:], cdb))
	needIn := t.read && c.tgt.NeedsInBuffer(t.lun, cdb)
	if int(edtl) > c.staging.Size() && (t.write || needIn) {
		t.exec.Status, t.exec.Sense = scsi.StatusCheckCondition, invalidFieldSense[:]
		t.state = stRespond
		return c.advance(ti)
	}
	switch {
	case t.write && uint32(len(imm)) == edtl && edtl > 0 && !c.tgt.Waits(t.lun, cdb):
		// All data came with the command: execute from the receive
		// buffer before it is posted again. A command that may wait
		// (lu.Target.Waits) is staged below and runs on a worker like
		// any other: COMPARE AND WRITE, UNMAP and WRITE SAME wait for
		// the placed WRITEs in flight on their blocks, which this loop
		// must go on serving.
		c.execute(t, imm)
	case t.write && edtl > 0 && c.place(t, imm):
		t.nextRead, t.unsol = uint32(len(imm)), uint32(len(imm))
		t.state = stFetch
	case t.write && edtl > 0:
		off, ok := c.staging.Get(int(edtl))
		if !ok {
			if len(imm) > 0 {
				// The immediate data cannot wait in the receive buffer.
				t.exec.Status, t.exec.Sense = scsi.StatusTaskSetFull, nil
				t.state = stRespond
				return c.advance(ti)
			}
			t.state = stStaging
			return c.advance(ti)
		}
		t.stOff, t.stLen = off, int(edtl)
		copy(c.stagingBuf(t), imm)
		t.nextRead, t.unsol = uint32(len(imm)), uint32(len(imm))
		t.state = stFetch
	case needIn && edtl > 0:
		t.state = stStaging
	}
	return c.advance(ti)
}

// place starts placing task t's write data straight into its LU's store
// (lu.Placement) where the transport and the LU allow, with imm, the data
// that came with the command, stored at once. false: stage them.
func (c *conn) place(t *task, imm []byte) bool {
	if !c.tr.placesWrites() {
		return false
	}
	p, ok := c.tgt.Place(&t.exec, t.lun, t.cdb[:t.cdbLen], t.edtl)
	if !ok {
		return false
	}
	if err := p.CopyIn(imm); err != nil {
		p.End()
		c.log.Warnf("target: %v; staging the WRITE instead", err)
		return false
	}
	t.place = p
	return true
}

var invalidFieldSense = [18]byte{0: scsi.SenseFixedCurrent, 2: scsi.SenseIllegalRequest, 7: 10, 12: scsi.ASCInvalidFieldInCDB >> 8}

// acceptCmdSN checks a PDU's CmdSN against the window (RFC 7143 section
// 4.2.2.1): an immediate PDU carries ExpCmdSN and takes no place in it;
// any other must be the next one expected, and in the window. One
// connection delivers in order, so anything else is the initiator's
// error, and the section says what to do with it: "The target MUST
// silently ignore any non-immediate command outside of this range or
// non-immediate duplicates within the range." The caller then answers
// nothing (ok false); the initiator's command times out.
func (c *conn) acceptCmdSN(bhs iscsi.BHS) (windowed, ok bool) {
	cmdSN := iscsi.InitiatorSNs{BHS: bhs}.CmdSN()
	if bhs.Immediate() {
		return false, true
	}
	if cmdSN != c.expCmdSN || c.busy >= c.depth {
		c.log.Warnf("target: %v with CmdSN %d outside the window (ExpCmdSN %d, %d of %d in use)",
			bhs.Opcode(), cmdSN, c.expCmdSN, c.busy, c.depth)
		return false, false
	}
	c.expCmdSN++
	c.busy++
	return true, true
}

func (c *conn) maxCmdSN() uint32 { return c.expCmdSN - 1 + (c.depth - c.busy) }

func (c *conn) stagingBuf(t *task) []byte {
	return c.tr.staging()[t.stOff : t.stOff+t.stLen]
}

// wait queues task ti until resources free up.
func (c *conn) wait(ti int32) {
	if t := &c.tasks[ti]; !t.queued {
		t.queued = true
		c.waiting = append(c.waiting, ti)
	}
}

// advance moves task ti as far as resources allow.
func (c *conn) advance(ti int32) error {
	t := &c.tasks[ti]
	t.queued = false
	for {
		if t.aborted && t.reads == 0 && t.state != stRunning {
			c.release(ti)
			return nil
		}
		switch t.state {
		case stStaging:
			off, ok := c.staging.Get(int(t.edtl))
			if !ok {
				c.wait(ti)
				return nil
			}
			t.stOff, t.stLen = off, int(t.edtl)
			if t.write {
				t.state = stFetch
			} else {
				t.state = stExec
			}
		case stFetch:
			for t.nextRead < t.edtl {
				if !c.tr.room(1) {
					c.wait(ti)
					return nil
				}
				n := min(t.edtl-t.nextRead, c.maxBurst)
				dst := dataRef{off: int64(t.stOff) + int64(t.nextRead)}
				if t.place.Active() {
					dst = dataRef{lu: t.place.LU(), off: t.place.Offset() + int64(t.nextRead)}
				}
				if err := c.tr.fetch(ti, dst, t.nextRead, n); err != nil {
					return err
				}
				t.reads++
				t.nextRead += n
			}
			if t.reads > 0 {
				return nil // Completed advances it when the last Read is in
			}
			if t.failed {
				return errors.New("target: fetching write data failed")
			}
			t.state = stExec
		case stExec:
			if t.place.Active() {
				c.endPlace(ti)
				c.tgt.ExecutePlaced(&t.exec, &t.place)
				c.ioPlaced.Add(uint64(t.place.Len()))
				t.state = stRespond
				continue
			}
			var out []byte
			if t.write && t.stLen > 0 {
				out = c.stagingBuf(t)
			}
			if c.tgt.Waits(t.lun, t.cdb[:t.cdbLen]) {
				c.runAsync(ti, out)
				return nil
			}
			c.execute(t, out)
		case stRespond:
			return c.respond(ti)
		default:
			return nil
		}
	}
}

// execute runs the task's command; write data is out.
func (c *conn) execute(t *task, out []byte) {
	c.tgt.Execute(&t.exec, t.lun, t.cdb[:t.cdbLen], out, c.inBuf(t))
	t.state = stRespond
}

// inBuf is the task's data-in buffer: its staging, unless it writes.
func (c *conn) inBuf(t *task) []byte {
	if !t.write && t.stLen > 0 {
		return c.stagingBuf(t)
	}
	return nil
}

// runAsync executes task ti, whose write data is out, on a worker
// goroutine: a command that may wait long (lu.Target.Waits: SYNCHRONIZE
// CACHE, anything to a remote store) must not hold up the commands behind
// it. The task keeps its staging until Idle takes it up again.
func (c *conn) runAsync(ti int32, out []byte) {
	t := &c.tasks[ti]
	t.state = stRunning
	c.running++
	t.async = asyncArgs{tgt: c.tgt, out: out, in: c.inBuf(t)}
	p := &c.pool
	if p.work == nil {
		// One slot per task: a send never blocks the loop.
		p.work = make(chan int32, len(c.tasks))
	}
	if p.idle == 0 {
		c.workers.Add(1)
		go c.worker(p.work)
	} else {
		p.idle--
	}
	p.work <- ti
}

// workerPool are the goroutines that execute the commands that may wait:
// they stay for the connection's life, so a remote store's I/O starts no
// goroutine. The loop alone uses its fields.
type workerPool struct {
	work chan int32 // tasks to execute; closed by stopWorkers
	idle int        // workers with no task sent to them
}

// asyncArgs are what a worker executes a task with.
type asyncArgs struct {
	tgt     *lu.Target
	out, in []byte
}

// worker executes the tasks sent on work until it is closed.
func (c *conn) worker(work <-chan int32) {
	defer c.workers.Done()
	for ti := range work {
		t := &c.tasks[ti]
		a := t.async
		a.tgt.Execute(&t.exec, t.lun, t.cdb[:t.cdbLen], a.out, a.in)
		t.async = asyncArgs{}
		c.asyncMu.Lock()
		c.asyncDone = append(c.asyncDone, ti)
		c.asyncMu.Unlock()
		c.wakeUp()
	}
}

// stopWorkers ends the workers once the commands sent to them are done;
// the connection's loop has ended.
func (c *conn) stopWorkers() {
	if c.pool.work != nil {
		close(c.pool.work)
		c.pool.work = nil
	}
	c.workers.Wait()
}

// finishAsync moves the tasks whose goroutines are done on to respond.
func (c *conn) finishAsync() error {
	if c.running == 0 {
		return nil // the usual case: no lock on the loop's every turn
	}
	c.asyncMu.Lock()
	done := c.asyncDone
	c.asyncDone = c.asyncSpare[:0]
	c.asyncSpare = done
	c.asyncMu.Unlock()
	c.running -= len(done)
	c.pool.idle += len(done)
	for _, ti := range done {
		c.tasks[ti].state = stRespond
		if err := c.advance(ti); err != nil {
			return err
		}
	}
	return nil
}

// respond sends the task's data-in and its SCSI Response (RFC 7143 section
// 11.4) through the transport.
func (c *conn) respond(ti int32) error {
	t := &c.tasks[ti]
	data := t.exec.DataIn
	if t.exec.Status != scsi.StatusGood {
		data = nil
	}
	xfer := min(uint32(len(data)), t.edtl)
	if !t.read {
		xfer = 0
	}
	need := 1
	if xfer > 0 {
		need = 2
	}
	if !c.tr.room(need) || len(c.sendFree) == 0 {
		c.wait(ti)
		return nil
	}
	if xfer > 0 {
		src := dataRef{off: int64(t.stOff)}
		if t.exec.FromStore {
			src = dataRef{lu: t.exec.LU, off: t.exec.StoreOffset}
		}
		if err := c.tr.dataIn(ti, src, xfer); err != nil {
			return err
		}
	}
	if t.windowed {
		t.windowed = false
		c.busy--
	}
	slot := c.popSlot()
	buf := c.tr.sendBuf(slot)
	r, _ := iscsi.NewSCSIResponse(buf)
	r.SetITT(t.itt)
	r.SetResponse(iscsi.ResponseCompleted)
	r.SetStatus(t.exec.Status)
	r.SetStatSN(c.statSN)
	c.statSN++
	r.SetExpCmdSN(c.expCmdSN)
	r.SetMaxCmdSN(c.maxCmdSN())
	if t.read && t.exec.Status == scsi.StatusGood {
		switch n := max(uint32(len(data)), t.exec.Produced); {
		case n < t.edtl:
			r.SetUnderflow(true)
			r.SetResidualCount(t.edtl - n)
		case n > t.edtl:
			r.SetOverflow(true)
			r.SetResidualCount(n - t.edtl)
		}
	}
	if t.write {
		// The residual of the data-out against what the CDB asks for
		// (RFC 7143 section 11.4.5.1), whatever the status: the LU wrote
		// at most what both allow.
		switch want := t.exec.DataOutLength; {
		case t.edtl < want:
			r.SetOverflow(true)
			r.SetResidualCount(want - t.edtl)
		case t.edtl > want:
			r.SetUnderflow(true)
			r.SetResidualCount(t.edtl - want)
		}
	}
	n := iscsi.BHSLen
	if s := t.exec.Sense; len(s) > 0 {
		binary.BigEndian.PutUint16(buf[n:], uint16(len(s)))
		copy(buf[n+2:], s)
		r.SetDataSegmentLength(uint32(2 + len(s)))
		n += 2 + len(s)
		for n%4 != 0 {
			buf[n] = 0
			n++
		}
	}
	c.ioCmds.Add(1)
	if xfer > 0 {
		c.ioRead.Add(uint64(xfer))
	}
	if t.write && t.exec.Status == scsi.StatusGood && t.edtl > 0 {
		c.ioWritten.Add(uint64(min(t.edtl, t.exec.DataOutLength)))
	}
	if c.obs != nil {
		c.observe(t, xfer)
	}
	c.slotTask[slot] = ti
	t.state = stSent
	return c.tr.postPDU(slot, n, ti)
}

// release returns task ti and its staging.
func (c *conn) release(ti int32) {
	t := &c.tasks[ti]
	if t.state == stFree {
		return
	}
	if t.stLen > 0 {
		c.staging.Put(t.stOff, t.stLen)
		t.stLen = 0
	}
	c.endPlace(ti)
	if t.windowed {
		t.windowed = false
		c.busy--
	}
	t.state = stFree
	c.free = append(c.free, ti)
}

// endPlace ends task ti's placement, if it has one, once no more of its
// data can arrive: the transport stops the initiator placing into the
// store, and commands waiting to lock the blocks may go on.
func (c *conn) endPlace(ti int32) {
	if t := &c.tasks[ti]; t.place.Active() {
		c.tr.endPlacement(ti)
		t.place.End()
	}
}

// endPlacements ends the placements of every task: the transport calls it
// when its connection is closed and no more data can be placed.
func (c *conn) endPlacements() {
	for ti := range c.tasks {
		if t := &c.tasks[ti]; t.place.Active() {
			t.place.End()
		}
	}
}

func (c *conn) popSlot() int {
	s := c.sendFree[len(c.sendFree)-1]
	c.sendFree = c.sendFree[:len(c.sendFree)-1]
	return int(s)
}

// takeSlot returns a send buffer and a send queue entry for a PDU that is
// not a task's response.
func (c *conn) takeSlot() (int, bool) {
	if len(c.sendFree) == 0 || !c.tr.room(1) {
		return 0, false
	}
	return c.popSlot(), true
}

// observe tells the Observer of task t's answer; xfer octets of data-in
// went with it.
func (c *conn) observe(t *task, xfer uint32) {
	lun, _ := t.lun.Number()
	info := CommandInfo{Target: c.res.TargetName, LUN: uint64(lun), Opcode: t.cdb[0], Status: t.exec.Status,
		DataIn: xfer, Latency: time.Since(t.arrived)}
	if t.write && t.exec.Status == scsi.StatusGood {
		info.DataOut = t.edtl
	}
	c.obs.Command(info)
}
