package remote_test

import (
	"context"
	"testing"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/ddpstore/ddpstore/hostdev/remote"
	"github.com/ddpstore/ddpstore/internal/testtarget"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/lu"
)

// TestPortGroupsDecode decodes what our own target answers: REPORT TARGET
// PORT GROUPS of three groups and the Device Identification page of the
// port of group 2.
func TestPortGroupsDecode(t *testing.T) {
	st, err := blockdev.NewMemory(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l, err := lu.New(1, st)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := lu.NewTarget("iqn.2026-11.io.ddpstore:alua", map[uint16]*lu.LU{0: l})
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.SetPortGroups(2, []lu.PortGroup{{ID: 1, State: lu.ActiveOptimized}, {ID: 2, State: lu.ActiveNonOptimized}, {ID: 3, State: lu.Standby}}); err != nil {
		t.Fatal(err)
	}
	lun0, _ := iscsi.MakeLUN(0)
	var task lu.Task
	tg.Execute(&task, lun0, []byte{0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0}, nil, make([]byte, 4096))
	rtpg := append([]byte(nil), task.DataIn...)
	tg.Execute(&task, lun0, []byte{0x12, 1, 0x83, 1, 0, 0}, nil, make([]byte, 256))
	vpd := append([]byte(nil), task.DataIn...)
	groups, local, ok, err := remote.DecodePortGroups(rtpg, vpd)
	if err != nil || !ok || local != 2 {
		t.Fatalf("DecodePortGroups: local %d ok %v err %v", local, ok, err)
	}
	want := []remote.PortGroup{{ID: 1, State: "active/optimized"}, {ID: 2, State: "active/non-optimized", InUse: true}, {ID: 3, State: "standby"}}
	if len(groups) != len(want) {
		t.Fatalf("groups %+v, want %+v", groups, want)
	}
	for i := range want {
		if groups[i] != want[i] {
			t.Fatalf("groups %+v, want %+v", groups, want)
		}
	}
	for _, bad := range [][]byte{nil, {0, 0, 0, 16, 0}, append(append([]byte(nil), rtpg[:12]...), 0, 0, 0)} {
		if _, _, _, err := remote.DecodePortGroups(bad, vpd); err == nil {
			t.Errorf("DecodePortGroups(%x) took a malformed report", bad)
		}
	}
}

// TestPortGroupsWithoutALUA: a LU without ALUA has no port groups, and
// saying so is no error.
func TestPortGroupsWithoutALUA(t *testing.T) {
	tt := testtarget.Start(t, testtarget.Memory(t, 1<<20))
	s := tt.Dial(t, initiator.Config{Buffers: 16 << 20})
	groups, err := remote.PortGroups(context.Background(), s, 0)
	if err != nil || groups != nil {
		t.Fatalf("PortGroups without ALUA: %v, %v", groups, err)
	}
}
