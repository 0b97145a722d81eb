package remote

import "testing"

// Only a connected direct-access device is a disk (SPC-4 6.6.2: octet 0
// is the peripheral qualifier and the peripheral device type).
func TestIsDisk(t *testing.T) {
	for _, c := range []struct {
		b0   byte
		disk bool
	}{
		{0x00, true},  // connected direct-access block device
		{0x0c, false}, // storage array controller (tgt's LUN 0)
		{0x05, false}, // CD/DVD
		{0x20, false}, // direct access, but not connected (qualifier 001b)
		{0x7f, false}, // no device at this LUN (qualifier 011b, type 1Fh)
	} {
		if got := isDisk(c.b0); got != c.disk {
			t.Errorf("octet 0 %#02x: disk %v, want %v", c.b0, got, c.disk)
		}
	}
}
