package lu

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/ddpstore/ddpstore/iwarp/mem"
	"github.com/ddpstore/ddpstore/transport/scsi"
)

// remoteStore is a memory store that shows no Mapping, as a store in a
// cluster (RBD) does: the LU must use ReadAt and WriteAt.
type remoteStore struct {
	*blockdev.Memory
	reads   atomic.Int64
	readErr error
}

func (s *remoteStore) Mapping() *mem.Mapping { return nil }

func (s *remoteStore) ReadAt(p []byte, off int64) error {
	s.reads.Add(1)
	if s.readErr != nil {
		return s.readErr
	}
	return s.Memory.ReadAt(p, off)
}

func newRemote(t *testing.T, size int64) *remoteStore {
	t.Helper()
	m, err := blockdev.NewMemory(size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return &remoteStore{Memory: m}
}

// TestRemoteMatchesMapped runs the same random commands on a LU over a
// mapped store and on one over a store without a mapping: every status,
// sense, data-in and residual, and the stores' final contents, must be the
// same. It covers the commands that touch the medium: READ, WRITE (FUA),
// WRITE AND VERIFY, WRITE SAME (with and without UNMAP), COMPARE AND WRITE
// that matches and that does not, VERIFY, UNMAP and SYNCHRONIZE CACHE.
func TestRemoteMatchesMapped(t *testing.T) {
	const size = 1 << 20
	mapped, err := blockdev.NewMemory(size)
	if err != nil {
		t.Fatal(err)
	}
	defer mapped.Close()
	remote := newRemote(t, size)
	tg := targetOf(t, mapped, remote)
	if !tg.LU(1).Remote() || tg.LU(0).Remote() {
		t.Fatal("Remote does not tell the stores apart")
	}
	r := rand.New(rand.NewPCG(1, 2))
	seed := make([]byte, size)
	for i := range seed {
		seed[i] = byte(r.Uint32())
	}
	mapped.WriteAt(seed, 0)
	remote.WriteAt(seed, 0)

	var tasks [2]Task
	in := [2][]byte{make([]byte, 256<<10), make([]byte, 256<<10)}
	blocks := uint64(size / 512)
	for i := range 2000 {
		lba := r.Uint64N(blocks - 4)
		n := uint32(1 + r.Uint64N(min(blocks-lba, 64)))
		var cdb, out []byte
		edtl := int(n) << 9
		switch k := r.IntN(10); k {
		case 0, 1, 2:
			cdb = cdb16(scsi.Read16, 0, lba, n)
			if k == 2 {
				edtl = int(r.Uint32N(n)) << 9 // short: residual overflow
			}
		case 3, 4:
			cdb = cdb16(scsi.Write16, byte(r.IntN(2))<<3, lba, n)
			out = randomBlocks(r, n)
		case 5:
			cdb = cdb10(scsi.WriteAndVerify10, 0, uint32(lba), uint16(n))
			out = randomBlocks(r, n)
		case 6:
			cdb = cdb16(scsi.WriteSame16, byte(r.IntN(2))<<3, lba, n)
			out = randomBlocks(r, 1)
			if r.IntN(3) == 0 {
				clear(out)
			}
		case 7:
			// COMPARE AND WRITE of n <= 8 blocks, verify data taken from
			// the store half of the time, so that both outcomes happen.
			n = min(n, 8)
			cdb = make([]byte, 16)
			cdb[0] = scsi.CompareAndWrite
			binary.BigEndian.PutUint64(cdb[2:], lba)
			cdb[13] = byte(n)
			out = randomBlocks(r, 2*n)
			if r.IntN(2) == 0 {
				remote.Memory.ReadAt(out[:n<<9], int64(lba<<9))
			}
		case 8:
			cdb = cdb10(scsi.Verify10, 0, uint32(lba), uint16(n))
		case 9:
			cdb = cdb10(scsi.SynchronizeCache10, 0, uint32(lba), uint16(n))
		}
		edtl = min(edtl, len(in[0]))
		for j := range 2 {
			buf := in[j][:edtl]
			if tg.NeedsInBuffer(lun(t, uint16(j)), cdb) != (j == 1 || !isRead(cdb[0])) {
				t.Fatalf("NeedsInBuffer(LUN %d, %#x) is wrong", j, cdb[0])
			}
			tg.Execute(&tasks[j], lun(t, uint16(j)), cdb, out, buf)
		}
		a, b := &tasks[0], &tasks[1]
		if a.Status != b.Status || !bytes.Equal(a.Sense, b.Sense) {
			t.Fatalf("command %d (%#x lba %d n %d): mapped %#x %x, remote %#x %x", i, cdb[0], lba, n, a.Status, a.Sense, b.Status, b.Sense)
		}
		da, db := a.DataIn, b.DataIn
		if isRead(cdb[0]) && a.Status == scsi.StatusGood {
			// The transport sends at most the Expected Data Transfer
			// Length and reports the rest as residual.
			if uint32(len(da)) != max(uint32(len(db)), b.Produced) {
				t.Fatalf("command %d: READ produced %d octets mapped, %d (%d in the buffer) remote", i, len(da), b.Produced, len(db))
			}
			da = da[:min(len(da), edtl)]
		}
		if !bytes.Equal(da, db) {
			t.Fatalf("command %d (%#x lba %d n %d): data-in differs", i, cdb[0], lba, n)
		}
	}
	got := make([]byte, size)
	remote.Memory.ReadAt(got, 0)
	if !bytes.Equal(got, mapped.Mapping().Bytes()[:size]) {
		t.Fatal("the stores' contents differ after the same commands")
	}
	if remote.reads.Load() == 0 {
		t.Fatal("the remote LU never read through ReadAt")
	}
}

// TestRemoteReadError: a remote store's failed read is MEDIUM ERROR,
// UNRECOVERED READ ERROR, for READ and for COMPARE AND WRITE.
func TestRemoteReadError(t *testing.T) {
	remote := newRemote(t, 64<<10)
	remote.readErr = errInjected
	tg := targetOf(t, remote)
	var task Task
	tg.Execute(&task, lun(t, 0), cdb10(scsi.Read10, 0, 8, 8), nil, make([]byte, 4096))
	expect(t, &task, keyMediumError, scsi.ASCUnrecoveredReadError)
	cdb := make([]byte, 16)
	cdb[0], cdb[13] = scsi.CompareAndWrite, 1
	tg.Execute(&task, lun(t, 0), cdb, make([]byte, 1024), nil)
	expect(t, &task, keyMediumError, scsi.ASCUnrecoveredReadError)
}

// TestRemoteWaits: every command to a remote LU may wait (the transport
// runs it off its loop), of a mapped one only SYNCHRONIZE CACHE.
func TestRemoteWaits(t *testing.T) {
	m := testStoreMemory(t)
	tg := targetOf(t, m, newRemote(t, 64<<10))
	for _, c := range []struct {
		lun  uint16
		cdb  []byte
		want bool
	}{
		{0, cdb10(scsi.Read10, 0, 0, 1), false},
		{0, cdb10(scsi.Write10, 0, 0, 1), false},
		{0, cdb10(scsi.SynchronizeCache10, 0, 0, 0), true},
		{1, cdb10(scsi.Read10, 0, 0, 1), true},
		{1, cdb10(scsi.Write10, 0, 0, 1), true},
		{1, []byte{scsi.Inquiry, 0, 0, 0, 36, 0}, true},
		{7, cdb10(scsi.Read10, 0, 0, 1), false},
	} {
		if got := tg.Waits(lun(t, c.lun), c.cdb); got != c.want {
			t.Errorf("Waits(LUN %d, %#x) = %v, want %v", c.lun, c.cdb[0], got, c.want)
		}
	}
}

func testStoreMemory(t *testing.T) *blockdev.Memory {
	m, err := blockdev.NewMemory(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func randomBlocks(r *rand.Rand, n uint32) []byte {
	b := make([]byte, n<<9)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}
