package lu

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/gostor/gotgt/pkg/api"
	gscsi "github.com/gostor/gotgt/pkg/scsi"
	"golang.org/x/sys/unix"
)

var (
	ws10 = byte(api.WRITE_SAME)
	ws16 = byte(api.WRITE_SAME_16)
)

const (
	lbas = 8192 // blocks of the test LUs (4 MiB)
	bg   = 0xee // their background octets
)

// TestWriteSame: gotgt answers GOOD to WRITE SAME and writes nothing.
func TestWriteSame(t *testing.T) {
	a := bytes.Repeat([]byte("WRITE SAME block"), 32)
	cases := []struct {
		name     string
		lun      storeKind
		cdb      []byte
		out      []byte
		key      byte
		asc      uint16
		lba, n   uint64 // the blocks that must hold want (when GOOD)
		want     []byte
		discards [][2]int64
	}{
		{name: "10 replicates the block", cdb: cdb10(ws10, 0, 16, 8), out: a, lba: 16, n: 8, want: a},
		{name: "16 over two lock regions", cdb: cdb16(ws16, 0, 2000, 100), out: a, lba: 2000, n: 100, want: a},
		{name: "16 to the last block", cdb: cdb16(ws16, 0, lbas-3, 3), out: a, lba: lbas - 3, n: 3, want: a},
		{name: "16 longest", cdb: cdb16(ws16, 0, 0, lbas), out: a, lba: 0, n: lbas, want: a},
		{name: "data-out longer than a block", cdb: cdb10(ws10, 0, 5, 2), out: append(slices.Clone(a), block(1)...), key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "UNMAP, empty data-out", cdb: cdb16(ws16, 0x08, 40, 8), out: block(0)[:0:0], key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "10 UNMAP, data-out of two blocks", cdb: cdb10(ws10, 0x08, 40, 1), out: append(block(0), a...), key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "16 UNMAP, data-out of two blocks", cdb: cdb16(ws16, 0x08, 40, 1), out: append(block(0), block(0)...), key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "UNMAP, data-out of half a block", cdb: cdb10(ws10, 0x08, 40, 1), out: block(0)[:256], key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "16 UNMAP of zeros on a thin LU discards", cdb: cdb16(ws16, 0x08, 40, 24), out: block(0), lba: 40, n: 24, want: block(0), discards: [][2]int64{{40 * 512, 24 * 512}}},
		{name: "10 UNMAP of zeros on a thin LU discards", cdb: cdb10(ws10, 0x08, 4000, 300), out: block(0), lba: 4000, n: 300, want: block(0), discards: [][2]int64{{4000 * 512, 300 * 512}}},
		{name: "UNMAP of data on a thin LU writes it", cdb: cdb16(ws16, 0x08, 40, 8), out: a, lba: 40, n: 8, want: a},
		{name: "UNMAP on a LU not thin writes zeros", lun: fullLU, cdb: cdb10(ws10, 0x08, 8, 8), out: block(0), lba: 8, n: 8, want: block(0)},
		{name: "zeros without UNMAP are written", cdb: cdb16(ws16, 0, 8, 8), out: block(0), lba: 8, n: 8, want: block(0)},
		{name: "NDOB writes zeros", cdb: cdb16(ws16, 0x01, 70, 4), lba: 70, n: 4, want: block(0)},
		{name: "NDOB ignores a data-out", cdb: cdb16(ws16, 0x01, 70, 4), out: a, lba: 70, n: 4, want: block(0)},
		{name: "NDOB with UNMAP discards", cdb: cdb16(ws16, 0x09, 80, 8), lba: 80, n: 8, want: block(0), discards: [][2]int64{{80 * 512, 8 * 512}}},

		{name: "ANCHOR", cdb: cdb16(ws16, 0x18, 0, 1), out: block(0), key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "WRPROTECT", cdb: cdb10(ws10, 0x20, 0, 1), out: a, key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "LBDATA", cdb: cdb10(ws10, 0x02, 0, 1), out: a, key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "PBDATA", cdb: cdb16(ws16, 0x04, 0, 1), out: a, key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "no blocks (WSNZ)", cdb: cdb16(ws16, 0, 0, 0), out: a, key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "longer than MAXIMUM WRITE SAME LENGTH", cdb: cdb16(ws16, 0, 0, maxWriteSame+1), out: a, key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "past the end", cdb: cdb16(ws16, 0, lbas-3, 4), out: a, key: keyIllegalRequest, asc: ascLBAOutOfRange},
		{name: "10 past the end", cdb: cdb10(ws10, 0, lbas, 1), out: a, key: keyIllegalRequest, asc: ascLBAOutOfRange},
		{name: "LBA wraps around", cdb: cdb16(ws16, 0, 1<<64-1, 2), out: a, key: keyIllegalRequest, asc: ascLBAOutOfRange},
		{name: "read-only", lun: readOnlyLU, cdb: cdb10(ws10, 0, 0, 1), out: a, key: keyDataProtect, asc: ascWriteProtected},
		{name: "short data-out", cdb: cdb10(ws10, 0, 0, 1), out: a[:100], key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "no data-out", cdb: cdb10(ws10, 0, 0, 1), key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "discard fails", lun: failingLU, cdb: cdb16(ws16, 0x08, 0, 8), out: block(0), key: keyMediumError, asc: ascWriteError, discards: [][2]int64{{0, 8 * 512}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg, ss := targetOfKinds(t, lbas*512, bg)
			var task Task
			tg.Execute(&task, lun(t, uint16(c.lun)), c.cdb, c.out, nil)
			expect(t, &task, c.key, c.asc)
			l := tg.LU(uint16(c.lun))
			if c.key == 0 {
				if !blocksAre(l, c.lba, c.n, c.want) {
					t.Error("the blocks do not hold the data")
				}
			} else {
				c.lba, c.n = 0, 0 // nothing may change
			}
			if !allOctets(l.data[:c.lba*512], bg) || !allOctets(l.data[(c.lba+c.n)*512:], bg) {
				t.Error("blocks outside the range changed")
			}
			if got := ss[c.lun].discards; !slices.Equal(got, c.discards) {
				t.Errorf("discards %v, want %v", got, c.discards)
			}
		})
	}
}

