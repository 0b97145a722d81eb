package peers

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ddpstore/ddpstore/integration/vmlab"
)

// What the host puts in the shared directory for the guest (the guest
// tests read the same names).
const (
	modulesDir  = "modules"         // *.ko, and modules.order: insmod in this order
	modulesList = vmlab.ModulesList // in modulesDir
	progsDir    = "progs"           // bin/PROGRAM, lib/*.so* with the dynamic loader
	guestBinary = "peers.test"      // this package's test binary
	initiator   = "ddpinitiator"    // the static initiator program
	fioJob      = "verify.fio"      // examples/fio/verify.fio
	// libiscsiSpec holds PEERS_LIBISCSI as the host has it ("all": the
	// whole suite), for TestGuestLibiscsi: the guest gets no environment.
	libiscsiSpec = "libiscsi.spec"
)

// guestModules are what the peers need beyond the guest image's RDMA
// stack: LIO with its iSER driver and its file and RAM disk backstores,
// and FUSE for ddpinitiator mount. Their dependencies come along per the
// kernel's modules.dep.
var guestModules = []string{"ib_isert", "target_core_file", "fuse"}

// guestPrograms are the Debian programs the guest runs, by the package
// the host installs them from with the project's scripts.
var guestPrograms = []struct{ name, script string }{
	{"iscsi-test-cu", "conformance.sh"},
	{"iscsi-inq", "conformance.sh"},
	{"tgtd", "tgt.sh"},
	{"tgtadm", "tgt.sh"},
	{"fio", "peers.sh"},
}

// stage fills dir with everything the guest tests need.
func stage(t *testing.T, dir string) {
	copyModules(t, filepath.Join(dir, modulesDir))
	copyPrograms(t, filepath.Join(dir, progsDir))
	vmlab.BuildTest(t, ".", filepath.Join(dir, guestBinary))
	build := exec.Command("go", "build", "-o", filepath.Join(dir, initiator), "github.com/ddpstore/ddpstore/cmd/ddpinitiator")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building ddpinitiator for the guest: %v\n%s", err, out)
	}
	b, err := os.ReadFile("../../examples/fio/verify.fio")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, fioJob), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, libiscsiSpec), []byte(os.Getenv("PEERS_LIBISCSI")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyModules copies guestModules and their dependencies into dst, with
// the order to insmod them in (vmlab.ModulesList).
func copyModules(t *testing.T, dst string) {
	vmlab.CopyModules(t, dst, guestModules, "the peers need it")
}

// copyPrograms installs guestPrograms on the host with the project's
// scripts (the test skips with a script's message when it cannot), and
// copies each with every shared library it loads and the dynamic loader
// into dst/bin and dst/lib. The host is Debian bookworm like the guest.
func copyPrograms(t *testing.T, dst string) {
	ran := map[string]bool{}
	libs := map[string]string{}
	soRE := regexp.MustCompile(`^\s*(?:(\S+) => )?(/\S+) \(0x`)
	for _, d := range []string{"bin", "lib"} {
		if err := os.MkdirAll(filepath.Join(dst, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range guestPrograms {
		if !ran[p.script] {
			ran[p.script] = true
			if out, err := exec.Command(filepath.Join("..", "..", "scripts", p.script)).CombinedOutput(); err != nil {
				t.Skipf("%s: %s", p.script, strings.TrimSpace(string(out)))
			}
		}
		path, err := exec.LookPath(p.name)
		if err != nil {
			t.Fatalf("%s installed %s, but it is not on PATH: %v", p.script, p.name, err)
		}
		copyFile(t, path, filepath.Join(dst, "bin", p.name))
		out, err := exec.Command("ldd", path).Output()
		if err != nil {
			t.Fatalf("ldd %s: %v", path, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if m := soRE.FindStringSubmatch(line); m != nil {
				name := m[1]
				if name == "" {
					name = filepath.Base(m[2])
				}
				libs[name] = m[2]
			}
		}
	}
	if _, ok := libs["ld-linux-x86-64.so.2"]; !ok {
		t.Fatal("ldd named no ld-linux-x86-64.so.2")
	}
	for name, src := range libs {
		copyFile(t, src, filepath.Join(dst, "lib", name))
	}
}

func copyFile(t *testing.T, src, dst string) {
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}
