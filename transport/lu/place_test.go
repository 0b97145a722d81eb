package lu

import (
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/ddpstore/ddpstore/transport/scsi"
	"golang.org/x/sys/unix"
)

const mib = 1 << 20

// TestPlaceDecides: Place takes a WRITE exactly when Execute would write
// it whole, to a writable store in memory, and answers it as Execute
// would.
func TestPlaceDecides(t *testing.T) {
	tg, ss := targetOfKinds(t, 8*mib, 0)
	var task Task
	place := func(lunN uint16, cdb []byte, edtl uint32) (Placement, bool) {
		return tg.Place(&task, lun(t, lunN), cdb, edtl)
	}
	const blocks = mib / 512
	for _, c := range []struct {
		name string
		lun  uint16
		cdb  []byte
		edtl uint32
		want bool
	}{
		{"WRITE(16) of 1 MiB", uint16(thinLU), cdb16(scsi.Write16, 0, 0, blocks), mib, true},
		{"WRITE(10) of 32 KiB", uint16(fullLU), cdb10(scsi.Write10, 0, 64, 64), PlaceMin, true},
		{"WRITE AND VERIFY(16)", uint16(thinLU), cdb16(scsi.WriteAndVerify16, 0, 2048, blocks), mib, true},
		{"under PlaceMin", uint16(thinLU), cdb10(scsi.Write10, 0, 0, 8), 4096, false},
		{"EDTL short of the CDB", uint16(thinLU), cdb16(scsi.Write16, 0, 0, blocks), mib - 512, false},
		{"EDTL past the CDB", uint16(thinLU), cdb16(scsi.Write16, 0, 0, blocks/2), mib, false},
		{"past the end", uint16(thinLU), cdb16(scsi.Write16, 0, 8*mib/512-8, blocks), mib, false},
		{"read-only store", uint16(readOnlyLU), cdb16(scsi.Write16, 0, 0, blocks), mib, false},
		{"READ", uint16(thinLU), cdb16(scsi.Read16, 0, 0, blocks), mib, false},
		{"COMPARE AND WRITE", uint16(thinLU), []byte{scsi.CompareAndWrite, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 128, 0, 0}, 128 << 10, false},
		{"protection information", uint16(thinLU), cdb16(scsi.Write16, 0x20, 0, blocks), mib, false},
		{"no such LUN", 9, cdb16(scsi.Write16, 0, 0, blocks), mib, false},
		{"empty CDB", uint16(thinLU), nil, mib, false},
	} {
		p, ok := place(c.lun, c.cdb, c.edtl)
		if ok != c.want {
			t.Errorf("%s: Place %v, want %v", c.name, ok, c.want)
		}
		if ok {
			tg.ExecutePlaced(&task, &p)
			expect(t, &task, 0, 0)
			if task.DataOutLength != c.edtl {
				t.Errorf("%s: DataOutLength %d, want %d", c.name, task.DataOutLength, c.edtl)
			}
			p.End()
			if p.Active() || !p.LU().lock.drained(^uint64(0)) {
				t.Errorf("%s: placement still counted after End", c.name)
			}
			p.End() // idempotent
		}
	}

	// WRITE AND VERIFY and FUA make the range durable before GOOD; a
	// failing Sync is MEDIUM ERROR, WRITE ERROR.
	for _, c := range []struct {
		name string
		lun  storeKind
		cdb  []byte
		key  byte
	}{
		{"FUA", thinLU, cdb16(scsi.Write16, 0x08, 2048, blocks), 0},
		{"WRITE AND VERIFY", thinLU, cdb16(scsi.WriteAndVerify16, 0, 4096, blocks), 0},
		{"FUA on a failing store", failingLU, cdb16(scsi.Write16, 0x08, 2048, blocks), keyMediumError},
	} {
		before := len(ss[c.lun].syncs)
		p, ok := place(uint16(c.lun), c.cdb, mib)
		if !ok {
			t.Fatalf("%s: not placed", c.name)
		}
		tg.ExecutePlaced(&task, &p)
		p.End()
		expect(t, &task, c.key, ascWriteError)
		if s := ss[c.lun].syncs; len(s) != before+1 || s[len(s)-1] != [2]int64{p.Offset(), mib} {
			t.Errorf("%s: syncs %v, want one of [%d, %d]", c.name, s[before:], p.Offset(), mib)
		}
	}

	// A reservation held by another I_T nexus: the staged path answers
	// RESERVATION CONFLICT, nothing is placed.
	holder := asNexus(t, tg, 1)
	holder.ok(uint16(thinLU), reserve6, nil)
	task.Nexus = 2
	if _, ok := place(uint16(thinLU), cdb16(scsi.Write16, 0, 0, blocks), mib); ok {
		t.Error("placed a WRITE from a nexus the LU is reserved against")
	}
	task.Nexus = 1
	p, ok := place(uint16(thinLU), cdb16(scsi.Write16, 0, 0, blocks), mib)
	if !ok {
		t.Error("did not place the reservation holder's WRITE")
	}
	p.End()
}

