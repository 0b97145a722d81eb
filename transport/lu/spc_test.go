package lu

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/gostor/gotgt/pkg/api"
)

func inquiryVPD(page byte, alloc uint16) []byte {
	return []byte{byte(api.INQUIRY), 1, page, byte(alloc >> 8), byte(alloc), 0}
}

func readCapacity16CDB(alloc uint32) []byte {
	c := make([]byte, 16)
	c[0], c[1] = byte(api.SERVICE_ACTION_IN), byte(api.SAI_READ_CAPACITY_16)
	binary.BigEndian.PutUint32(c[10:], alloc)
	return c
}

// TestProvisioningReport: READ CAPACITY(16), the Block Limits and Logical
// Block Provisioning VPD pages and the list of VPD pages all tell the
// store's Thin.
func TestProvisioningReport(t *testing.T) {
	dir := t.TempDir()
	ro, err := blockdev.OpenFile(filepath.Join(dir, "ro.img"), 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	ro.Close()
	if ro, err = blockdev.OpenFile(filepath.Join(dir, "ro.img"), 0, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ro.Close() })
	file, err := blockdev.OpenFile(filepath.Join(dir, "rw.img"), 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { file.Close() })
	mem, err := blockdev.NewMemory(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	ss := newStores(t, 1<<20, 0)
	cases := []struct {
		name  string
		store blockdev.Store
		thin  bool
	}{
		{"memory", mem, true},
		{"file", file, file.Thin()},
		{"read-only file", ro, false},
		{"store not thin", ss[fullLU], false},
		{"thin store", ss[thinLU], true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg := targetOf(t, c.store)
			if tg.LU(0).Thin() != c.thin {
				t.Fatalf("LU.Thin() = %v, want %v", tg.LU(0).Thin(), c.thin)
			}
			var task Task
			in := make([]byte, 255)
			l := lun(t, 0)

			tg.Execute(&task, l, readCapacity16CDB(32), nil, in[:32])
			expect(t, &task, 0, 0)
			rc := task.DataIn
			if len(rc) != 32 || binary.BigEndian.Uint64(rc) != 2047 || binary.BigEndian.Uint32(rc[8:]) != 512 || rc[13]&0x0f != 0 {
				t.Fatalf("READ CAPACITY(16): %x", rc)
			}
			if lbpme, lbprz := rc[14]&0x80 != 0, rc[14]&0x40 != 0; lbpme != c.thin || lbprz != c.thin {
				t.Errorf("READ CAPACITY(16): LBPME %v LBPRZ %v, want %v", lbpme, lbprz, c.thin)
			}

			tg.Execute(&task, l, inquiryVPD(0x00, 255), nil, in)
			expect(t, &task, 0, 0)
			if n := int(binary.BigEndian.Uint16(task.DataIn[2:])); task.DataIn[1] != 0 || !bytes.Equal(task.DataIn[4:4+n], []byte{0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2}) {
				t.Errorf("Supported VPD Pages: %x", task.DataIn)
			}

			tg.Execute(&task, l, inquiryVPD(0xb0, 255), nil, in)
			expect(t, &task, 0, 0)
			b0 := task.DataIn
			if len(b0) < 64 || b0[1] != 0xb0 || binary.BigEndian.Uint16(b0[2:]) != 0x3c {
				t.Fatalf("Block Limits: %x", b0)
			}
			if b0[4]&1 != 1 || b0[5] != maxCompareAndWrite || binary.BigEndian.Uint64(b0[36:]) != maxWriteSame {
				t.Errorf("Block Limits: WSNZ %d, MAXIMUM COMPARE AND WRITE LENGTH %d, MAXIMUM WRITE SAME LENGTH %d", b0[4]&1, b0[5], binary.BigEndian.Uint64(b0[36:]))
			}
			if g := binary.BigEndian.Uint16(b0[6:]); int(g) != pageSize/512 {
				t.Errorf("Block Limits: OPTIMAL TRANSFER LENGTH GRANULARITY %d, want a page, %d", g, pageSize/512)
			}
			unmap := [4]uint32{binary.BigEndian.Uint32(b0[20:]), binary.BigEndian.Uint32(b0[24:]), binary.BigEndian.Uint32(b0[28:]), binary.BigEndian.Uint32(b0[32:])}
			want := [4]uint32{}
			if c.thin {
				want = [4]uint32{maxUnmapBlocks, maxUnmapDescriptors, uint32(pageSize / 512), 1 << 31}
			}
			if unmap != want {
				t.Errorf("Block Limits: MAXIMUM UNMAP LBA COUNT, DESCRIPTOR COUNT, OPTIMAL UNMAP GRANULARITY, UGAVALID = %v, want %v", unmap, want)
			}
			// libiscsi's Inquiry.BlockLimits: a MAXIMUM UNMAP LBA COUNT
			// other than "no limit" is at most 1 Mi blocks.
			if c.thin && unmap[0] != 0xffffffff && unmap[0] > 1<<20 {
				t.Errorf("Block Limits: MAXIMUM UNMAP LBA COUNT %d, above 1 Mi blocks", unmap[0])
			}

			tg.Execute(&task, l, inquiryVPD(0xb2, 255), nil, in)
			expect(t, &task, 0, 0)
			b2 := task.DataIn
			if len(b2) < 8 || b2[1] != 0xb2 || binary.BigEndian.Uint16(b2[2:]) != 4 {
				t.Fatalf("Logical Block Provisioning: %x", b2)
			}
			flags, ptype := b2[5], b2[6]&0x07
			wantFlags, wantType := byte(0), byte(0)
			if c.thin {
				wantFlags, wantType = 0x80|0x40|0x20|0x04, 2 // LBPU LBPWS LBPWS10 LBPRZ; thin
			}
			if flags != wantFlags || ptype != wantType {
				t.Errorf("Logical Block Provisioning: flags %#x type %d, want %#x and %d", flags, ptype, wantFlags, wantType)
			}

			// UNMAP is there exactly when the LU says so.
			tg.Execute(&task, l, unmapCDB(0, 24), unmapList([2]uint64{0, 1}), nil)
			switch {
			case c.store.ReadOnly():
				expect(t, &task, keyDataProtect, ascWriteProtected)
			case c.thin:
				expect(t, &task, 0, 0)
			default:
				expect(t, &task, keyIllegalRequest, ascInvalidOpcode)
			}
		})
	}
}

