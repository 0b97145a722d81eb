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
		{"PERSISTENT RESERVE IN, refused", rsocCDB(2, byte(api.PERSISTENT_RESERVE_IN), 0, 64), false, 0},
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
