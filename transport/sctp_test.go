package transport_test

import "testing"

// rigNet is the lower layer the test rig's target listens on and its
// initiators dial: tcp, or an SCTP backend in the tests below. Tests of
// this package do not run in parallel.
var rigNet = "tcp"

// TestOverSCTPUDP runs iSER block I/O end to end over DDP/SCTP on
// userspace SCTP (RFC 5043, pion/sctp over UDP loopback): every octet
// written is read back and found in the store.
func TestOverSCTPUDP(t *testing.T) {
	rigNet = "sctp-udp"
	defer func() { rigNet = "tcp" }()
	for name, f := range map[string]func(*testing.T){
		"ReadWrite":    TestReadWrite,
		"SCSICommands": TestSCSICommands,
		"Nop":          TestNop,
	} {
		t.Run(name, f)
	}
}