// TestReadCapacity16: the allocation length bounds the data; other
// service actions of SERVICE ACTION IN are refused (gotgt answers GOOD).
func TestReadCapacity16(t *testing.T) {
	tg, _ := targetOfKinds(t, lbas*512, 0)
	cases := []struct {
		name string
		cdb  []byte
		n    int
		key  byte
		asc  uint16
	}{
		{name: "32 octets", cdb: readCapacity16CDB(32), n: 32},
		{name: "allocation length 12", cdb: readCapacity16CDB(12), n: 12},
		{name: "allocation length beyond the buffer", cdb: readCapacity16CDB(4096), n: 32},
		{name: "LBA without PMI", cdb: func() []byte { c := readCapacity16CDB(32); c[9] = 1; return c }(), key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "unknown service action", cdb: func() []byte { c := readCapacity16CDB(32); c[1] = 0x1f; return c }(), key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var task Task
			tg.Execute(&task, lun(t, 0), c.cdb, nil, make([]byte, 64))
			expect(t, &task, c.key, c.asc)
			if c.key == 0 && (len(task.DataIn) < c.n || binary.BigEndian.Uint64(task.DataIn) != lbas-1) {
				t.Fatalf("data %x, want %d octets", task.DataIn, c.n)
			}
		})
	}
}

