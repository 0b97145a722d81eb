package lu

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/gostor/gotgt/pkg/api"
)

func newTarget(t *testing.T, sizes ...int64) *Target {
	t.Helper()
	luns := map[uint16]*LU{}
	for i, size := range sizes {
		s, err := blockdev.NewMemory(size)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
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

func lun(t *testing.T, n uint16) iscsi.LUN {
	l, err := iscsi.MakeLUN(n)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func senseKey(s []byte) (key byte, asc uint16) {
	if len(s) < 14 {
		return 0xff, 0xffff
	}
	return s[2] & 0x0f, binary.BigEndian.Uint16(s[12:])
}

func TestExecute(t *testing.T) {
	tg := newTarget(t, 1<<20, 64<<10)
	var task Task
	in := make([]byte, 4096)

	read10 := func(lba uint32, n uint16) []byte {
		c := make([]byte, 10)
		c[0] = byte(api.READ_10)
		binary.BigEndian.PutUint32(c[2:], lba)
		binary.BigEndian.PutUint16(c[7:], n)
		return c
	}
	write16 := func(lba uint64, n uint32) []byte {
		c := make([]byte, 16)
		c[0] = byte(api.WRITE_16)
		binary.BigEndian.PutUint64(c[2:], lba)
		binary.BigEndian.PutUint32(c[10:], n)
		return c
	}

	// WRITE then READ back: the read data is the store's memory itself.
	data := bytes.Repeat([]byte("ddpstore"), 128) // 1024 octets, 2 blocks
	tg.Execute(&task, lun(t, 0), write16(10, 2), data, nil)
	if task.Status != api.SAM_STAT_GOOD {
		t.Fatalf("WRITE(16): status %#x sense %x", task.Status, task.Sense)
	}
	tg.Execute(&task, lun(t, 0), read10(10, 2), nil, nil)
	if task.Status != api.SAM_STAT_GOOD || !task.FromStore || task.StoreOffset != 10*512 || !bytes.Equal(task.DataIn, data) {
		t.Fatalf("READ(10): status %#x fromStore %v off %d data ok %v", task.Status, task.FromStore, task.StoreOffset, bytes.Equal(task.DataIn, data))
	}
	if &task.DataIn[0] != &tg.LU(0).data[10*512] {
		t.Fatal("READ data was copied instead of pointing into the store")
	}

	cases := []struct {
		name string
		lun  uint16
		cdb  []byte
		out  []byte
		key  byte
		asc  uint16
	}{
		{"read past end", 0, read10(2047, 2), nil, 0x05, 0x2100},
		{"write past end of LUN 1", 1, write16(127, 2), make([]byte, 1024), 0x05, 0x2100},
		{"write with a data-out ending inside a block", 0, write16(0, 4), make([]byte, 1000), 0x05, 0x0e03},
		{"read with RDPROTECT", 0, func() []byte { c := read10(0, 1); c[1] = 0x20; return c }(), nil, 0x05, 0x2400},
		{"absent LUN", 7, read10(0, 1), nil, 0x05, 0x2500},
		{"unknown opcode", 0, []byte{0xc7, 0, 0, 0, 0, 0}, nil, 0x05, 0x2000},
		{"persistent reserve in, unknown service action", 0, []byte{0x5e, 0x1f, 0, 0, 0, 0, 0, 0x10, 0, 0}, nil, 0x05, 0x2400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg.Execute(&task, lun(t, c.lun), c.cdb, c.out, in)
			if c.key == 0 {
				return // must merely not panic
			}
			key, asc := senseKey(task.Sense)
			if task.Status != api.SAM_STAT_CHECK_CONDITION || key != c.key || asc != c.asc {
				t.Fatalf("status %#x key %#x asc %#04x, want CHECK CONDITION %#x/%#04x", task.Status, key, asc, c.key, c.asc)
			}
		})
	}

	// READ CAPACITY(16): last LBA and block length.
	rc := make([]byte, 16)
	rc[0], rc[1], rc[13] = 0x9e, 0x10, 32
	tg.Execute(&task, lun(t, 1), rc, nil, in[:32])
	if task.Status != api.SAM_STAT_GOOD || len(task.DataIn) < 12 {
		t.Fatalf("READ CAPACITY(16): status %#x, %d octets", task.Status, len(task.DataIn))
	}
	if last, bl := binary.BigEndian.Uint64(task.DataIn), binary.BigEndian.Uint32(task.DataIn[8:]); last != 127 || bl != 512 {
		t.Fatalf("READ CAPACITY(16): last LBA %d block %d, want 127 and 512", last, bl)
	}

	// INQUIRY standard data and the device identification VPD page.
	tg.Execute(&task, lun(t, 0), []byte{0x12, 0, 0, 0, 96, 0}, nil, in[:96])
	if task.Status != api.SAM_STAT_GOOD || len(task.DataIn) < 36 || task.DataIn[0]&0x1f != 0 {
		t.Fatalf("INQUIRY: status %#x data %x", task.Status, task.DataIn)
	}
	tg.Execute(&task, lun(t, 0), []byte{0x12, 1, 0x83, 0, 255, 0}, nil, in[:255])
	if task.Status != api.SAM_STAT_GOOD || len(task.DataIn) < 4 || task.DataIn[1] != 0x83 {
		t.Fatalf("INQUIRY VPD 0x83: status %#x data %x", task.Status, task.DataIn)
	}

	// REPORT LUNS lists LUNs 0 and 1 in SAM form.
	tg.Execute(&task, lun(t, 0), []byte{0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}, nil, in[:256])
	if task.Status != api.SAM_STAT_GOOD || len(task.DataIn) < 8+16 || binary.BigEndian.Uint32(task.DataIn) != 16 {
		t.Fatalf("REPORT LUNS: status %#x data %x", task.Status, task.DataIn)
	}
	seen := map[uint64]bool{}
	for i := 8; i+8 <= 24; i += 8 {
		seen[binary.BigEndian.Uint64(task.DataIn[i:])] = true
	}
	if !seen[0] || !seen[1<<48] {
		t.Fatalf("REPORT LUNS: %x, want LUNs 0 and 1", task.DataIn[8:24])
	}
}

func TestExecuteAllocatesNothing(t *testing.T) {
	tg := newTarget(t, 1<<20)
	var task Task
	l := lun(t, 0)
	rd := []byte{0x28, 0, 0, 0, 0, 8, 0, 0, 8, 0}
	wr := []byte{0x2a, 0, 0, 0, 0, 8, 0, 0, 8, 0}
	data := make([]byte, 4096)
	if n := testing.AllocsPerRun(100, func() {
		tg.Execute(&task, l, wr, data, nil)
		tg.Execute(&task, l, rd, nil, nil)
	}); n != 0 {
		t.Fatalf("READ+WRITE allocate %v times per run, want 0", n)
	}
}

// TestWriteExactTransferLength: a WRITE whose data-out buffer is longer
// than its CDB's transfer length changes exactly the blocks the CDB names
// (gotgt would write the whole buffer).
func TestWriteExactTransferLength(t *testing.T) {
	tg := newTarget(t, 1<<20)
	var task Task
	data := bytes.Repeat([]byte{0xab}, 4096)
	cdb := []byte{0x2a, 0, 0, 0, 0, 4, 0, 0, 2, 0} // WRITE(10) LBA 4, 2 blocks
	tg.Execute(&task, lun(t, 0), cdb, data, nil)
	if task.Status != api.SAM_STAT_GOOD {
		t.Fatalf("status %#x sense %x", task.Status, task.Sense)
	}
	st := tg.LU(0).data
	if !bytes.Equal(st[4*512:6*512], data[:1024]) {
		t.Fatal("the two blocks were not written")
	}
	if !bytes.Equal(st[6*512:12*512], make([]byte, 6*512)) || !bytes.Equal(st[:4*512], make([]byte, 4*512)) {
		t.Fatal("blocks outside the CDB's range changed")
	}
}
