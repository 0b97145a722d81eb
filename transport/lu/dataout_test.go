package lu

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/ddpstore/ddpstore/transport/scsi"
)

// TestDataOutLength: Execute tells the caller how many octets of data-out
// each CDB asks for, whatever the command's outcome, so the transport can
// report the residual against iSCSI's Expected Data Transfer Length.
func TestDataOutLength(t *testing.T) {
	with := func(c []byte, i int, v ...byte) []byte {
		c = slices.Clone(c)
		copy(c[i:], v)
		return c
	}
	write12 := func(op byte, n uint32) []byte {
		c := make([]byte, 12)
		c[0] = op
		binary.BigEndian.PutUint32(c[6:], n)
		return c
	}
	out := make([]byte, 777) // what the initiator sent, for the CDBs that do not say
	cases := []struct {
		name string
		lun  uint16
		cdb  []byte
		want uint32
	}{
		{name: "WRITE(6) of 3", cdb: []byte{scsi.Write6, 0, 0, 0, 3, 0}, want: 3 * 512},
		{name: "WRITE(6) of 0 is 256", cdb: []byte{scsi.Write6, 0, 0, 0, 0, 0}, want: 256 * 512},
		{name: "WRITE(10)", cdb: cdb10(scsi.Write10, 0, 4, 2), want: 1024},
		{name: "WRITE(10) of 0", cdb: cdb10(scsi.Write10, 0, 4, 0), want: 0},
		{name: "WRITE(10) past the end", cdb: cdb10(scsi.Write10, 0, lbas, 2), want: 1024},
		{name: "WRITE(10) with WRPROTECT", cdb: cdb10(scsi.Write10, 0x20, 4, 2), want: 1024},
		{name: "WRITE(10) to an absent LUN", lun: 9, cdb: cdb10(scsi.Write10, 0, 4, 2), want: 1024},
		{name: "WRITE(10) to a read-only LU", lun: uint16(readOnlyLU), cdb: cdb10(scsi.Write10, 0, 4, 2), want: 1024},
		{name: "WRITE(12)", cdb: write12(scsi.Write12, 5), want: 5 * 512},
		{name: "WRITE(16)", cdb: cdb16(scsi.Write16, 0, 0, 70000), want: 70000 * 512},
		{name: "WRITE(16) beyond 32 bits of octets", cdb: cdb16(scsi.Write16, 0, 0, 1<<23), want: 0xffffffff},
		{name: "WRITE AND VERIFY(10)", cdb: cdb10(scsi.WriteAndVerify10, 0x02, 4, 2), want: 1024},
		{name: "WRITE AND VERIFY(12)", cdb: write12(scsi.WriteAndVerify12, 3), want: 3 * 512},
		{name: "WRITE AND VERIFY(16)", cdb: cdb16(scsi.WriteAndVerify16, 0, 4, 1), want: 512},
		{name: "ORWRITE(16)", cdb: cdb16(scsi.OrWrite16, 0, 4, 2), want: 1024},
		{name: "COMPARE AND WRITE", cdb: caw(0, 4, 3), want: 2 * 3 * 512},
		{name: "WRITE SAME(10)", cdb: cdb10(scsi.WriteSame10, 0, 4, 100), want: 512},
		{name: "WRITE SAME(16)", cdb: cdb16(scsi.WriteSame16, 0x08, 4, 100), want: 512},
		{name: "WRITE SAME(16) NDOB", cdb: cdb16(scsi.WriteSame16, 0x01, 4, 100), want: 0},
		{name: "UNMAP", cdb: unmapCDB(0, 40), want: 40},
		{name: "MODE SELECT(6)", cdb: []byte{scsi.ModeSelect6, 0x10, 0, 0, 28, 0}, want: 28},
		{name: "MODE SELECT(10)", cdb: with(make([]byte, 10), 0, scsi.ModeSelect10, 0x10, 0, 0, 0, 0, 0, 1, 4), want: 260},
		{name: "VERIFY(10) without BYTCHK", cdb: cdb10(scsi.Verify10, 0, 4, 8), want: 0},
		{name: "VERIFY(10) BYTCHK 01b", cdb: cdb10(scsi.Verify10, 0x02, 4, 8), want: 8 * 512},
		{name: "VERIFY(10) BYTCHK 11b", cdb: cdb10(scsi.Verify10, 0x06, 4, 8), want: 512},
		{name: "VERIFY(10) BYTCHK 10b (reserved)", cdb: cdb10(scsi.Verify10, 0x04, 4, 8), want: uint32(len(out))},
		{name: "VERIFY(12) BYTCHK 01b", cdb: with(write12(scsi.Verify12, 3), 1, 0x02), want: 3 * 512},
		{name: "VERIFY(16) BYTCHK 01b", cdb: cdb16(scsi.Verify16, 0x02, 4, 5), want: 5 * 512},
		{name: "SEND DIAGNOSTIC", cdb: []byte{scsi.SendDiagnostic, 0x04, 0, 0, 16, 0}, want: 16},
		{name: "PERSISTENT RESERVE OUT", cdb: with(make([]byte, 10), 0, scsi.PersistentReserveOut, 0, 0, 0, 0, 0, 0, 0, 24), want: 24},
		{name: "RESERVE(10)", cdb: with(make([]byte, 10), 0, scsi.Reserve10, 0x10, 0, 0, 0, 0, 0, 0, 8), want: 8},
		{name: "RELEASE(10)", cdb: with(make([]byte, 10), 0, scsi.Release10, 0, 0, 0, 0, 0, 0, 0, 0), want: 0},
		{name: "FORMAT UNIT without FMTDATA", cdb: []byte{scsi.FormatUnit, 0, 0, 0, 0, 0}, want: 0},
		{name: "FORMAT UNIT with FMTDATA", cdb: []byte{scsi.FormatUnit, 0x10, 0, 0, 0, 0}, want: uint32(len(out))},
		{name: "READ(10)", cdb: cdb10(scsi.Read10, 0, 4, 2), want: 0},
		{name: "INQUIRY", cdb: inquiryVPD(0xb0, 64), want: 0},
		{name: "TEST UNIT READY", cdb: make([]byte, 6), want: 0},
		{name: "SYNCHRONIZE CACHE(10)", cdb: cdb10(scsi.SynchronizeCache10, 0, 0, 0), want: 0},
		{name: "READ CAPACITY(16)", cdb: readCapacity16CDB(32), want: 0},
		{name: "unknown opcode", cdb: []byte{0xc7, 0, 0, 0, 0, 0}, want: uint32(len(out))},
		{name: "CDB too long", cdb: make([]byte, 17), want: uint32(len(out))},
	}
	tg, _ := targetOfKinds(t, lbas*512, bg)
	var task Task
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			task.DataOutLength = 12345
			tg.Execute(&task, lun(t, c.lun), c.cdb, slices.Clone(out), make([]byte, 512))
			if task.DataOutLength != c.want {
				t.Fatalf("DataOutLength %d, want %d (status %#x)", task.DataOutLength, c.want, task.Status)
			}
		})
	}
}