// TestORWrite16: gotgt implements ORWRITE(16) as a WRITE; it is refused
// cleanly.
func TestORWrite16(t *testing.T) {
	tg, ss := targetOfKinds(t, lbas*512, 0)
	for _, n := range []uint16{0, 7} { // a LU, and no LU
		var task Task
		tg.Execute(&task, lun(t, n), cdb16(byte(api.ORWRITE_16), 0, 0, 1), bytes.Repeat([]byte{0xaa}, 512), make([]byte, 16))
		want := uint16(ascInvalidOpcode)
		if n == 7 {
			want = 0x2500 // LOGICAL UNIT NOT SUPPORTED
		}
		k, a := senseKey(task.Sense)
		if task.Status != api.SAM_STAT_CHECK_CONDITION || k != keyIllegalRequest || a != want || len(task.Sense) < 18 {
			t.Errorf("ORWRITE(16) on LUN %d: status %#x sense %x", n, task.Status, task.Sense)
		}
	}
	if !allOctets(ss[thinLU].Mapping().Bytes(), 0) {
		t.Error("ORWRITE(16) changed the LU")
	}
}

// designators parses the designation descriptors of a Device
// Identification page into "association/type" -> designator.
func designators(t *testing.T, p []byte) map[string][]byte {
	t.Helper()
	if len(p) < 4 || p[1] != 0x83 || int(binary.BigEndian.Uint16(p[2:]))+4 != len(p) {
		t.Fatalf("not a whole Device Identification page: %x", p)
	}
	ds := map[string][]byte{}
	for d := p[4:]; len(d) > 0; {
		if len(d) < 4 || len(d) < 4+int(d[3]) {
			t.Fatalf("truncated designation descriptor %x", d)
		}
		kind := [...]string{"lu", "port", "device", "?"}[d[1]>>4&3] + "/" + [...]string{"vendor", "t10", "eui64", "naa", "relport", "tpg", "lugroup", "md5", "name"}[d[1]&0x0f]
		ds[kind] = d[4 : 4+d[3]]
		d = d[4+d[3]:]
	}
	return ds
}

// TestDeviceIdentification: VPD page 0x83 must not panic, for any LU of a
// target of several and for an absent LUN, and names each LU apart.
func TestDeviceIdentification(t *testing.T) {
	const name = "iqn.2026-11.io.ddpstore:test"
	for _, withLUN0 := range []bool{true, false} {
		ss := newStores(t, 1<<20, 0)
		luns := map[uint16]*LU{}
		for i, n := range []uint16{0, 1, 5} {
			if n == 0 && !withLUN0 {
				continue
			}
			l, err := New(uint64(100+i), ss[i])
			if err != nil {
				t.Fatal(err)
			}
			luns[n] = l
		}
		tg, err := NewTarget(name, luns)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]uint16{}
		for _, n := range []uint16{0, 1, 5, 9, 255} {
			present := luns[n] != nil
			for _, page := range []byte{0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2} {
				var task Task
				tg.Execute(&task, lun(t, n), inquiryVPD(page, 255), nil, make([]byte, 255))
				if task.Status != api.SAM_STAT_GOOD || len(task.DataIn) < 4 || task.DataIn[1] != page {
					t.Fatalf("LUN %d (LUN 0 %v) VPD page %#x: status %#x sense %x data %x", n, withLUN0, page, task.Status, task.Sense, task.DataIn)
				}
				if q := task.DataIn[0] >> 5; (q == 0) != present {
					t.Errorf("LUN %d VPD page %#x: peripheral qualifier %d", n, page, q)
				}
				if page != 0x83 {
					continue
				}
				ds := designators(t, task.DataIn[:4+binary.BigEndian.Uint16(task.DataIn[2:])])
				naa, ok := ds["lu/naa"]
				if ok != present {
					t.Fatalf("LUN %d: LU designator %x, want one %v", n, naa, present)
				}
				if ok {
					if len(naa) != 8 || naa[0]>>4 != 3 {
						t.Errorf("LUN %d: NAA designator %x", n, naa)
					}
					if m, dup := seen[string(naa)]; dup {
						t.Errorf("LUNs %d and %d have the same NAA designator %x", m, n, naa)
					}
					seen[string(naa)] = n
				}
				if got := ds["port/relport"]; !bytes.Equal(got, []byte{0, 0, 0, 1}) {
					t.Errorf("LUN %d: relative target port %x", n, got)
				}
				if got := ds["port/tpg"]; !bytes.Equal(got, []byte{0, 0, 0, 1}) {
					t.Errorf("LUN %d: target port group %x", n, got)
				}
				if got := ds["port/name"]; string(bytes.TrimRight(got, "\x00")) != name+",t,0x0001" || len(got)%4 != 0 {
					t.Errorf("LUN %d: target port name %q", n, got)
				}
				if got := ds["device/name"]; string(bytes.TrimRight(got, "\x00")) != name || len(got)%4 != 0 {
					t.Errorf("LUN %d: target device name %q", n, got)
				}
			}
		}
	}
}