func allOctets(b []byte, v byte) bool {
	for _, x := range b {
		if x != v {
			return false
		}
	}
	return true
}

// unmapList builds an UNMAP parameter list of descriptors {lba, n}.
func unmapList(ds ...[2]uint64) []byte {
	p := make([]byte, 8+16*len(ds))
	binary.BigEndian.PutUint16(p[0:], uint16(len(p)-2))
	binary.BigEndian.PutUint16(p[2:], uint16(16*len(ds)))
	for i, d := range ds {
		binary.BigEndian.PutUint64(p[8+16*i:], d[0])
		binary.BigEndian.PutUint32(p[8+16*i+8:], uint32(d[1]))
	}
	return p
}

func unmapCDB(anchor byte, pll int) []byte {
	c := make([]byte, 10)
	c[0], c[1] = byte(api.UNMAP), anchor
	binary.BigEndian.PutUint16(c[7:], uint16(pll))
	return c
}

// TestUnmap: gotgt's UNMAP is a no-op on our stores.
func TestUnmap(t *testing.T) {
	many := make([][2]uint64, maxUnmapDescriptors+1)
	for i := range many {
		many[i] = [2]uint64{uint64(i), 1}
	}
	huge := make([][2]uint64, maxUnmapBlocks/lbas+1)
	for i := range huge {
		huge[i] = [2]uint64{0, lbas}
	}
	withTail := append(unmapList([2]uint64{10, 5}), make([]byte, 8)...)
	binary.BigEndian.PutUint16(withTail[2:], 24) // one and a half descriptors
	short := unmapList([2]uint64{10, 5}, [2]uint64{30, 5})
	binary.BigEndian.PutUint16(short[2:], 16) // the data length says one
	cases := []struct {
		name     string
		lun      storeKind
		cdb      []byte
		out      []byte
		key      byte
		asc      uint16
		discards [][2]int64
	}{
		{name: "one descriptor", cdb: unmapCDB(0, 24), out: unmapList([2]uint64{100, 50}), discards: [][2]int64{{100 * 512, 50 * 512}}},
		{name: "three descriptors, one empty", cdb: unmapCDB(0, 56), out: unmapList([2]uint64{10, 5}, [2]uint64{4000, 300}, [2]uint64{20, 0}),
			discards: [][2]int64{{10 * 512, 5 * 512}, {4000 * 512, 300 * 512}}},
		{name: "to the last block", cdb: unmapCDB(0, 24), out: unmapList([2]uint64{lbas - 1, 1}), discards: [][2]int64{{(lbas - 1) * 512, 512}}},
		{name: "incomplete last descriptor ignored", cdb: unmapCDB(0, len(withTail)), out: withTail, discards: [][2]int64{{10 * 512, 5 * 512}}},
		{name: "descriptor data length shorter than the list", cdb: unmapCDB(0, len(short)), out: short, discards: [][2]int64{{10 * 512, 5 * 512}}},
		{name: "parameter list length shorter than the data-out", cdb: unmapCDB(0, 24), out: unmapList([2]uint64{10, 5}, [2]uint64{30, 5}), discards: [][2]int64{{10 * 512, 5 * 512}}},
		{name: "no parameter list", cdb: unmapCDB(0, 0)},
		{name: "header only", cdb: unmapCDB(0, 8), out: unmapList()},

		{name: "parameter list length 4", cdb: unmapCDB(0, 4), out: unmapList()[:4], key: keyIllegalRequest, asc: ascParamListLength},
		{name: "data-out shorter than a header", cdb: unmapCDB(0, 24), out: make([]byte, 6), key: keyIllegalRequest, asc: ascParamListLength},
		{name: "no data-out", cdb: unmapCDB(0, 24), key: keyIllegalRequest, asc: ascParamListLength},
		{name: "a descriptor past the end: none discarded", cdb: unmapCDB(0, 40), out: unmapList([2]uint64{10, 5}, [2]uint64{lbas - 2, 4}), key: keyIllegalRequest, asc: ascLBAOutOfRange},
		{name: "LBA wraps around", cdb: unmapCDB(0, 24), out: unmapList([2]uint64{1<<64 - 1, 2}), key: keyIllegalRequest, asc: ascLBAOutOfRange},
		{name: "too many descriptors", cdb: unmapCDB(0, 8+16*len(many)), out: unmapList(many...), key: keyIllegalRequest, asc: ascInvalidFieldInParms},
		{name: "too many blocks", cdb: unmapCDB(0, 8+16*len(huge)), out: unmapList(huge...), key: keyIllegalRequest, asc: ascInvalidFieldInParms},
		{name: "ANCHOR", cdb: unmapCDB(1, 24), out: unmapList([2]uint64{10, 5}), key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "LU not thin", lun: fullLU, cdb: unmapCDB(0, 24), out: unmapList([2]uint64{10, 5}), key: keyIllegalRequest, asc: ascInvalidOpcode},
		{name: "read-only", lun: readOnlyLU, cdb: unmapCDB(0, 24), out: unmapList([2]uint64{10, 5}), key: keyDataProtect, asc: ascWriteProtected},
		{name: "discard fails", lun: failingLU, cdb: unmapCDB(0, 24), out: unmapList([2]uint64{10, 5}), key: keyMediumError, asc: ascWriteError, discards: [][2]int64{{10 * 512, 5 * 512}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg, ss := targetOfKinds(t, lbas*512, bg)
			var task Task
			tg.Execute(&task, lun(t, uint16(c.lun)), c.cdb, c.out, nil)
			expect(t, &task, c.key, c.asc)
			if got := ss[c.lun].discards; !slices.Equal(got, c.discards) {
				t.Fatalf("discards %v, want %v", got, c.discards)
			}
			l := tg.LU(uint16(c.lun))
			zeros := 0
			for _, d := range c.discards {
				if c.key == 0 && !allOctets(l.data[d[0]:d[0]+d[1]], 0) {
					t.Errorf("discarded [%d, %d) does not read zeros", d[0], d[0]+d[1])
				}
				zeros += int(d[1])
			}
			if c.key == 0 && bytes.Count(l.data, []byte{bg}) != len(l.data)-zeros {
				t.Error("octets outside the descriptors changed")
			}
		})
	}
}

