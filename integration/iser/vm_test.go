package iser

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/integration/guesttools"
	"github.com/ddpstore/ddpstore/integration/vmlab"
)

// What the host puts in the shared directory for the guest (guest_test.go
// reads the same names).
const (
	modulesDir  = "modules"         // *.ko, and modules.order: insmod in this order
	iscsiDir    = "open-iscsi"      // bin/iscsid, bin/iscsiadm, lib/*.so*
	guestBinary = "iser.test"       // this package's test binary
	modulesList = vmlab.ModulesList // in modulesDir
)

// guestModules are what the Linux initiator needs beyond the guest image's
// RDMA stack: the iSER initiator and the SCSI disk driver. Their
// dependencies come along per the kernel's modules.dep.
var guestModules = []string{"ib_iser", "sd_mod"}

// TestLinuxInitiator boots the vmlab guest (building it first when it is
// missing) and runs TestGuestLinuxInitiator inside it: our iSER target in
// the test process, Linux's ib_iser + open-iscsi logging in to it over siw.
func TestLinuxInitiator(t *testing.T) {
	lab := vmlab.Host(t)
	dir := t.TempDir()
	copyModules(t, filepath.Join(dir, modulesDir))
	guesttools.Copy(t, filepath.Join(dir, iscsiDir), guesttools.Program{Name: "iscsid", Package: "open-iscsi"}, guesttools.Program{Name: "iscsiadm", Package: "open-iscsi"})
	vmlab.BuildTest(t, ".", filepath.Join(dir, guestBinary))
	start := time.Now()
	out, err := vmlab.Run(t, lab, "-d", dir, "-t", "300", "--", "./"+guestBinary, "-test.v", "-test.run", "^TestGuest")
	t.Logf("guest output (%.0f s):\n%s", time.Since(start).Seconds(), out)
	if err != nil {
		t.Fatalf("guest test: %v (exit 124 is run-vm.sh's 300 s limit)", err)
	}
	if !bytes.Contains(out, []byte("--- PASS: TestGuestLinuxInitiator")) {
		t.Fatal("TestGuestLinuxInitiator did not pass in the guest")
	}
}

// copyModules copies guestModules and their dependencies into dst, with
// the order to insmod them in (vmlab.ModulesList).
func copyModules(t *testing.T, dst string) {
	vmlab.CopyModules(t, dst, guestModules, "it cannot be an iSER initiator")
}
