package iser

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

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
	copyOpenISCSI(t, filepath.Join(dir, iscsiDir))
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

// copyOpenISCSI copies iscsid and iscsiadm, with every shared library
// they load and the dynamic loader, into dst/bin and dst/lib. The host is
// Debian bookworm like the guest; open-iscsi is installed with apt-get
// when missing.
func copyOpenISCSI(t *testing.T, dst string) {
	bins := map[string]string{}
	for _, name := range []string{"iscsid", "iscsiadm"} {
		p, err := exec.LookPath(name)
		if err != nil {
			p = filepath.Join("/usr/sbin", name)
		}
		if _, err := os.Stat(p); err != nil {
			installOpenISCSI(t)
			if _, err := os.Stat(p); err != nil {
				t.Fatalf("open-iscsi is installed but %s is missing", p)
			}
		}
		bins[name] = p
	}
	libs := map[string]string{} // soname -> host path
	soRE := regexp.MustCompile(`^\s*(?:(\S+) => )?(/\S+) \(0x`)
	for _, p := range bins {
		out, err := exec.Command("ldd", p).Output()
		if err != nil {
			t.Fatalf("ldd %s: %v", p, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			m := soRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			name := m[1]
			if name == "" {
				name = filepath.Base(m[2])
			}
			libs[name] = m[2]
		}
	}
	for dir, files := range map[string]map[string]string{"bin": bins, "lib": libs} {
		if err := os.MkdirAll(filepath.Join(dst, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, src := range files {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dst, dir, name), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, ok := libs["ld-linux-x86-64.so.2"]; !ok {
		t.Fatalf("ldd named no ld-linux-x86-64.so.2 for %v", bins)
	}
	out, _ := exec.Command("dpkg-query", "-W", "-f", "${Version}", "open-iscsi").Output()
	t.Logf("open-iscsi %s: %d libraries", out, len(libs))
}

// installOpenISCSI installs Debian's open-iscsi (root only; others skip).
func installOpenISCSI(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("open-iscsi (iscsid, iscsiadm) is not installed and installing it needs root: apt-get install open-iscsi")
	}
	t.Log("installing open-iscsi with apt-get")
	cmd := exec.Command("apt-get", "install", "-y", "-qq", "--no-install-recommends", "open-iscsi")
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("apt-get install open-iscsi: %v\n%s", err, out)
	}
}
