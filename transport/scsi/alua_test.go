package scsi

import "testing"

func TestParseTargetPortGroups(t *testing.T) {
	// Two groups: 1 active/optimized with relative port 1, 2 standby with
	// relative ports 2 and 3 (SPC-4 Table 160's layout).
	b := []byte{0, 0, 0, 24,
		0x80 | ALUAActiveOptimized, 0x0f, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1,
		ALUAStandby, 0x0f, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3}
	b[3] = byte(len(b) - 4)
	gs, err := ParseTargetPortGroups(b)
	if err != nil || len(gs) != 2 || gs[0] != (TargetPortGroup{1, ALUAActiveOptimized}) || gs[1] != (TargetPortGroup{2, ALUAStandby}) {
		t.Fatalf("%+v, %v", gs, err)
	}
	for _, bad := range [][]byte{nil, {0, 0, 0, 40, 1}, {0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0, 2}} {
		if _, err := ParseTargetPortGroups(bad); err == nil {
			t.Errorf("%x accepted", bad)
		}
	}
}

func TestLocalPortGroup(t *testing.T) {
	vpd := []byte{0, 0x83, 0, 16,
		0x61, 0x94, 0, 4, 0, 0, 0, 7, // relative target port 7
		0x61, 0x95, 0, 4, 0, 0, 0, 2} // target port group 2
	if g, ok := LocalPortGroup(vpd); !ok || g != 2 {
		t.Fatalf("LocalPortGroup = %d, %v", g, ok)
	}
	if _, ok := LocalPortGroup(vpd[:12]); ok {
		t.Fatal("found a group in a page without one")
	}
}