// TestThinFile: UNMAP and WRITE SAME with UNMAP on a file LU punch holes
// (st_blocks shrinks), and the LU reports itself thin.
func TestThinFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "disk.img")
	f, err := blockdev.OpenFile(path, 8<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if !f.Thin() {
		t.Skipf("the file system of %s does not punch holes", path)
	}
	tg := targetOf(t, f)
	var task Task
	l := lun(t, 0)
	data := bytes.Repeat([]byte{0x5a}, 1<<20)
	for lba := uint64(0); lba < 16384; lba += 2048 {
		tg.Execute(&task, l, cdb16(byte(api.WRITE_16), 0, lba, 2048), data, nil)
		expect(t, &task, 0, 0)
	}
	tg.Execute(&task, l, cdb10(byte(api.SYNCHRONIZE_CACHE), 0, 0, 0), nil, nil)
	expect(t, &task, 0, 0)
	stBlocks := func() int64 {
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		return st.Blocks * 512
	}
	full := stBlocks()
	if full < 8<<20 {
		t.Fatalf("%d octets allocated after writing 8 MiB", full)
	}
	cases := []struct {
		name  string
		cdb   []byte
		out   []byte
		freed int64 // at least, cumulative
	}{
		{"UNMAP", unmapCDB(0, 24), unmapList([2]uint64{2048, 4096}), 2 << 20},
		{"WRITE SAME(16) with UNMAP", cdb16(ws16, 0x08, 8192, 2048), block(0), 3 << 20},
		{"WRITE SAME(10) with UNMAP", cdb10(ws10, 0x08, 12288, 2048), block(0), 4 << 20},
	}
	for _, c := range cases {
		tg.Execute(&task, l, c.cdb, c.out, nil)
		expect(t, &task, 0, 0)
		tg.Execute(&task, l, cdb16(byte(api.SYNCHRONIZE_CACHE_16), 0, 0, 0), nil, nil)
		expect(t, &task, 0, 0)
		if freed := full - stBlocks(); freed < c.freed {
			t.Errorf("%s: st_blocks shrank by %d octets in all, want at least %d", c.name, freed, c.freed)
		}
	}
	m := tg.LU(0).data
	if !allOctets(m[:1<<20], 0x5a) || !allOctets(m[1<<20:3<<20], 0) || !allOctets(m[3<<20:4<<20], 0x5a) || !allOctets(m[4<<20:5<<20], 0) {
		t.Error("the LU does not read zeros exactly where it was unmapped")
	}
	onDisk, _ := os.ReadFile(path)
	if !bytes.Equal(onDisk, m) {
		t.Error("the file and the LU disagree")
	}
}

