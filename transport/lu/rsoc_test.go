package lu

import (
	"encoding/binary"
	"testing"

	"github.com/gostor/gotgt/pkg/api"
	gscsi "github.com/gostor/gotgt/pkg/scsi"
)

func rsocCDB(options byte, op byte, sa uint16, alloc uint32) []byte {
	c := make([]byte, 12)
	c[0], c[1], c[2], c[3] = byte(api.MAINT_PROTOCOL_IN), 0x0c, options, op
	binary.BigEndian.PutUint16(c[4:], sa)
	binary.BigEndian.PutUint32(c[6:], alloc)
	return c
}

// TestReportSupportedOperationCodesOne: the one-command reports of REPORT
// SUPPORTED OPERATION CODES that Linux's sd sends at every scan (INQUIRY,
// WRITE SAME(16), WRITE SAME(10)) are answered with the SUPPORT field, as
// SPC-4 6.35 says, and not with CHECK CONDITION as gotgt did.
func TestReportSupportedOperationCodesOne(t *testing.T) {
	tg := targetOf(t, newStores(t, 1<<20, 0)[thinLU])
	l := lun(t, 0)
	in := make([]byte, 64)
	cases := []struct {
		name      string
		cdb       []byte
		supported bool
		size      int
	}{
		{"INQUIRY", rsocCDB(1, byte(api.INQUIRY), 0, 64), true, 6},
		{"WRITE SAME(16)", rsocCDB(1, byte(api.WRITE_SAME_16), 0, 64), true, 16},
		{"WRITE SAME(10)", rsocCDB(1, byte(api.WRITE_SAME), 0, 64), true, 10},
		{"READ(12)", rsocCDB(1, byte(api.READ_12), 0, 64), true, 12},
		{"unassigned opcode 0x02", rsocCDB(1, 0x02, 0, 64), false, 0},
		{"PERSISTENT RESERVE IN, READ KEYS", rsocCDB(2, byte(api.PERSISTENT_RESERVE_IN), 0, 64), true, 10},
		{"PERSISTENT RESERVE OUT, REGISTER AND MOVE, refused", rsocCDB(2, byte(api.PERSISTENT_RESERVE_OUT), 7, 64), false, 0},
		{"READ CAPACITY(16)", rsocCDB(2, byte(api.SERVICE_ACTION_IN), uint16(api.SAI_READ_CAPACITY_16), 64), true, 16},
		{"REPORT SUPPORTED OPERATION CODES", rsocCDB(2, byte(api.MAINT_PROTOCOL_IN), 0x0c, 64), true, 12},
	}
	for _, c := range cases {
		var task Task
		tg.Execute(&task, l, c.cdb, nil, in)
		expect(t, &task, 0, 0)
		d := task.DataIn
		if len(d) < 4 {
			t.Fatalf("%s: %x", c.name, d)
		}
		support, size := d[1]&0x07, int(binary.BigEndian.Uint16(d[2:]))
		want := byte(1)
		if c.supported {
			want = 3
		}
		if support != want || size != c.size || len(d) != 4+size {
			t.Errorf("%s: SUPPORT %03b, CDB SIZE %d, %d octets; want %03b, %d", c.name, support, size, len(d), want, c.size)
		}
		if c.supported && d[4] != c.cdb[3] {
			t.Errorf("%s: CDB USAGE DATA starts %#x, want the opcode", c.name, d[4])
		}
	}

	// With RCTD a command timeouts descriptor follows; a short allocation
	// length truncates.
	var task Task
	cdb := rsocCDB(1, byte(api.INQUIRY), 0, 64)
	cdb[2] |= 0x80
	tg.Execute(&task, l, cdb, nil, in)
	expect(t, &task, 0, 0)
	if d := task.DataIn; len(d) != 4+6+12 || d[1] != 0x83 || binary.BigEndian.Uint16(d[10:]) != 0x0a {
		t.Errorf("RCTD: %x", d)
	}
	tg.Execute(&task, l, rsocCDB(1, byte(api.INQUIRY), 0, 2), nil, in)
	expect(t, &task, 0, 0)
	if len(task.DataIn) != 2 {
		t.Errorf("allocation length 2: %d octets", len(task.DataIn))
	}

	// Asking without a service action about a command that has them, or
	// with one about a command that has none, is an invalid field.
	for _, cdb := range [][]byte{
		rsocCDB(1, byte(api.SERVICE_ACTION_IN), 0, 64),
		rsocCDB(2, byte(api.INQUIRY), 1, 64),
		rsocCDB(5, byte(api.INQUIRY), 0, 64),
	} {
		tg.Execute(&task, l, cdb, nil, in)
		expect(t, &task, gscsi.ILLEGAL_REQUEST, uint16(gscsi.ASC_INVALID_FIELD_IN_CDB))
	}
}