// TestInquiry: allocation lengths, pages we do not build, standard data.
func TestInquiry(t *testing.T) {
	tg, _ := targetOfKinds(t, 1<<20, 0)
	cases := []struct {
		name string
		lun  uint16
		cdb  []byte
		in   int
		n    int // octets of data-in
		key  byte
		asc  uint16
	}{
		{name: "0x83 cut to 4 octets", cdb: inquiryVPD(0x83, 4), in: 255, n: 4},
		{name: "0xb0 into a short buffer", cdb: inquiryVPD(0xb0, 255), in: 10, n: 10},
		{name: "0x83 allocation length 0", cdb: inquiryVPD(0x83, 0), in: 255, n: 0},
		{name: "0x80", cdb: inquiryVPD(0x80, 255), in: 255, n: 40},
		{name: "0xb1", cdb: inquiryVPD(0xb1, 255), in: 255, n: 64},
		{name: "unsupported page", cdb: inquiryVPD(0x99, 255), in: 255, key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "unsupported page, absent LUN", lun: 9, cdb: inquiryVPD(0x99, 255), in: 255, key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "standard data", cdb: []byte{byte(api.INQUIRY), 0, 0, 0, 96, 0}, in: 96, n: 96},
		{name: "standard data, absent LUN", lun: 9, cdb: []byte{byte(api.INQUIRY), 0, 0, 0, 96, 0}, in: 96, n: 96},
		{name: "page code without EVPD", cdb: []byte{byte(api.INQUIRY), 0, 0x80, 0, 255, 0}, in: 255, key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "CMDDT", cdb: []byte{byte(api.INQUIRY), 0x02, 0, 0, 255, 0}, in: 255, key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
		{name: "CMDDT with EVPD", cdb: []byte{byte(api.INQUIRY), 0x03, 0, 0, 255, 0}, in: 255, key: keyIllegalRequest, asc: ascInvalidFieldInCDB},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var task Task
			in := make([]byte, c.in)
			tg.Execute(&task, lun(t, c.lun), c.cdb, nil, in)
			expect(t, &task, c.key, c.asc)
			if c.key == 0 && len(task.DataIn) != c.n {
				t.Fatalf("%d octets of data-in, want %d", len(task.DataIn), c.n)
			}
		})
	}
}

// TestInquiryLengths: the standard data and every VPD page the LU lists
// carry their full length (ADDITIONAL LENGTH, PAGE LENGTH) whatever the
// allocation length, and are cut to it (SPC-4 4.2.5.6), also into a
// buffer longer than the allocation length.
func TestInquiryLengths(t *testing.T) {
	tg, _ := targetOfKinds(t, 1<<20, 0)
	for _, n := range []uint16{0, 9} { // a LU, and no LU
		var task Task
		tg.Execute(&task, lun(t, n), inquiryVPD(0x00, 255), nil, make([]byte, 255))
		expect(t, &task, 0, 0)
		list := task.DataIn[4:]
		if !slices.IsSorted(list) || len(list) != int(task.DataIn[3]) {
			t.Fatalf("LUN %d: Supported VPD Pages %x", n, task.DataIn)
		}
		pages := []int{-1} // the standard data
		for _, p := range list {
			pages = append(pages, int(p))
		}
		for _, p := range pages {
			cdb := func(alloc uint16) []byte {
				if p < 0 {
					return []byte{byte(api.INQUIRY), 0, 0, byte(alloc >> 8), byte(alloc), 0}
				}
				return inquiryVPD(byte(p), alloc)
			}
			length := func(d []byte) int { // the length the data says it has
				if p < 0 {
					return int(d[4]) + 5
				}
				return int(binary.BigEndian.Uint16(d[2:])) + 4
			}
			tg.Execute(&task, lun(t, n), cdb(1024), nil, make([]byte, 1024))
			expect(t, &task, 0, 0)
			full := slices.Clone(task.DataIn)
			if len(full) < 5 || length(full) != len(full) {
				t.Fatalf("LUN %d page %d: %d octets say they are %d: %x", n, p, len(full), length(full), full)
			}
			for _, alloc := range []uint16{0, 1, 3, 4, 5, 8, 36, 63, 64, 65, 95, 96, 255, 256, 511, 512} {
				tg.Execute(&task, lun(t, n), cdb(alloc), nil, make([]byte, 600))
				expect(t, &task, 0, 0)
				if want := full[:min(int(alloc), len(full))]; !bytes.Equal(task.DataIn, want) {
					t.Errorf("LUN %d page %d allocation length %d: %x, want %x", n, p, alloc, task.DataIn, want)
				}
			}
		}
	}
}