// TestPlacementAndDrainingLocks: a placement holds no lock, so WRITEs go
// on beside it, but COMPARE AND WRITE, UNMAP and WRITE SAME wait for it
// to end, and no placement starts on their blocks while they wait.
func TestPlacementAndDrainingLocks(t *testing.T) {
	tg, ss := targetOfKinds(t, 8*mib, 0)
	l := tg.LU(uint16(thinLU))
	var task Task
	p, ok := tg.Place(&task, lun(t, uint16(thinLU)), cdb16(scsi.Write16, 0, 0, 128), 64<<10)
	if !ok {
		t.Fatal("not placed")
	}
	// A staged WRITE of the same blocks runs.
	expectRun(t, tg, uint16(thinLU), cdb16(scsi.Write16, 0, 0, 1), block(7), 0)

	for _, op := range []byte{scsi.CompareAndWrite, scsi.Unmap, scsi.WriteSame16} {
		if !tg.Waits(lun(t, uint16(thinLU)), []byte{op}) {
			t.Errorf("Waits(%#02x) false on a LU that takes placements: it would wait on the connection's loop", op)
		}
	}
	if tg.Waits(lun(t, uint16(thinLU)), cdb16(scsi.Write16, 0, 0, 1)) {
		t.Error("Waits(WRITE) true on a LU in memory")
	}

	// UNMAP of a block inside the placement waits for it.
	unmapped := make(chan *Task, 1)
	go func() {
		var ut Task
		param := make([]byte, 24)
		param[1], param[3] = 22, 16
		param[8+7] = 1  // LBA 1
		param[8+11] = 1 // one block
		tg.Execute(&ut, lun(t, uint16(thinLU)), []byte{scsi.Unmap, 0, 0, 0, 0, 0, 0, 0, 24, 0}, param, nil)
		unmapped <- &ut
	}()
	for l.lock.stripe[0].drain.Load() == 0 { // until UNMAP waits
		select {
		case ut := <-unmapped:
			t.Fatalf("UNMAP ran (status %#x) while a placement of its block was in flight", ut.Status)
		case <-time.After(time.Millisecond):
		}
	}
	// While it waits no placement starts on its blocks; elsewhere one does.
	if q, ok := tg.Place(&task, lun(t, uint16(thinLU)), cdb16(scsi.Write16, 0, 64, 64), PlaceMin); ok {
		q.End()
		t.Error("a placement started on blocks an UNMAP is waiting to lock")
	}
	q, ok := tg.Place(&task, lun(t, uint16(thinLU)), cdb16(scsi.Write16, 0, 4096, 64), PlaceMin)
	if !ok {
		t.Error("no placement on blocks nobody waits for")
	}
	q.End()
	select {
	case ut := <-unmapped:
		t.Fatalf("UNMAP ran (status %#x) while a placement of its block was in flight", ut.Status)
	case <-time.After(20 * time.Millisecond):
	}
	p.End()
	ut := <-unmapped
	expect(t, ut, 0, 0)
	if d := ss[thinLU].discards; len(d) != 1 || d[0] != [2]int64{512, 512} {
		t.Errorf("discards %v, want block 1's", d)
	}
	if l.populated[0].Load()&1 != 0 {
		t.Error("the discarded chunk is still taken for populated")
	}

	// A stripe held by a WRITE being copied: Place does not wait for it.
	set := stripes(0, 1)
	l.lock.lock(set)
	if q, ok := tg.Place(&task, lun(t, uint16(thinLU)), cdb16(scsi.Write16, 0, 0, 64), PlaceMin); ok {
		q.End()
		t.Error("placed on a locked stripe")
	}
	l.lock.unlock(set)
}

