package lu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"
	"testing"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/gostor/gotgt/pkg/api"
)

// testStore is a memory store whose Thin and ReadOnly a test chooses, that
// records the ranges it syncs and discards and can fail them.
type testStore struct {
	*blockdev.Memory
	thin, readOnly      bool
	syncErr, discardErr error

	mu              sync.Mutex
	syncs, discards [][2]int64 // [off, n]
}

func (s *testStore) Thin() bool     { return s.thin }
func (s *testStore) ReadOnly() bool { return s.readOnly }

func (s *testStore) Sync(off, n int64) error {
	s.mu.Lock()
	s.syncs = append(s.syncs, [2]int64{off, n})
	s.mu.Unlock()
	if s.syncErr != nil {
		return s.syncErr
	}
	return s.Memory.Sync(off, n)
}

func (s *testStore) Discard(off, n int64) error {
	s.mu.Lock()
	s.discards = append(s.discards, [2]int64{off, n})
	s.mu.Unlock()
	if s.discardErr != nil {
		return s.discardErr
	}
	return s.Memory.Discard(off, n)
}

var errInjected = errors.New("injected I/O error")

// storeKind names the test stores newStores makes.
type storeKind int

const (
	thinLU     storeKind = iota // thin, writable
	fullLU                      // not thin
	readOnlyLU                  // read-only
	failingLU                   // thin; Sync and Discard fail
	nStoreKinds
)

// newStores returns one testStore of each kind, of size octets, filled
// with background octets bg (0: left zero).
func newStores(t *testing.T, size int64, bg byte) []*testStore {
	t.Helper()
	var ss []*testStore
	for k := range nStoreKinds {
		m, err := blockdev.NewMemory(size)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		s := &testStore{Memory: m, thin: k != fullLU && k != readOnlyLU, readOnly: k == readOnlyLU}
		if k == failingLU {
			s.syncErr, s.discardErr = errInjected, errInjected
		}
		if bg != 0 {
			b := m.Mapping().Bytes()
			for i := range b {
				b[i] = bg
			}
		}
		ss = append(ss, s)
	}
	return ss
}

// targetOf returns a target exporting stores[i] at LUN i.
func targetOf(t *testing.T, stores ...blockdev.Store) *Target {
	t.Helper()
	luns := map[uint16]*LU{}
	for i, s := range stores {
		l, err := New(uint64(i+1), s)
		if err != nil {
			t.Fatal(err)
		}
		luns[uint16(i)] = l
	}
	tg, err := NewTarget("iqn.2026-11.io.ddpstore:test", luns)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// targetOfKinds is targetOf with one store of each kind at the LUN of its
// kind.
func targetOfKinds(t *testing.T, size int64, bg byte) (*Target, []*testStore) {
	ss := newStores(t, size, bg)
	stores := make([]blockdev.Store, len(ss))
	for i, s := range ss {
		stores[i] = s
	}
	return targetOf(t, stores...), ss
}

// expect fails the test unless task ended GOOD (key 0) or in CHECK
// CONDITION with sense key key and additional sense code asc.
func expect(t *testing.T, task *Task, key byte, asc uint16) {
	t.Helper()
	if key == 0 {
		if task.Status != api.SAM_STAT_GOOD {
			k, a := senseKey(task.Sense)
			t.Fatalf("status %#x sense %#x/%#04x, want GOOD", task.Status, k, a)
		}
		return
	}
	k, a := senseKey(task.Sense)
	if task.Status != api.SAM_STAT_CHECK_CONDITION || k != key || a != asc {
		t.Fatalf("status %#x sense %#x/%#04x, want CHECK CONDITION %#x/%#04x", task.Status, k, a, key, asc)
	}
}

// Sense keys and additional sense codes the tests expect.
const (
	keyMediumError    = 0x03
	keyIllegalRequest = 0x05
	keyDataProtect    = 0x07
	keyMiscompare     = 0x0e

	ascWriteError          = 0x0c00
	ascReadError           = 0x1100
	ascMiscompare          = 0x1d00
	ascParamListLength     = 0x1a00
	ascInvalidOpcode       = 0x2000
	ascLBAOutOfRange       = 0x2100
	ascInvalidFieldInCDB   = 0x2400
	ascInvalidFieldInParms = 0x2600
	ascWriteProtected      = 0x2700
)

func cdb10(op byte, flags byte, lba uint32, n uint16) []byte {
	c := make([]byte, 10)
	c[0], c[1] = op, flags
	binary.BigEndian.PutUint32(c[2:], lba)
	binary.BigEndian.PutUint16(c[7:], n)
	return c
}

func cdb16(op byte, flags byte, lba uint64, n uint32) []byte {
	c := make([]byte, 16)
	c[0], c[1] = op, flags
	binary.BigEndian.PutUint64(c[2:], lba)
	binary.BigEndian.PutUint32(c[10:], n)
	return c
}

func block(b byte) []byte { return bytes.Repeat([]byte{b}, 512) }

// blocksAre reports whether blocks [lba, lba+n) of l all hold want.
func blocksAre(l *LU, lba, n uint64, want []byte) bool {
	for i := lba; i < lba+n; i++ {
		if !bytes.Equal(l.data[i*512:(i+1)*512], want) {
			return false
		}
	}
	return true
}
