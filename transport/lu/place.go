package lu

import (
	"errors"
	"runtime/debug"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/ddpstore/ddpstore/iwarp/mem"
	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/scsi"
	log "github.com/sirupsen/logrus"
)

// PlaceMin is the shortest WRITE whose data are placed straight into the
// store. Below it the copy that placement saves costs less than what it
// adds: a memory window registered and invalidated, the pages populated.
const PlaceMin = 32 << 10

// Placement is a WRITE whose data-out the transport places straight into
// the LU's store mapping, where a staged WRITE has them placed into a
// buffer and copied into the store when all are in. Streaming writes then
// cost one copy of their data (the network's), not two; nbdkit's order of
// work (receive, then pwrite from a buffer still in cache) is what a
// staged WRITE cannot match.
//
// Target.Place decides, when the command arrives, everything Execute would
// before writing: the LU, the CDB, the range, write protection, ALUA and
// reservations. A placement holds no lock while its data arrive (see
// rangeLock); ExecutePlaced answers the command once they are in, and End
// ends the placement on every path (the transport's, once nothing more
// can be placed). The octets of a WRITE that fails on the way (the
// connection lost, a CRC error that terminates it) are indeterminate, as
// SBC-3 has a failed WRITE's blocks: the transport does not answer the
// command, and the initiator retries it or reports the error.
type Placement struct {
	lu  *LU
	set uint64 // the range lock's stripes, 0 once ended
	off int64
	n   int64
	fua bool
}

// Place starts a placement of the data of the WRITE cdb to LUN lun, whose
// data-out is edtl octets (the Expected Data Transfer Length), if it may
// have one: a WRITE or WRITE AND VERIFY of at least PlaceMin octets, all
// the CDB asks for and no more, to a writable LU whose store is in memory
// (blockdev.InMemory), that Execute would run; and the pages of its range
// could be populated. task carries the I_T nexus and initiator port, as
// for Execute. ok false: stage the data and Execute.
func (t *Target) Place(task *Task, lun iscsi.LUN, cdb []byte, edtl uint32) (p Placement, ok bool) {
	if edtl < PlaceMin || len(cdb) == 0 || !isWrite(cdb[0]) {
		return p, false
	}
	l := t.lookup(lun)
	if l == nil || !l.placeable {
		return p, false
	}
	lba, n, fua, ok := rwCDB(cdb)
	if !ok || uint64(n)<<9 != uint64(edtl) || !l.inRange(lba, uint64(n)) {
		return p, false
	}
	if t.aluaRefuses(cdb) != 0 || l.conflicts(task.Nexus, cdb) || l.prConflicts(task.Port, cdb) {
		return p, false
	}
	set := stripes(lba, uint64(n))
	if !l.lock.tryPlace(set) {
		return p, false
	}
	off := int64(lba << 9)
	if err := l.populate(off, int64(edtl)); err != nil {
		// A full tmpfs under a sparse file: the staged WRITE's pwrite
		// answers the error.
		l.lock.unplace(set)
		log.WithField("lu", l.id).Debugf("lu: not placing a WRITE: %v", err)
		return p, false
	}
	return Placement{lu: l, set: set, off: off, n: int64(edtl), fua: fua}, true
}

// populateShift: the LU's pages are populated for placement in chunks of
// 1 MiB (the range lock's regions), each once until it is discarded.
const populateShift = lockRegionShift + 9

// populate makes sure the pages of the store's octets [off, off+n) are
// allocated and mapped writable before the transport places data there:
// a store into a page not yet mapped costs a fault (about 14 µs a page in
// a virtual machine), and one into a hole of a full tmpfs fails, which in
// the network's receive would end the connection. The chunks that a
// placement touches are populated whole, once: a walk of the page tables
// per WRITE costs as much as a sixth of the copy it saves. Discard forgets
// the chunks it touches (unpopulated).
func (l *LU) populate(off, n int64) error {
	first, last := off>>populateShift, (off+n-1)>>populateShift
	done := true
	for c := first; c <= last; c++ {
		if l.populated[c>>6].Load()&(1<<(c&63)) == 0 {
			done = false
			break
		}
	}
	if done {
		return nil
	}
	a, e := first<<populateShift, min((last+1)<<populateShift, l.store.Size())
	if err := blockdev.Populate(l.store.Mapping(), a, e-a); err != nil {
		return err
	}
	for c := first; c <= last; c++ {
		l.populated[c>>6].Or(1 << (c & 63))
	}
	return nil
}

// unpopulated forgets that the chunks touching [off, off+n) were populated:
// the store is discarding there (with the blocks locked by lockDrained, so
// no placement is in flight on them).
func (l *LU) unpopulated(off, n int64) {
	if l.populated == nil || n <= 0 {
		return
	}
	for c := off >> populateShift; c <= (off+n-1)>>populateShift; c++ {
		l.populated[c>>6].And(^uint64(1 << (c & 63)))
	}
}

// LU returns the LU the placement writes to; nil for the zero Placement.
func (p *Placement) LU() *LU { return p.lu }

// Active reports whether p was started and has not ended.
func (p *Placement) Active() bool { return p.set != 0 }

// Offset returns the store offset where the WRITE's first octet goes.
func (p *Placement) Offset() int64 { return p.off }

// Len returns the octets placed.
func (p *Placement) Len() int64 { return p.n }

// CopyIn stores the data that came with the command (immediate data) at
// the placement's start. A fault of the store (its file cut under the
// mapping) is an error, not a crash.
func (p *Placement) CopyIn(b []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errFault
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	mem.CopyNT(p.lu.data[p.off:p.off+p.n], b)
	return nil
}

var errFault = errors.New("lu: memory fault storing into the store's mapping")

// End ends the placement: commands waiting to lock its blocks may go on.
// It is idempotent. The transport ends a placement only when nothing more
// can be placed by it (its data all in, or its connection closed).
func (p *Placement) End() {
	if p.set != 0 {
		p.lu.lock.unplace(p.set)
		p.set = 0
	}
}

// ExecutePlaced answers the placed WRITE (its data all in) in task, as
// Execute answers a staged one: GOOD, after a Sync of the range for Force
// Unit Access or WRITE AND VERIFY. It does not end the placement.
func (t *Target) ExecutePlaced(task *Task, p *Placement) {
	task.reset(uint32(p.n))
	if !p.fua {
		return
	}
	if err := p.lu.store.Sync(p.off, p.n); err != nil {
		log.WithField("lu", p.lu.id).Errorf("lu: %v", err)
		task.setSense(scsi.SenseMediumError, scsi.ASCWriteError)
	}
}

// drains reports whether op locks its blocks with lockDrained: the
// commands the transport must not run on its connection's loop when the
// LU takes placements.
func drains(op byte) bool {
	switch op {
	case scsi.WriteSame10, scsi.WriteSame16, scsi.Unmap, scsi.CompareAndWrite:
		return true
	}
	return false
}