// expectRun executes cdb with data-out out and checks the answer (expect).
func expectRun(t *testing.T, tg *Target, lunN uint16, cdb, out []byte, key byte) {
	t.Helper()
	var task Task
	tg.Execute(&task, lun(t, lunN), cdb, out, nil)
	expect(t, &task, key, 0)
}

// TestPlaceStores: files on tmpfs and memory take placements; files on a
// disk's file system and read-only files do not (their pages can fail to
// come in, or must not be written).
func TestPlaceStores(t *testing.T) {
	var fs unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &fs); err != nil || fs.Type != unix.TMPFS_MAGIC {
		t.Skip("no tmpfs at /dev/shm")
	}
	shm, err := os.MkdirTemp("/dev/shm", "ddpstore-place-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	mem, err := blockdev.NewMemory(4 * mib)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	disk := t.TempDir()
	if unix.Statfs(disk, &fs) == nil && fs.Type == unix.TMPFS_MAGIC {
		disk = "" // TMPDIR on tmpfs: no disk file system to try
	}
	stores := []blockdev.Store{mem, openImg(t, shm, false), openImg(t, shm, true)}
	want := []bool{true, true, false}
	if disk != "" {
		stores, want = append(stores, openImg(t, disk, false)), append(want, false)
	}
	tg := targetOf(t, stores...)
	for i, w := range want {
		var task Task
		p, ok := tg.Place(&task, lun(t, uint16(i)), cdb16(scsi.Write16, 0, 0, 128), 64<<10)
		if ok != w {
			t.Errorf("store %d (%T): placed %v, want %v", i, stores[i], ok, w)
		}
		if ok {
			// Populated: a store into the pages does not fault.
			b := stores[i].Mapping().Bytes()
			var v [16]byte
			if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), 64<<10, uintptr(unsafe.Pointer(&v[0]))); e != 0 || v[0]&v[15]&1 == 0 {
				t.Errorf("store %d: pages not resident after Place (%v)", i, e)
			}
			if p.LU().populated[0].Load()&1 == 0 {
				t.Errorf("store %d: chunk 0 not taken for populated", i)
			}
			p.End()
		}
	}
}

// TestPlaceFullTmpfs: on a tmpfs with no room for the blocks a sparse
// file's WRITE needs, Place declines (a store into the mapping would fault
// in the network's receive) and the staged WRITE answers MEDIUM ERROR,
// WRITE ERROR.
func TestPlaceFullTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	tg := targetOf(t, openImg(t, dir, false))
	var task Task
	cdb := cdb16(scsi.Write16, 0, 2048, 2048)
	if p, ok := tg.Place(&task, lun(t, 0), cdb, mib); ok {
		p.End()
		t.Fatal("placed 1 MiB into a 256 KiB tmpfs")
	}
	tg.Execute(&task, lun(t, 0), cdb, make([]byte, mib), nil)
	expect(t, &task, keyMediumError, ascWriteError)
}

// openImg opens dir/img as a file store, creating it sparse at 4 MiB first
// (writable) when it is not there.
func openImg(t *testing.T, dir string, readOnly bool) blockdev.Store {
	t.Helper()
	path := filepath.Join(dir, "img")
	if _, err := os.Stat(path); err != nil {
		st, err := blockdev.OpenFile(path, 4*mib, false)
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
	}
	st, err := blockdev.OpenFile(path, 0, readOnly)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
