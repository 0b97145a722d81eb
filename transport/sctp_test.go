package transport_test

import (
	"os"
	"testing"

	"github.com/ddpstore/ddpstore/iwarp/sctp"
)

// rigNet is the lower layer the test rig's target listens on and its
// initiators dial: tcp, or an SCTP backend in the tests below. Tests of
// this package do not run in parallel.
var rigNet = "tcp"

// overSCTP runs iSER block I/O end to end over DDP/SCTP on network: every
// octet written is read back and found in the store.
func overSCTP(t *testing.T, network string) {
	rigNet = network
	defer func() { rigNet = "tcp" }()
	for name, f := range map[string]func(*testing.T){
		"ReadWrite":    TestReadWrite,
		"SCSICommands": TestSCSICommands,
		"Nop":          TestNop,
	} {
		t.Run(name, f)
	}
}

// TestOverSCTPUDP runs iSER over userspace SCTP (RFC 5043, pion/sctp over
// UDP loopback).
func TestOverSCTPUDP(t *testing.T) { overSCTP(t, sctp.NetworkUDP) }

// TestOverSCTPKernel runs iSER over kernel SCTP on loopback, inside the
// vmlab guest (integration/sctp); on a kernel without SCTP it skips.
func TestOverSCTPKernel(t *testing.T) {
	if !sctp.KernelAvailable() {
		if os.Getenv("VMLAB_GUEST") == "1" {
			t.Fatal("no kernel SCTP inside the vmlab guest (is sctp.ko loaded?)")
		}
		t.Skip("this kernel has no SCTP: run inside the vmlab guest (integration/sctp)")
	}
	overSCTP(t, sctp.NetworkKernel)
}