func sc10(lba uint32, n uint16) []byte { return cdb10(byte(api.SYNCHRONIZE_CACHE), 0, lba, n) }
func sc16(lba uint64, n uint32) []byte { return cdb16(byte(api.SYNCHRONIZE_CACHE_16), 0, lba, n) }

// TestSyncCache: gotgt ignores SYNCHRONIZE CACHE's range.
func TestSyncCache(t *testing.T) {
	cases := []struct {
		name  string
		lun   storeKind
		cdb   []byte
		key   byte
		asc   uint16
		syncs [][2]int64
	}{
		{name: "10 range", cdb: sc10(10, 5), syncs: [][2]int64{{10 * 512, 5 * 512}}},
		{name: "16 range", cdb: sc16(3000, 2000), syncs: [][2]int64{{3000 * 512, 2000 * 512}}},
		{name: "16 to the end", cdb: sc16(100, 0), syncs: [][2]int64{{100 * 512, (lbas - 100) * 512}}},
		{name: "10 whole LU", cdb: sc10(0, 0), syncs: [][2]int64{{0, lbas * 512}}},
		{name: "last block", cdb: sc16(lbas-1, 1), syncs: [][2]int64{{(lbas - 1) * 512, 512}}},
		{name: "IMMED", cdb: func() []byte { c := sc10(1, 1); c[1] = 0x02; return c }(), syncs: [][2]int64{{512, 512}}},
		{name: "read-only LU", lun: readOnlyLU, cdb: sc10(0, 1), syncs: [][2]int64{{0, 512}}},
		{name: "LBA past the end", cdb: sc16(lbas, 0), key: keyIllegalRequest, asc: ascLBAOutOfRange},
		{name: "range past the end", cdb: sc10(8000, 500), key: keyIllegalRequest, asc: ascLBAOutOfRange},
		{name: "LBA wraps around", cdb: sc16(1<<64-1, 2), key: keyIllegalRequest, asc: ascLBAOutOfRange},
		{name: "sync fails", lun: failingLU, cdb: sc16(0, 8), key: keyMediumError, asc: ascWriteError, syncs: [][2]int64{{0, 8 * 512}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg, ss := targetOfKinds(t, lbas*512, 0)
			var task Task
			tg.Execute(&task, lun(t, uint16(c.lun)), c.cdb, nil, nil)
			expect(t, &task, c.key, c.asc)
			if got := ss[c.lun].syncs; !slices.Equal(got, c.syncs) {
				t.Fatalf("syncs %v, want %v", got, c.syncs)
			}
		})
	}
}

func caw(flags byte, lba uint64, n byte) []byte {
	c := make([]byte, 16)
	c[0], c[1], c[13] = byte(api.COMPARE_AND_WRITE), flags, n
	binary.BigEndian.PutUint64(c[2:], lba)
	return c
}

