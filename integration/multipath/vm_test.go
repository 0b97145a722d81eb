package multipath

import (
	"bytes"
	"os"
	"os/exec"
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
	toolsDir    = "tools"           // bin/iscsid, bin/iscsiadm, bin/dmsetup, bin/fio, lib/*.so*
	targetBin   = "ddptarget"       // built without cgo
	guestBinary = "multipath.test"  // this package's test binary
	modulesList = vmlab.ModulesList // in modulesDir
)

// guestModules are what the test needs beyond the guest image's RDMA
// stack: the ALUA device handler (loaded first, so that it claims the
// disks as they appear), the iSER initiator, the SCSI disk driver and
// dm-multipath with its round-robin path selector. Their dependencies
// come along per the kernel's modules.dep.
var guestModules = []string{"scsi_dh_alua", "ib_iser", "sd_mod", "dm_multipath", "dm_round_robin"}

// hostTools are the Debian programs the guest runs, with the package
// that installs each when it is missing.
var hostTools = []guesttools.Program{
	{Name: "iscsid", Package: "open-iscsi"},
	{Name: "iscsiadm", Package: "open-iscsi"},
	{Name: "dmsetup", Package: "dmsetup"},
	{Name: "fio", Package: "fio"},
}

// TestMultipath boots the vmlab guest (building it first when it is
// missing) and runs TestGuestMultipath inside it.
func TestMultipath(t *testing.T) {
	lab := vmlab.Host(t)
	dir := t.TempDir()
	vmlab.CopyModules(t, filepath.Join(dir, modulesDir), guestModules, "it cannot run dm-multipath over ib_iser")
	guesttools.Copy(t, filepath.Join(dir, toolsDir), hostTools...)
	vmlab.BuildTest(t, ".", filepath.Join(dir, guestBinary))
	build := exec.Command("go", "build", "-o", dir+"/", "github.com/ddpstore/ddpstore/cmd/ddptarget")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building ddptarget for the guest: %v\n%s", err, out)
	}
	start := time.Now()
	out, err := vmlab.Run(t, lab, "-d", dir, "-t", "300", "--",
		"./"+guestBinary, "-test.v", "-test.count=1", "-test.timeout=270s", "-test.run", "^TestGuestMultipath$")
	t.Logf("guest output (%.0f s, boot included):\n%s", time.Since(start).Seconds(), out)
	if err != nil {
		t.Fatalf("guest test: %v (exit 124 is run-vm.sh's 300 s limit)", err)
	}
	if !bytes.Contains(out, []byte("--- PASS: TestGuestMultipath")) {
		t.Fatal("TestGuestMultipath did not pass in the guest")
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