// TestWriteResiduals: a WRITE or WRITE AND VERIFY whose data-out (what
// the initiator sent: iSCSI's Expected Data Transfer Length) differs
// from the CDB's TRANSFER LENGTH writes the lesser of the two, as LIO
// does and libiscsi's iSCSIResiduals tests expect: a longer data-out's
// excess is ignored; of a shorter one the whole blocks it holds are
// written (none, GOOD, for an empty one), and one that ends inside a
// block is refused with INVALID FIELD IN COMMAND INFORMATION UNIT, as
// the part of a block cannot be written. DataOutLength is the CDB's
// length either way.
func TestWriteResiduals(t *testing.T) {
	const at = 4
	ops := []struct {
		name string
		cdb  func(n uint32) []byte
		fua  bool // WRITE AND VERIFY: what it writes is synced
	}{
		{"WRITE(6)", func(n uint32) []byte { return []byte{scsi.Write6, 0, 0, at, byte(n), 0} }, false},
		{"WRITE(10)", func(n uint32) []byte { return cdb10(scsi.Write10, 0, at, uint16(n)) }, false},
		{"WRITE(12)", func(n uint32) []byte {
			c := make([]byte, 12)
			c[0], c[5] = scsi.Write12, at
			binary.BigEndian.PutUint32(c[6:], n)
			return c
		}, false},
		{"WRITE(16)", func(n uint32) []byte { return cdb16(scsi.Write16, 0, at, n) }, false},
		{"WRITE(16) FUA", func(n uint32) []byte { return cdb16(scsi.Write16, 0x08, at, n) }, true},
		{"WRITE AND VERIFY(10)", func(n uint32) []byte { return cdb10(scsi.WriteAndVerify10, 0, at, uint16(n)) }, true},
		{"WRITE AND VERIFY(12)", func(n uint32) []byte {
			c := make([]byte, 12)
			c[0], c[5] = scsi.WriteAndVerify12, at
			binary.BigEndian.PutUint32(c[6:], n)
			return c
		}, true},
		{"WRITE AND VERIFY(16)", func(n uint32) []byte { return cdb16(scsi.WriteAndVerify16, 0, at, n) }, true},
	}
	cases := []struct {
		name    string
		blocks  uint32 // the CDB's TRANSFER LENGTH
		edtl    int    // octets of data-out (-1: none at all)
		key     byte
		asc     uint16
		written uint64 // blocks written from LBA at
	}{
		{name: "no data-out for 1 block", blocks: 1, edtl: -1},
		{name: "empty data-out for 1 block", blocks: 1, edtl: 0},
		{name: "10000 octets for 1 block", blocks: 1, edtl: 10000, written: 1},
		{name: "2 blocks for 1", blocks: 1, edtl: 1024, written: 1},
		{name: "1 block for 2", blocks: 2, edtl: 512, written: 1},
		{name: "2 blocks for 5", blocks: 5, edtl: 1024, written: 2},
		{name: "exact", blocks: 3, edtl: 3 * 512, written: 3},
		{name: "200 octets for 1 block", blocks: 1, edtl: 200, key: keyIllegalRequest, asc: scsi.ASCInvalidFieldInCommandIU},
		{name: "1.5 blocks for 3", blocks: 3, edtl: 768, key: keyIllegalRequest, asc: scsi.ASCInvalidFieldInCommandIU},
	}
	for _, op := range ops {
		for _, c := range cases {
			t.Run(op.name+"/"+c.name, func(t *testing.T) {
				tg, ss := targetOfKinds(t, lbas*512, bg)
				var out []byte
				if c.edtl >= 0 {
					out = bytes.Repeat([]byte{'b'}, c.edtl)
				}
				var task Task
				tg.Execute(&task, lun(t, 0), op.cdb(c.blocks), out, nil)
				expect(t, &task, c.key, c.asc)
				if task.DataOutLength != c.blocks*512 {
					t.Errorf("DataOutLength %d, want %d", task.DataOutLength, c.blocks*512)
				}
				l := tg.LU(0)
				if !blocksAre(l, at, c.written, block('b')) {
					t.Errorf("blocks [%d, %d) were not written", at, at+c.written)
				}
				if !allOctets(l.data[:at*512], bg) || !allOctets(l.data[(at+c.written)*512:], bg) {
					t.Errorf("octets outside blocks [%d, %d) changed", at, at+c.written)
				}
				var syncs [][2]int64
				if op.fua && c.written > 0 {
					syncs = [][2]int64{{at * 512, int64(c.written) * 512}}
				}
				if !slices.Equal(ss[0].syncs, syncs) {
					t.Errorf("synced %v, want %v", ss[0].syncs, syncs)
				}
			})
		}
	}
}