// TestForceUnitAccess: a WRITE with FUA, WRITE AND VERIFY and COMPARE AND
// WRITE with FUA sync exactly what they wrote before GOOD; a failed sync is
// MEDIUM ERROR.
func TestForceUnitAccess(t *testing.T) {
	d := bytes.Repeat([]byte{0x11}, 8*512)
	cawOut := append(make([]byte, 2*512), d[:2*512]...) // the LU holds zeros
	cases := []struct {
		name  string
		lun   storeKind
		cdb   []byte
		out   []byte
		key   byte
		asc   uint16
		syncs [][2]int64
	}{
		{name: "WRITE(10) FUA", cdb: cdb10(byte(api.WRITE_10), 0x08, 7, 3), out: d, syncs: [][2]int64{{7 * 512, 3 * 512}}},
		{name: "WRITE(16) FUA", cdb: cdb16(byte(api.WRITE_16), 0x08, 2047, 2), out: d, syncs: [][2]int64{{2047 * 512, 2 * 512}}},
		{name: "WRITE(12) FUA", cdb: func() []byte {
			c := make([]byte, 12)
			c[0], c[1], c[5], c[9] = byte(api.WRITE_12), 0x08, 9, 4
			return c
		}(), out: d, syncs: [][2]int64{{9 * 512, 4 * 512}}},
		{name: "WRITE(10) without FUA", cdb: cdb10(byte(api.WRITE_10), 0, 7, 3), out: d},
		{name: "WRITE(6) has no FUA", cdb: []byte{byte(api.WRITE_6), 0, 0, 7, 3, 0}, out: d},
		{name: "WRITE AND VERIFY(10)", cdb: cdb10(byte(api.WRITE_VERIFY), 0x02, 7, 3), out: d, syncs: [][2]int64{{7 * 512, 3 * 512}}},
		{name: "WRITE AND VERIFY(16)", cdb: cdb16(byte(api.WRITE_VERIFY_16), 0, 70, 8), out: d, syncs: [][2]int64{{70 * 512, 8 * 512}}},
		{name: "COMPARE AND WRITE FUA", cdb: caw(0x08, 100, 2), out: cawOut, syncs: [][2]int64{{100 * 512, 2 * 512}}},
		{name: "COMPARE AND WRITE without FUA", cdb: caw(0, 100, 2), out: cawOut},
		{name: "WRITE FUA, sync fails", lun: failingLU, cdb: cdb10(byte(api.WRITE_10), 0x08, 7, 3), out: d, key: keyMediumError, asc: ascWriteError, syncs: [][2]int64{{7 * 512, 3 * 512}}},
		{name: "COMPARE AND WRITE FUA, sync fails", lun: failingLU, cdb: caw(0x08, 100, 2), out: cawOut, key: keyMediumError, asc: ascWriteError, syncs: [][2]int64{{100 * 512, 2 * 512}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg, ss := targetOfKinds(t, lbas*512, 0)
			var task Task
			tg.Execute(&task, lun(t, uint16(c.lun)), c.cdb, c.out, nil)
			expect(t, &task, c.key, c.asc)
			if got := ss[c.lun].syncs; !slices.Equal(got, c.syncs) {
				t.Fatalf("syncs %v, want %v", got, c.syncs)
			}
			for _, s := range c.syncs {
				if !allOctets(tg.LU(uint16(c.lun)).data[s[0]:s[0]+s[1]], 0x11) {
					t.Error("the synced range does not hold the data written")
				}
			}
		})
	}
}

// TestWriteAndVerify: WRITE AND VERIFY writes exactly the CDB's blocks
// (gotgt writes the whole buffer and compares it whole, under no lock).
func TestWriteAndVerify(t *testing.T) {
	tg, _ := targetOfKinds(t, lbas*512, bg)
	var task Task
	d := bytes.Repeat([]byte{0x22}, 8*512)
	for _, c := range [][]byte{
		cdb10(byte(api.WRITE_VERIFY), 0, 8, 2),
		func() []byte {
			c := make([]byte, 12)
			c[0], c[5], c[9] = byte(api.WRITE_VERIFY_12), 8, 2
			return c
		}(),
		cdb16(byte(api.WRITE_VERIFY_16), 0x02, 8, 2),
	} {
		tg.Execute(&task, lun(t, 0), c, d, nil)
		expect(t, &task, 0, 0)
		l := tg.LU(0)
		if !blocksAre(l, 8, 2, d[:512]) || !allOctets(l.data[:8*512], bg) || !allOctets(l.data[10*512:], bg) {
			t.Fatalf("opcode %#x changed other blocks than 8 and 9", c[0])
		}
	}
	tg.Execute(&task, lun(t, 0), cdb10(byte(api.WRITE_VERIFY), 0, lbas-1, 2), d, nil)
	expect(t, &task, keyIllegalRequest, ascLBAOutOfRange)
	tg.Execute(&task, lun(t, uint16(readOnlyLU)), cdb10(byte(api.WRITE_VERIFY), 0, 0, 2), d, nil)
	expect(t, &task, keyDataProtect, ascWriteProtected)
}