// TestReportSupportedOperationCodesAll: the report of all commands (SPC-4
// 6.35.2) lists every command the LU serves, each descriptor with a
// timeouts descriptor exactly when RCTD asks for one (gotgt's listed 9
// commands and wrote the timeouts descriptor's length into the header),
// SERVACTV exactly for commands with service actions, and agrees with the
// one-command reports.
func TestReportSupportedOperationCodesAll(t *testing.T) {
	tg := targetOf(t, newStores(t, 1<<20, 0)[thinLU])
	l := lun(t, 0)
	for _, rctd := range []bool{false, true} {
		cdb := rsocCDB(0, 0, 0, 65535)
		size := 8
		if rctd {
			cdb[2] |= 0x80
			size = 20
		}
		var task Task
		tg.Execute(&task, l, cdb, nil, make([]byte, 65535))
		expect(t, &task, 0, 0)
		d := task.DataIn
		if len(d) < 4 || int(binary.BigEndian.Uint32(d))+4 != len(d) || (len(d)-4)%size != 0 {
			t.Fatalf("RCTD %v: %d octets, COMMAND DATA LENGTH %d", rctd, len(d), binary.BigEndian.Uint32(d))
		}
		seen := map[[2]int]bool{}
		prev := -1
		for i := 4; i < len(d); i += size {
			c := d[i : i+size]
			op, sa, servactv, ctdp := c[0], binary.BigEndian.Uint16(c[2:]), c[5]&0x01 != 0, c[5]&0x02 != 0
			if ctdp != rctd || rctd && binary.BigEndian.Uint16(c[8:]) != 0x0a {
				t.Errorf("RCTD %v: opcode %#x: CTDP %v, timeouts descriptor %x", rctd, op, ctdp, c[8:])
			}
			if !servactv && sa != 0 {
				t.Errorf("opcode %#x: SERVICE ACTION %#x without SERVACTV", op, sa)
			}
			if key := int(op)<<16 | int(sa); key <= prev {
				t.Errorf("opcode %#x service action %#x out of order", op, sa)
			} else {
				prev = key
			}
			seen[[2]int{int(op), int(sa)}] = true
			if n := int(binary.BigEndian.Uint16(c[6:])); n != cdbSize(op) {
				t.Errorf("opcode %#x: CDB LENGTH %d", op, n)
			}
			// The one-command report agrees.
			opts := byte(1)
			if servactv {
				opts = 2
			}
			tg.Execute(&task, l, rsocCDB(opts, op, sa, 64), nil, make([]byte, 64))
			expect(t, &task, 0, 0)
			if task.DataIn[1]&0x07 != 3 {
				t.Errorf("opcode %#x service action %#x listed but its one-command report says SUPPORT %03b", op, sa, task.DataIn[1]&0x07)
			}
		}
		for _, want := range [][2]int{
			{int(api.TEST_UNIT_READY), 0}, {int(api.INQUIRY), 0}, {int(api.READ_10), 0}, {int(api.WRITE_16), 0},
			{int(api.COMPARE_AND_WRITE), 0}, {int(api.WRITE_SAME_16), 0}, {int(api.UNMAP), 0}, {int(api.SYNCHRONIZE_CACHE_16), 0},
			{int(api.SERVICE_ACTION_IN), int(api.SAI_READ_CAPACITY_16)}, {int(api.SERVICE_ACTION_IN), int(api.SAI_GET_LBA_STATUS)},
			{int(api.MAINT_PROTOCOL_IN), 0x0c}, {int(api.PERSISTENT_RESERVE_IN), 3}, {int(api.PERSISTENT_RESERVE_OUT), 6},
		} {
			if !seen[want] {
				t.Errorf("RCTD %v: opcode %#x service action %#x not listed", rctd, want[0], want[1])
			}
		}
		for _, absent := range [][2]int{{int(api.ORWRITE_16), 0}, {0x02, 0}, {int(api.PERSISTENT_RESERVE_OUT), 7}} {
			if seen[absent] {
				t.Errorf("opcode %#x service action %d listed", absent[0], absent[1])
			}
		}

		// The allocation length cuts the data; COMMAND DATA LENGTH stays.
		full := binary.BigEndian.Uint32(d)
		binary.BigEndian.PutUint32(cdb[6:], 30)
		tg.Execute(&task, l, cdb, nil, make([]byte, 1024))
		expect(t, &task, 0, 0)
		if len(task.DataIn) != 30 || binary.BigEndian.Uint32(task.DataIn) != full {
			t.Errorf("allocation length 30: %x", task.DataIn)
		}
	}
}