// TestStandardInquiry: the standard data claims SPC-4 and, in its version
// descriptors, SBC-3, whose pages the LU serves; it is SPC-2 or later
// data (RESPONSE DATA FORMAT 2, no AERC or TRMTSK) in ASCII.
func TestStandardInquiry(t *testing.T) {
	tg, _ := targetOfKinds(t, 1<<20, 0)
	var task Task
	tg.Execute(&task, lun(t, 0), []byte{byte(api.INQUIRY), 0, 0, 1, 4, 0}, nil, make([]byte, 260))
	expect(t, &task, 0, 0)
	d := task.DataIn
	if len(d) != 96 || d[4] != 91 {
		t.Fatalf("%d octets, ADDITIONAL LENGTH %d: %x", len(d), d[4], d)
	}
	if d[0] != 0 || d[2] != 0x06 || d[3]&0x0f != 2 || d[3]&0xc0 != 0 || d[3]&0x10 == 0 || d[7]&0x02 == 0 {
		t.Errorf("peripheral %#x VERSION %#x flags %#x %#x", d[0], d[2], d[3], d[7])
	}
	if d[5]&0x30 != 0 {
		t.Errorf("TPGS %d without REPORT TARGET PORT GROUPS", d[5]>>4&3)
	}
	for i, c := range d[8:36] {
		if c < 0x20 || c > 0x7e {
			t.Fatalf("octet %d of vendor, product and revision is %#x", 8+i, c)
		}
	}
	claims := map[uint16]bool{}
	for i := 58; i < 74; i += 2 {
		claims[binary.BigEndian.Uint16(d[i:])] = true
	}
	for _, v := range []uint16{0x0460, 0x04c0, 0x0960} { // SPC-4, SBC-3, iSCSI
		if !claims[v] {
			t.Errorf("version descriptor %#04x missing: %x", v, d[58:74])
		}
	}
}

// TestBlockDeviceCharacteristics: VPD page 0xB1 (SBC-3 6.5.2) says the
// medium does not rotate and reports no form factor.
func TestBlockDeviceCharacteristics(t *testing.T) {
	tg, _ := targetOfKinds(t, 1<<20, 0)
	var task Task
	tg.Execute(&task, lun(t, 0), inquiryVPD(0xb1, 255), nil, make([]byte, 255))
	expect(t, &task, 0, 0)
	d := task.DataIn
	if len(d) != 64 || d[0] != 0 || d[1] != 0xb1 || binary.BigEndian.Uint16(d[2:]) != 0x3c {
		t.Fatalf("page %x", d)
	}
	if rate, ff := binary.BigEndian.Uint16(d[4:]), d[7]&0x0f; rate != 1 || ff != 0 {
		t.Errorf("MEDIUM ROTATION RATE %#04x NOMINAL FORM FACTOR %d, want 1 and 0", rate, ff)
	}
}