// TestCompareAndWrite: gotgt lacks COMPARE AND WRITE.
func TestCompareAndWrite(t *testing.T) {
	old := bytes.Repeat([]byte("old data"), 128) // 2 blocks
	nw := bytes.Repeat([]byte("NEW DATA"), 128)
	differ := func(at ...int) []byte {
		v := slices.Clone(old)
		for _, i := range at {
			v[i] ^= 0xff
		}
		return append(v, nw...)
	}
	const at = 2047 // the two blocks straddle two lock regions
	cases := []struct {
		name string
		lun  storeKind
		cdb  []byte
		out  []byte
		key  byte
		asc  uint16
		info int // INFORMATION of a miscompare
		nw   bool
	}{
		{name: "match", cdb: caw(0, at, 2), out: append(slices.Clone(old), nw...), nw: true},
		{name: "longer data-out", cdb: caw(0, at, 2), out: append(append(slices.Clone(old), nw...), 1, 2, 3), key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "data-out of 4 blocks for 1", cdb: caw(0, at, 1), out: append(slices.Clone(old), nw...), key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "data-out of 4 blocks for 3, mismatching", cdb: caw(0, at, 3), out: differ(0), key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "miscompare at 0", cdb: caw(0, at, 2), out: differ(0), key: keyMiscompare, asc: ascMiscompare, info: 0},
		{name: "miscompare at 700", cdb: caw(0, at, 2), out: differ(700, 900), key: keyMiscompare, asc: ascMiscompare, info: 700},
		{name: "miscompare at the last octet", cdb: caw(0, at, 2), out: differ(1023), key: keyMiscompare, asc: ascMiscompare, info: 1023},
		{name: "no blocks", cdb: caw(0, at, 0), out: nil},
		// libiscsi's CompareAndWrite.Simple asks for 256 blocks with the
		// verify and write data of 256 in the data-out: NUMBER OF LOGICAL
		// BLOCKS, one octet, wraps to 0.
		{name: "no blocks with a data-out", cdb: caw(0, at, 0), out: make([]byte, 2*256*512), key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "no blocks with a data-out of one octet", cdb: caw(0, at, 0), out: []byte{0}, key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "longer than MAXIMUM COMPARE AND WRITE LENGTH", cdb: caw(0, 0, maxCompareAndWrite+1), out: make([]byte, 2*512*(maxCompareAndWrite+1)), key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "past the end", cdb: caw(0, lbas-1, 2), out: make([]byte, 2048), key: keyIllegalRequest, asc: ascLBAOutOfRange},
		{name: "LBA wraps around", cdb: caw(0, 1<<64-1, 2), out: make([]byte, 2048), key: keyIllegalRequest, asc: ascLBAOutOfRange},
		{name: "WRPROTECT", cdb: caw(0x20, at, 2), out: append(slices.Clone(old), nw...), key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "read-only", lun: readOnlyLU, cdb: caw(0, at, 2), out: append(slices.Clone(old), nw...), key: keyDataProtect, asc: ascWriteProtected},
		{name: "verify data only", cdb: caw(0, at, 2), out: slices.Clone(old), key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg, _ := targetOfKinds(t, lbas*512, bg)
			l := tg.LU(uint16(c.lun))
			copy(l.data[at*512:], old)
			var task Task
			tg.Execute(&task, lun(t, uint16(c.lun)), c.cdb, c.out, nil)
			expect(t, &task, c.key, c.asc)
			if c.key == keyMiscompare {
				if task.Sense[0]&0x80 == 0 || int(binary.BigEndian.Uint32(task.Sense[3:])) != c.info {
					t.Errorf("sense %x: VALID %v INFORMATION %d, want %d", task.Sense, task.Sense[0]&0x80 != 0, binary.BigEndian.Uint32(task.Sense[3:]), c.info)
				}
			}
			want := old
			if c.nw {
				want = nw
			}
			if !bytes.Equal(l.data[at*512:(at+2)*512], want) {
				t.Error("the blocks do not hold what they should")
			}
			if !allOctets(l.data[:at*512], bg) || !allOctets(l.data[(at+2)*512:], bg) {
				t.Error("blocks outside the range changed")
			}
		})
	}
}

