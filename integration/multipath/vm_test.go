package multipath

import (
	"bytes"
	"fmt"
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
var hostTools = []struct{ name, pkg string }{
	{"iscsid", "open-iscsi"},
	{"iscsiadm", "open-iscsi"},
	{"dmsetup", "dmsetup"},
	{"fio", "fio"},
}

// TestMultipath boots the vmlab guest (building it first when it is
// missing) and runs TestGuestMultipath inside it.
func TestMultipath(t *testing.T) {
	lab := vmlab.Host(t)
	dir := t.TempDir()
	vmlab.CopyModules(t, filepath.Join(dir, modulesDir), guestModules, "it cannot run dm-multipath over ib_iser")
	copyTools(t, filepath.Join(dir, toolsDir))
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

// copyTools copies hostTools, with every shared library they load and the
// dynamic loader, into dst/bin and dst/lib; the guest runs them as
// dst/lib/ld-linux-x86-64.so.2 --library-path dst/lib dst/bin/NAME. The
// host is Debian bookworm like the guest; a missing package is installed
// with apt-get (root only; others skip, saying so).
func copyTools(t *testing.T, dst string) {
	files := map[string]string{} // path under dst -> host path
	soRE := regexp.MustCompile(`^\s*(?:(\S+) => )?(/\S+) \(0x`)
	var versions []string
	for _, tool := range hostTools {
		p := findTool(tool.name)
		if p == "" {
			install(t, tool.pkg)
			if p = findTool(tool.name); p == "" {
				t.Fatalf("%s is installed but %s is missing", tool.pkg, tool.name)
			}
		}
		files[filepath.Join("bin", tool.name)] = p
		out, err := exec.Command("ldd", p).Output()
		if err != nil {
			t.Fatalf("ldd %s: %v", p, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if m := soRE.FindStringSubmatch(line); m != nil {
				name := m[1]
				if name == "" {
					name = filepath.Base(m[2])
				}
				files[filepath.Join("lib", name)] = m[2]
			}
		}
		v, _ := exec.Command("dpkg-query", "-W", "-f", "${Version}", tool.pkg).Output()
		versions = append(versions, fmt.Sprintf("%s (%s %s)", tool.name, tool.pkg, v))
	}
	if _, ok := files[filepath.Join("lib", "ld-linux-x86-64.so.2")]; !ok {
		t.Fatal("ldd named no ld-linux-x86-64.so.2 for the guest's tools")
	}
	for rel, src := range files {
		if err := linkOrCopy(src, filepath.Join(dst, rel)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("guest tools: %s; %d files with their libraries", strings.Join(versions, ", "), len(files))
}

// linkOrCopy makes dst the file src names (after its symbolic links): a
// hard link where both are on one file system (Debian's fio loads 80 MiB
// of libraries), else a copy.
func linkOrCopy(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(src)
	if err != nil {
		return err
	}
	if os.Link(real, dst) == nil {
		return nil
	}
	b, err := os.ReadFile(real)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

// findTool returns the host's path of a program, "" when there is none.
func findTool(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := filepath.Join("/usr/sbin", name); fileExists(p) {
		return p
	}
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// install installs a Debian package with apt-get (root only; others skip).
func install(t *testing.T, pkg string) {
	if os.Geteuid() != 0 {
		t.Skipf("%s is not installed and installing it needs root: apt-get install %s", pkg, pkg)
	}
	t.Logf("installing %s with apt-get", pkg)
	cmd := exec.Command("apt-get", "install", "-y", "-qq", "--no-install-recommends", pkg)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("apt-get install %s: %v\n%s", pkg, err, out)
	}
}