func getLBAStatusCDB(lba uint64, alloc uint32) []byte {
	c := make([]byte, 16)
	c[0], c[1] = byte(api.SERVICE_ACTION_IN), byte(api.SAI_GET_LBA_STATUS)
	binary.BigEndian.PutUint64(c[2:], lba)
	binary.BigEndian.PutUint32(c[10:], alloc)
	return c
}

// TestGetLBAStatus: GET LBA STATUS (SBC-3) refuses a starting LBA past the
// last one and otherwise answers one descriptor that starts at the
// starting LBA and runs to the end of the LU (gotgt answers GOOD with no
// data for any LBA).
func TestGetLBAStatus(t *testing.T) {
	tg, _ := targetOfKinds(t, lbas*512, 0)
	for _, k := range []storeKind{thinLU, fullLU, readOnlyLU} {
		for _, lba := range []uint64{0, 1, 7, 256, lbas - 256, lbas - 1} {
			var task Task
			tg.Execute(&task, lun(t, uint16(k)), getLBAStatusCDB(lba, 24), nil, make([]byte, 64))
			expect(t, &task, 0, 0)
			d := task.DataIn
			if len(d) != 24 || binary.BigEndian.Uint32(d) != 20 {
				t.Fatalf("LUN %d LBA %d: %x", k, lba, d)
			}
			if start, n, status := binary.BigEndian.Uint64(d[8:]), binary.BigEndian.Uint32(d[16:]), d[20]&0x0f; start != lba || uint64(n) != lbas-lba || status != 0 {
				t.Errorf("LUN %d LBA %d: descriptor of LBA %d, %d blocks, status %d", k, lba, start, n, status)
			}
		}
	}
	var task Task
	for _, lba := range []uint64{lbas, lbas + 1, 1 << 63, 1<<64 - 1} {
		tg.Execute(&task, lun(t, 0), getLBAStatusCDB(lba, 24), nil, make([]byte, 64))
		expect(t, &task, keyIllegalRequest, ascLBAOutOfRange)
	}
	for _, alloc := range []uint32{0, 4, 8, 16, 23} {
		tg.Execute(&task, lun(t, 0), getLBAStatusCDB(5, alloc), nil, make([]byte, 64))
		expect(t, &task, 0, 0)
		if len(task.DataIn) != int(alloc) || alloc >= 4 && binary.BigEndian.Uint32(task.DataIn) != 20 {
			t.Errorf("allocation length %d: %x", alloc, task.DataIn)
		}
	}
}

// TestGetLBAStatusAfterUnmap: the second loop of libiscsi's
// GetLBAStatus.UnmapSingle unmaps blocks [0, i) and asks GET LBA STATUS
// of LBA i+1 for a descriptor that starts at i + 2^LBPPBE: only
// consistent with SBC-3's "the first descriptor contains the starting
// LBA" for one logical block per physical block, which READ CAPACITY(16)
// reports (the stores are byte-addressed; UNMAP of one block zeroes it).
func TestGetLBAStatusAfterUnmap(t *testing.T) {
	tg, _ := targetOfKinds(t, lbas*512, bg)
	l := lun(t, uint16(thinLU))
	var task Task
	in := make([]byte, 64)
	tg.Execute(&task, l, readCapacity16CDB(32), nil, in)
	expect(t, &task, 0, 0)
	lbppb := uint64(1) << (task.DataIn[13] & 0x0f)
	for i := lbppb; i+lbppb <= 256; i += lbppb {
		tg.Execute(&task, l, unmapCDB(0, 24), unmapList([2]uint64{0, i}), nil)
		expect(t, &task, 0, 0)
		if !allOctets(tg.LU(uint16(thinLU)).data[:i*512], 0) {
			t.Fatalf("unmapped blocks [0, %d) do not read zeros", i)
		}
		tg.Execute(&task, l, getLBAStatusCDB(i+1, 24), nil, in)
		expect(t, &task, 0, 0)
		if start := binary.BigEndian.Uint64(task.DataIn[8:]); start != i+lbppb {
			t.Fatalf("GET LBA STATUS of LBA %d after unmapping [0, %d): descriptor starts at %d, want %d", i+1, i, start, i+lbppb)
		}
	}
}