// TestCompareAndWriteAtomic: concurrent COMPARE AND WRITEs increment a
// counter without losing an update, and WRITEs to the same blocks never
// interleave with a COMPARE AND WRITE's write.
func TestCompareAndWriteAtomic(t *testing.T) {
	tg, _ := targetOfKinds(t, lbas*512, 0)
	l := lun(t, 0)
	lu := tg.LU(0)
	const at, n = 2047, 2 // two lock regions
	fill := func(p []byte, v uint64) []byte {
		for i := 0; i < len(p); i += 8 {
			binary.BigEndian.PutUint64(p[i:], v)
		}
		return p
	}
	const workers, increments = 4, 200
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var task Task
			out := make([]byte, 2*n*512)
			for done := 0; done < increments; {
				// READ takes no lock: the verify data may be torn, and
				// then miscompares.
				tg.Execute(&task, l, cdb16(byte(api.READ_16), 0, at, n), nil, nil)
				copy(out, task.DataIn) // one snapshot: verify data and v
				v := binary.BigEndian.Uint64(out)
				fill(out[n*512:], v+1)
				tg.Execute(&task, l, caw(0, at, n), out, nil)
				switch k, _ := senseKey(task.Sense); {
				case task.Status == api.SAM_STAT_GOOD:
					done++
				case k != keyMiscompare:
					t.Errorf("COMPARE AND WRITE: status %#x sense %x", task.Status, task.Sense)
					return
				}
			}
		})
	}
	wg.Wait()
	if !bytes.Equal(lu.data[at*512:(at+n)*512], fill(make([]byte, n*512), workers*increments)) {
		t.Fatalf("counter %d, want %d (or torn)", binary.BigEndian.Uint64(lu.data[at*512:]), workers*increments)
	}

	// WRITE all-1 or all-2 against COMPARE AND WRITE 1 -> 3 and 3 -> 1:
	// without the lock a write would land in the middle of a swap and leave
	// the blocks mixed.
	for v := uint64(1); v <= 2; v++ {
		wg.Go(func() {
			var task Task
			data := fill(make([]byte, n*512), v)
			for range 2000 {
				tg.Execute(&task, l, cdb16(byte(api.WRITE_16), 0, at, n), data, nil)
				expect(t, &task, 0, 0)
			}
		})
	}
	wg.Go(func() {
		var task Task
		swaps := [2][]byte{
			append(fill(make([]byte, n*512), 1), fill(make([]byte, n*512), 3)...),
			append(fill(make([]byte, n*512), 3), fill(make([]byte, n*512), 1)...),
		}
		for i := range 4000 {
			tg.Execute(&task, l, caw(0, at, n), swaps[i%2], nil)
			if k, _ := senseKey(task.Sense); task.Status != api.SAM_STAT_GOOD && k != keyMiscompare {
				t.Errorf("COMPARE AND WRITE: status %#x sense %x", task.Status, task.Sense)
				return
			}
		}
	})
	wg.Wait()
	v := binary.BigEndian.Uint64(lu.data[at*512:])
	if !bytes.Equal(lu.data[at*512:(at+n)*512], fill(make([]byte, n*512), v)) {
		t.Fatal("a WRITE and a COMPARE AND WRITE interleaved: the blocks are mixed")
	}
}

func TestStripes(t *testing.T) {
	const r = 1 << lockRegionShift
	cases := []struct {
		lba, n uint64
		want   uint64
	}{
		{0, 0, 0},
		{0, 1, 1},
		{r - 1, 1, 1},
		{r - 1, 2, 0b11},
		{r, 1, 0b10},
		{5*r + 3, 3 * r, 0b1111 << 5},
		{63 * r, r + 1, 1<<63 | 1},
		{64 * r, 1, 1},
		{0, 63 * r, 1<<63 - 1},
		{7, 64 * r, ^uint64(0)},
		{0, 1 << 40, ^uint64(0)},
	}
	for _, c := range cases {
		if got := stripes(c.lba, c.n); got != c.want {
			t.Errorf("stripes(%d, %d) = %#x, want %#x", c.lba, c.n, got, c.want)
		}
	}
}

