package lu

import (
	"bytes"
	"testing"

	"github.com/gostor/gotgt/pkg/api"
)

const statusReservationConflict = 0x18

// nexusTask runs commands as I_T nexus n.
type nexusTask struct {
	t    *testing.T
	tg   *Target
	task Task
}

func asNexus(t *testing.T, tg *Target, n Nexus) *nexusTask {
	nt := &nexusTask{t: t, tg: tg}
	nt.task.Nexus = n
	return nt
}

func (nt *nexusTask) run(lunN uint16, cdb, out []byte) *Task {
	nt.task.Status = 0xff
	nt.tg.Execute(&nt.task, lun(nt.t, lunN), cdb, out, make([]byte, 512))
	return &nt.task
}

// ok fails unless the command ends GOOD.
func (nt *nexusTask) ok(lunN uint16, cdb, out []byte) {
	nt.t.Helper()
	if task := nt.run(lunN, cdb, out); task.Status != api.SAM_STAT_GOOD {
		nt.t.Fatalf("nexus %d LUN %d opcode %#x: status %#x sense %x, want GOOD", nt.task.Nexus, lunN, cdb[0], task.Status, task.Sense)
	}
}

// conflict fails unless the command ends in RESERVATION CONFLICT, without
// sense data.
func (nt *nexusTask) conflict(lunN uint16, cdb, out []byte) {
	nt.t.Helper()
	if task := nt.run(lunN, cdb, out); task.Status != statusReservationConflict || len(task.Sense) != 0 {
		nt.t.Fatalf("nexus %d LUN %d opcode %#x: status %#x sense %x, want RESERVATION CONFLICT", nt.task.Nexus, lunN, cdb[0], task.Status, task.Sense)
	}
}

var (
	reserve6  = []byte{byte(api.RESERVE), 0, 0, 0, 0, 0}
	release6  = []byte{byte(api.RELEASE), 0, 0, 0, 0, 0}
	reserve10 = []byte{byte(api.RESERVE_10), 0, 0, 0, 0, 0, 0, 0, 0, 0}
	release10 = []byte{byte(api.RELEASE_10), 0, 0, 0, 0, 0, 0, 0, 0, 0}
)

