package lu

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/gostor/gotgt/pkg/api"
)

func rtpgCDB(format byte, alloc uint32) []byte {
	c := []byte{0xa3, format<<5 | serviceActionRTPG, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(c[6:], alloc)
	return c
}

func inquiryData(t *testing.T, tg *Target, evpd, page byte) []byte {
	t.Helper()
	var task Task
	tg.Execute(&task, lun(t, 0), []byte{byte(api.INQUIRY), evpd, page, 1, 4, 0}, nil, make([]byte, 260))
	expect(t, &task, 0, 0)
	return task.DataIn
}

// rsocLists reports whether REPORT SUPPORTED OPERATION CODES lists
// REPORT TARGET PORT GROUPS, in the one-command and the all-commands form.
func rsocLists(t *testing.T, tg *Target) (one, all bool) {
	t.Helper()
	var task Task
	tg.Execute(&task, lun(t, 0), rsocCDB(2, 0xa3, serviceActionRTPG, 64), nil, make([]byte, 64))
	expect(t, &task, 0, 0)
	one = task.DataIn[1]&0x07 == 3
	tg.Execute(&task, lun(t, 0), rsocCDB(0, 0, 0, 8192), nil, make([]byte, 8192))
	expect(t, &task, 0, 0)
	for d := task.DataIn[4:]; len(d) >= 8; d = d[8:] {
		if d[0] == 0xa3 && binary.BigEndian.Uint16(d[2:]) == serviceActionRTPG {
			all = true
		}
	}
	return one, all
}

// TestALUAOff: without port groups the target claims no ALUA and refuses
// REPORT TARGET PORT GROUPS, as SPC-4 6.6.2 requires of TPGS 00b.
func TestALUAOff(t *testing.T) {
	tg, _ := targetOfKinds(t, lbas*512, 0)
	if d := inquiryData(t, tg, 0, 0); d[5]&0x30 != 0 {
		t.Errorf("TPGS %d", d[5]>>4&3)
	}
	var task Task
	tg.Execute(&task, lun(t, 0), rtpgCDB(0, 256), nil, make([]byte, 256))
	expect(t, &task, 0x05, 0x2400)
	if one, all := rsocLists(t, tg); one || all {
		t.Errorf("REPORT SUPPORTED OPERATION CODES lists REPORT TARGET PORT GROUPS: %v %v", one, all)
	}
}

// TestALUA: a gateway in group 2 of two reports both groups with their
// states, its own port in INQUIRY's device identification, TPGS 01b; in
// the standby and unavailable states it refuses media access with the
// NOT READY codes of SPC-4 and keeps answering what finds the paths.
func TestALUA(t *testing.T) {
	tg, _ := targetOfKinds(t, lbas*512, 0)
	if err := tg.SetPortGroups(2, []PortGroup{{ID: 2, State: ActiveNonOptimized}, {ID: 1, State: ActiveOptimized}}); err != nil {
		t.Fatal(err)
	}
	if d := inquiryData(t, tg, 0, 0); d[5]&0x30 != 0x10 {
		t.Errorf("TPGS %d, want 1 (implicit)", d[5]>>4&3)
	}
	p := inquiryData(t, tg, 1, 0x83)
	ds := designators(t, p[:4+binary.BigEndian.Uint16(p[2:])])
	if !bytes.Equal(ds["port/relport"], []byte{0, 0, 0, 2}) || !bytes.Equal(ds["port/tpg"], []byte{0, 0, 0, 2}) {
		t.Errorf("relative port %x, group %x: want 2 and 2", ds["port/relport"], ds["port/tpg"])
	}
	if one, all := rsocLists(t, tg); !one || !all {
		t.Errorf("REPORT SUPPORTED OPERATION CODES does not list REPORT TARGET PORT GROUPS: %v %v", one, all)
	}
	var task Task
	tg.Execute(&task, lun(t, 0), rtpgCDB(0, 256), nil, make([]byte, 256))
	expect(t, &task, 0, 0)
	want := []byte{0, 0, 0, 24,
		0x00, 0x0f, 0, 1, 0, 0x02, 0, 1, 0, 0, 0, 1, // group 1, active/optimized, port 1
		0x01, 0x0f, 0, 2, 0, 0x02, 0, 1, 0, 0, 0, 2} // group 2, active/non-optimized, port 2
	if !bytes.Equal(task.DataIn, want) {
		t.Errorf("REPORT TARGET PORT GROUPS\n got %x\nwant %x", task.DataIn, want)
	}
	tg.Execute(&task, lun(t, 0), rtpgCDB(1, 256), nil, make([]byte, 256))
	expect(t, &task, 0, 0)
	if d := task.DataIn; len(d) != 8+24 || binary.BigEndian.Uint32(d) != 28 || d[4] != 0x10 || !bytes.Equal(d[8:], want[4:]) {
		t.Errorf("extended header: %x", d)
	}
	tg.Execute(&task, lun(t, 0), rtpgCDB(0, 10), nil, make([]byte, 256))
	expect(t, &task, 0, 0)
	if len(task.DataIn) != 10 || binary.BigEndian.Uint32(task.DataIn) != 24 {
		t.Errorf("ALLOCATION LENGTH 10: %x", task.DataIn)
	}
	tg.Execute(&task, lun(t, 0), rtpgCDB(2, 256), nil, make([]byte, 256))
	expect(t, &task, 0x05, 0x2400)
	for _, c := range []struct {
		state ALUAState
		asc   uint16
	}{{Standby, ascNotAccessibleStandby}, {Unavailable, ascNotAccessibleUnavailable}} {
		if err := tg.SetPortGroups(2, []PortGroup{{ID: 1, State: ActiveOptimized}, {ID: 2, State: c.state}}); err != nil {
			t.Fatal(err)
		}
		tg.Execute(&task, lun(t, 0), cdb10(0x28, 0, 0, 1), nil, nil)
		expect(t, &task, senseNotReady, c.asc)
		tg.Execute(&task, lun(t, 0), cdb10(0x2a, 0, 0, 1), make([]byte, 512), nil)
		expect(t, &task, senseNotReady, c.asc)
		tg.Execute(&task, lun(t, 0), []byte{0, 0, 0, 0, 0, 0}, nil, nil) // TEST UNIT READY
		expect(t, &task, senseNotReady, c.asc)
		inquiryData(t, tg, 0, 0)
		tg.Execute(&task, lun(t, 0), rtpgCDB(0, 256), nil, make([]byte, 256))
		expect(t, &task, 0, 0)
		if task.DataIn[16]&0x0f != byte(c.state) {
			t.Errorf("%v: group 2 reported in state %#x", c.state, task.DataIn[16]&0x0f)
		}
		tg.Execute(&task, lun(t, 0), []byte{0x5e, 0, 0, 0, 0, 0, 0, 0, 64, 0}, nil, make([]byte, 64))
		if c.state == Standby {
			expect(t, &task, 0, 0)
		} else {
			expect(t, &task, senseNotReady, c.asc)
		}
	}
}

// TestSetPortGroupsErrors: what SetPortGroups refuses.
func TestSetPortGroupsErrors(t *testing.T) {
	tg, _ := targetOfKinds(t, lbas*512, 0)
	for _, c := range []struct {
		local  uint16
		groups []PortGroup
		want   string
	}{
		{3, []PortGroup{{ID: 1}, {ID: 2}}, "group 3 is not among"},
		{1, []PortGroup{{ID: 1}, {ID: 1}}, "listed twice"},
		{0, []PortGroup{{ID: 0}}, "start at 1"},
		{1, []PortGroup{{ID: 1, State: 0x0e}}, "not served"},
	} {
		if err := tg.SetPortGroups(c.local, c.groups); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("SetPortGroups(%d, %v) = %v, want %q", c.local, c.groups, err, c.want)
		}
	}
}
