package peers

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ddpstore/ddpstore/integration/guesttools"
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
	var progs []guesttools.Program
	for _, p := range guestPrograms {
		if !ran[p.script] {
			ran[p.script] = true
			if out, err := exec.Command(filepath.Join("..", "..", "scripts", p.script)).CombinedOutput(); err != nil {
				t.Skipf("%s: %s", p.script, strings.TrimSpace(string(out)))
			}
		}
		progs = append(progs, guesttools.Program{Name: p.name})
	}
	guesttools.Copy(t, dst, progs...)
}