// TestReservations: SPC-2 reservations are held per I_T nexus and
// enforced (gotgt took RESERVE and RELEASE and enforced nothing), in the
// sequence libiscsi's test_reserve6_2initiators runs, and each way a
// reservation ends.
func TestReservations(t *testing.T) {
	tg, _ := targetOfKinds(t, lbas*512, bg)
	a, b := asNexus(t, tg, 1), asNexus(t, tg, 2)
	d := bytes.Repeat([]byte{0x44}, 512)
	modeSense := []byte{byte(api.MODE_SENSE), 0, 0x3f, 0, 255, 0}
	read := cdb10(byte(api.READ_10), 0, 0, 1)
	write := cdb10(byte(api.WRITE_10), 0, 0, 1)

	a.ok(0, reserve6, nil)
	a.ok(0, reserve6, nil) // the holder may reserve again
	b.conflict(0, reserve6, nil)
	b.ok(0, release6, nil) // not the holder's: GOOD, and nothing changes
	a.ok(0, modeSense, nil)
	b.conflict(0, modeSense, nil)
	b.conflict(0, reserve6, nil)

	// What another nexus may and may not do on the reserved LU.
	for _, cdb := range [][]byte{
		{byte(api.TEST_UNIT_READY), 0, 0, 0, 0, 0},
		read,
		write,
		{byte(api.READ_CAPACITY), 0, 0, 0, 0, 0, 0, 0, 0, 0},
		readCapacity16CDB(32),
		sc10(0, 0),
		rsocCDB(0, 0, 0, 512),
		{byte(api.ALLOW_MEDIUM_REMOVAL), 0, 0, 0, 1, 0},
		reserve10,
	} {
		b.conflict(0, cdb, d)
	}
	if !allOctets(tg.LU(0).data, bg) {
		t.Fatal("a conflicting WRITE changed the LU")
	}
	for _, cdb := range [][]byte{
		{byte(api.INQUIRY), 0, 0, 0, 96, 0},
		inquiryVPD(0x83, 255),
		{byte(api.REPORT_LUNS), 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0},
		{byte(api.REQUEST_SENSE), 0, 0, 0, 18, 0},
		{byte(api.ALLOW_MEDIUM_REMOVAL), 0, 0, 0, 0, 0},
		release10,
	} {
		b.ok(0, cdb, nil)
	}
	// The holder does anything; other LUs are not reserved.
	a.ok(0, write, d)
	a.ok(0, read, nil)
	a.ok(0, reserve10, nil)
	b.ok(1, write, d)
	b.ok(1, reserve6, nil)
	a.conflict(1, read, nil)
	b.ok(1, release6, nil)
	if !blocksAre(tg.LU(0), 0, 1, d) || !blocksAre(tg.LU(1), 0, 1, d) {
		t.Fatal("the holders' WRITEs did not land")
	}

	// RELEASE by the holder; then the other nexus may reserve.
	a.ok(0, release6, nil)
	b.ok(0, reserve6, nil)
	a.conflict(0, read, nil)
	b.ok(0, release10, nil)
	a.ok(0, read, nil)

	// The loss of the holder's nexus releases; another nexus's does not.
	b.ok(0, reserve6, nil)
	tg.ITNexusLoss(1)
	a.conflict(0, read, nil)
	tg.ITNexusLoss(2)
	a.ok(0, reserve6, nil)
	b.conflict(0, read, nil)

	// LOGICAL UNIT RESET releases that LU's; a target reset all of them.
	tg.LogicalUnitReset(1)
	b.conflict(0, read, nil)
	tg.LogicalUnitReset(0)
	b.ok(0, reserve6, nil)
	a.ok(1, reserve6, nil)
	tg.Reset()
	a.ok(0, reserve6, nil)
	b.ok(1, reserve6, nil)
	tg.Reset()

	// Third-party reservations and extents are not supported.
	for _, cdb := range [][]byte{
		{byte(api.RESERVE), 0x01, 0, 0, 0, 0},
		{byte(api.RESERVE), 0x10, 0, 0, 0, 0},
		{byte(api.RESERVE_10), 0x10, 0, 7, 0, 0, 0, 0, 0, 0},
		{byte(api.RESERVE_10), 0x02, 0, 0, 0, 0, 0, 0, 8, 0},
		{byte(api.RELEASE), 0x01, 0, 0, 0, 0},
		{byte(api.RELEASE_10), 0x10, 0, 7, 0, 0, 0, 0, 0, 0},
	} {
		expect(t, a.run(0, cdb, nil), keyIllegalRequest, ascInvalidFieldInCDB)
	}
	b.ok(0, read, nil) // and none was made
}

// TestReservationsWithoutNexus: a caller that leaves Task.Nexus zero gets
// what Execute did before it knew nexuses: RESERVE and RELEASE succeed and
// nothing conflicts between its tasks.
func TestReservationsWithoutNexus(t *testing.T) {
	tg, _ := targetOfKinds(t, lbas*512, bg)
	var t1, t2 Task
	for _, step := range []struct {
		task *Task
		cdb  []byte
	}{{&t1, reserve6}, {&t2, reserve6}, {&t2, cdb10(byte(api.READ_10), 0, 0, 1)}, {&t1, release6}, {&t2, release6}} {
		tg.Execute(step.task, lun(t, 0), step.cdb, nil, nil)
		expect(t, step.task, 0, 0)
	}
}

// TestReservedDataPathAllocatesNothing: READ and WRITE on a reserved LU,
// by the holder or refused to another nexus, allocate nothing.
func TestReservedDataPathAllocatesNothing(t *testing.T) {
	tg := newTarget(t, 1<<20)
	l := lun(t, 0)
	var holder, other Task
	holder.Nexus, other.Nexus = 7, 8
	tg.Execute(&holder, l, reserve6, nil, nil)
	expect(t, &holder, 0, 0)
	rd := []byte{0x28, 0, 0, 0, 0, 8, 0, 0, 8, 0}
	wr := []byte{0x2a, 0, 0, 0, 0, 8, 0, 0, 8, 0}
	data := make([]byte, 4096)
	if n := testing.AllocsPerRun(100, func() {
		tg.Execute(&holder, l, wr, data, nil)
		tg.Execute(&holder, l, rd, nil, nil)
		tg.Execute(&other, l, wr, data, nil)
		tg.Execute(&other, l, rd, nil, nil)
	}); n != 0 {
		t.Fatalf("READ+WRITE on a reserved LU allocate %v times per run, want 0", n)
	}
	if holder.Status != api.SAM_STAT_GOOD || other.Status != statusReservationConflict {
		t.Fatalf("holder's status %#x, other's %#x", holder.Status, other.Status)
	}
}