// TestBackendErrors: no I/O error ends in BUSY, which gotgt answers; the
// initiator gets CHECK CONDITION, MEDIUM ERROR.
func TestBackendErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "disk.img")
	f, err := blockdev.OpenFile(path, 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	ss := newStores(t, 1<<20, 0)
	tg := targetOf(t, f, ss[failingLU])
	// Cut the file under its mapping: the second half's pages now fault
	// (SIGBUS), as a failing disk or a full file system would.
	if err := os.Truncate(path, 512<<10); err != nil {
		t.Fatal(err)
	}
	// gotgt's own WRITE AND VERIFY, which writes the whole data-out and
	// answers BUSY when the store refuses it.
	tg.LU(0).ops[api.WRITE_VERIFY] = gscsi.NewSCSIDeviceOperation(gscsi.SBCReadWrite, nil, 0)
	d := make([]byte, 4096)
	cases := []struct {
		name string
		lun  uint16
		cdb  []byte
		out  []byte
		asc  uint16
	}{
		{"gotgt's BUSY", 0, cdb10(byte(api.WRITE_VERIFY), 0, 2047, 1), d, ascWriteError},
		{"WRITE into a fault", 0, cdb10(byte(api.WRITE_10), 0, 1500, 8), d, ascWriteError},
		{"WRITE SAME into a fault", 0, cdb16(ws16, 0, 1500, 8), d[:512], ascWriteError},
		{"COMPARE AND WRITE on a fault", 0, caw(0, 1500, 2), d[:2048], ascWriteError},
		{"VERIFY with BYTCHK on a fault", 0, cdb10(byte(api.VERIFY_10), 0x02, 1500, 1), d[:512], ascReadError},
		// READ hands the mapping to the RNIC, which would fault sending it:
		// the pages are brought in first, and fail here.
		{"READ of a fault", 0, cdb10(byte(api.READ_10), 0, 1500, 8), nil, ascReadError},
		{"READ ending in a fault", 0, cdb10(byte(api.READ_10), 0, 1020, 8), nil, ascReadError},
		{"SYNCHRONIZE CACHE fails", 1, sc10(0, 0), nil, ascWriteError},
		{"UNMAP fails", 1, unmapCDB(0, 24), unmapList([2]uint64{0, 8}), ascWriteError},
		{"WRITE FUA fails", 1, cdb10(byte(api.WRITE_10), 0x08, 0, 8), d, ascWriteError},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var task Task
			tg.Execute(&task, lun(t, c.lun), c.cdb, c.out, make([]byte, 64))
			if task.Status == api.SAM_STAT_BUSY {
				t.Fatal("BUSY")
			}
			expect(t, &task, keyMediumError, c.asc)
		})
	}
	// The first half still works.
	var task Task
	tg.Execute(&task, lun(t, 0), cdb10(byte(api.WRITE_10), 0, 0, 8), bytes.Repeat([]byte{7}, 4096), nil)
	expect(t, &task, 0, 0)
}

// TestZeroTransferLength: a WRITE or WRITE AND VERIFY with a TRANSFER
// LENGTH of 0 transfers nothing and is not an error (SBC-3 5.32 to 5.35,
// WRITE AND VERIFY likewise), with or without a data-out buffer, FUA or
// not; its LBA is still checked. WRITE(6)'s 0 means 256 blocks.
func TestZeroTransferLength(t *testing.T) {
	write12 := func(op, flags byte, lba, n uint32) []byte {
		c := make([]byte, 12)
		c[0], c[1] = op, flags
		binary.BigEndian.PutUint32(c[2:], lba)
		binary.BigEndian.PutUint32(c[6:], n)
		return c
	}
	d := bytes.Repeat([]byte{0x33}, 512)
	cases := []struct {
		name string
		cdb  []byte
		out  []byte
		key  byte
		asc  uint16
	}{
		{name: "WRITE(10)", cdb: cdb10(byte(api.WRITE_10), 0, 0, 0)},
		{name: "WRITE(10) FUA", cdb: cdb10(byte(api.WRITE_10), 0x08, 7, 0)},
		{name: "WRITE(10) with a data-out", cdb: cdb10(byte(api.WRITE_10), 0, 7, 0), out: d},
		{name: "WRITE(12)", cdb: write12(byte(api.WRITE_12), 0, 100, 0)},
		{name: "WRITE(16)", cdb: cdb16(byte(api.WRITE_16), 0, lbas-1, 0)},
		{name: "WRITE AND VERIFY(10)", cdb: cdb10(byte(api.WRITE_VERIFY), 0x02, 3, 0)},
		{name: "WRITE AND VERIFY(12)", cdb: write12(byte(api.WRITE_VERIFY_12), 0, 3, 0)},
		{name: "WRITE AND VERIFY(16)", cdb: cdb16(byte(api.WRITE_VERIFY_16), 0, 3, 0)},
		{name: "WRITE(10) past the end", cdb: cdb10(byte(api.WRITE_10), 0, lbas+1, 0), key: keyIllegalRequest, asc: ascLBAOutOfRange},
		{name: "WRITE(16) at LBA 2^64-1", cdb: cdb16(byte(api.WRITE_16), 0, 1<<64-1, 0), key: keyIllegalRequest, asc: ascLBAOutOfRange},
		// 256 blocks from LBA 7937 pass the end; 0 would not.
		{name: "WRITE(6) of 0 is 256 blocks", cdb: []byte{byte(api.WRITE_6), 0, (lbas - 255) >> 8, (lbas - 255) & 0xff, 0, 0}, key: keyIllegalRequest, asc: ascLBAOutOfRange},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg, ss := targetOfKinds(t, lbas*512, bg)
			var task Task
			tg.Execute(&task, lun(t, 0), c.cdb, c.out, nil)
			expect(t, &task, c.key, c.asc)
			if !allOctets(tg.LU(0).data, bg) {
				t.Error("the LU changed")
			}
			if len(ss[0].syncs) != 0 {
				t.Errorf("synced %v", ss[0].syncs)
			}
		})
	}
}
