package multipath

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/integration/guesttools"
	"github.com/ddpstore/ddpstore/integration/vmlab"
	"golang.org/x/sys/unix"
)

const (
	// guestAddr is the vmlab guest's eth0, where siw0 is attached and the
	// gateways listen; traffic to it from the guest goes over lo.
	guestAddr    = "10.0.2.15"
	targetIQN    = "iqn.2026-11.io.ddpstore:multipath"
	initiatorIQN = "iqn.2026-11.io.ddpstore:vmlab-multipath"
	luSize       = 64 << 20
	mapName      = "ddpmp"
	// replacementTimeout is how long Linux's iSCSI layer holds the I/O of
	// a failed session before failing it to dm-multipath
	// (node.session.timeo.replacement_timeout): the pause a failover costs.
	replacementTimeout = 5
)

// gatewayPortals are the two gateways' portals: gateway i+1 is ALUA
// target port group i+1, active/optimized for 1, active/non-optimized for 2.
var gatewayPortals = []string{guestAddr + ":3260", guestAddr + ":3261"}

func inGuest(t *testing.T) {
	t.Helper()
	vmlab.InGuest(t, "siw, ib_iser, dm-multipath", "TestMultipath")
}

// TestGuestMultipath: two ddptarget gateways of one image file, Linux's
// ib_iser logged in to both, one dm-multipath device over the two disks
// with a priority group per gateway; verified O_DIRECT I/O through it
// while the gateway of the active path is killed with SIGKILL.
func TestGuestMultipath(t *testing.T) {
	inGuest(t)
	testStart := time.Now()
	t.Cleanup(func() { logDmesg(t) })
	loadModules(t)
	if out, err := exec.Command("rdma", "link", "add", "siw0", "type", "siw", "netdev", "eth0").CombinedOutput(); err != nil &&
		!bytes.Contains(out, []byte("exist")) {
		t.Fatalf("rdma link add siw0: %v: %s", err, out)
	}

	// The image, with known content so that reads are checked from the
	// first one; model is what it should hold.
	dir := t.TempDir()
	img := filepath.Join(dir, "shared.img")
	model := make([]byte, luSize)
	guesttools.Fill(rand.New(rand.NewPCG(1, 2)), model)
	if err := os.WriteFile(img, model, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, targetBin) // out of the 9p share
	if b, err := os.ReadFile(targetBin); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	var gws []*gateway
	for i, portal := range gatewayPortals {
		gws = append(gws, startGateway(t, bin, filepath.Join(dir, fmt.Sprintf("gw%d", i+1)), portal, img, i+1))
	}

	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tools := &guesttools.Tools{Root: filepath.Join(wd, toolsDir)}
	guesttools.StartISCSID(t, tools, initiatorIQN, guesttools.ISCSIDConf(replacementTimeout, 5))
	for _, portal := range gatewayPortals {
		out, err := tools.Run("iscsiadm", "-m", "discovery", "-t", "sendtargets", "-p", portal, "-I", "iser")
		if err != nil || !strings.Contains(out, targetIQN) {
			t.Fatalf("SendTargets discovery over iSER at %s did not find %s (%v):\n%s", portal, targetIQN, err, out)
		}
	}
	for _, portal := range gatewayPortals {
		node := []string{"-m", "node", "-T", targetIQN, "-p", portal, "-I", "iser"}
		if out, err := tools.Run("iscsiadm", append(node, "--login")...); err != nil {
			t.Fatalf("iscsiadm login to %s: %v:\n%s", portal, err, out)
		}
		t.Cleanup(func() {
			out, err := tools.Run("iscsiadm", append(node, "--logout")...)
			t.Logf("iscsiadm logout from %s (%v): %s", portal, err, strings.TrimSpace(out))
		})
	}
	disks := findDisks(t)
	a, b := disks[gatewayPortals[0]], disks[gatewayPortals[1]]
	t.Logf("Linux's disks: %s through gateway 1 (%s), %s through gateway 2 (%s); logged in %.1f s after the test's start",
		a.name, gatewayPortals[0], b.name, gatewayPortals[1], time.Since(testStart).Seconds())

	// One LU seen twice: the same WWN; scsi_dh_alua claimed both and
	// reads the access states the gateways report.
	if a.wwid == "" || a.wwid != b.wwid {
		t.Fatalf("the two disks have WWNs %q and %q, want one", a.wwid, b.wwid)
	}
	for _, d := range []struct {
		disk  *disk
		state string
	}{{a, "active/optimized"}, {b, "active/non-optimized"}} {
		if d.disk.dhState != "alua" || d.disk.accessState != d.state {
			t.Fatalf("%s: device handler %q, access state %q; want alua, %s", d.disk.name, d.disk.dhState, d.disk.accessState, d.state)
		}
	}
	t.Logf("both disks: WWN %s, device handler alua; %s %s, %s %s", a.wwid, a.name, a.accessState, b.name, b.accessState)

	// dm-multipath: the AO path's group first, the ANO path's second; the
	// ALUA handler activates a group's path when the device moves to it.
	// queue_if_no_path: with no path left, I/O waits instead of failing.
	table := fmt.Sprintf("0 %d multipath 1 queue_if_no_path 1 alua 2 1 round-robin 0 1 1 %s 1 round-robin 0 1 1 %s 1",
		luSize/512, a.dev, b.dev)
	if out, err := tools.Run("dmsetup", "create", mapName, "--table", table); err != nil {
		t.Fatalf("dmsetup create %s --table %q: %v: %s", mapName, table, err, out)
	}
	t.Cleanup(func() {
		// Without paths the map would queue forever: fail instead, then go.
		tools.Run("dmsetup", "message", mapName, "0", "fail_if_no_path")
		if out, err := tools.Run("dmsetup", "remove", mapName); err != nil {
			t.Errorf("dmsetup remove %s: %v: %s", mapName, err, out)
		}
	})
	mp := mapperDevice(t, tools)
	out, _ := tools.Run("dmsetup", "table", mapName)
	t.Logf("%s: dmsetup table: %s", mp, strings.TrimSpace(out))
	st := mpathStatus(t, tools)
	t.Logf("dmsetup status: %s", st.raw)
	if st.paths[a.dev] != "A" || st.paths[b.dev] != "A" {
		t.Fatalf("both paths should be active before the kill: %s", st.raw)
	}

	fd, err := unix.Open(mp, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)

	// Verified I/O across the kill of gateway 1.
	aBefore, bBefore := a.ios(t), b.ios(t)
	run := startIO(t, fd, model)
	time.Sleep(3 * time.Second)
	aPre, bPre := a.ios(t)-aBefore, b.ios(t)-bBefore
	if aPre == 0 || bPre != 0 {
		run.stopAndWait()
		t.Fatalf("before the kill, %d I/Os went through %s (gateway 1, AO) and %d through %s (gateway 2, ANO); want all through %s",
			aPre, a.name, bPre, b.name, a.name)
	}
	opsBeforeKill := run.ops()
	killed, died := gws[0].kill(t)
	// dm-multipath uses group 2 only once group 1 has no path left: the
	// first I/O through gateway 2's disk is the failover.
	var moved time.Time
	for deadline := killed.Add(60 * time.Second); moved.IsZero(); time.Sleep(10 * time.Millisecond) {
		if b.ios(t) > bBefore {
			moved = time.Now()
		} else if time.Now().After(deadline) {
			run.stopAndWait()
			t.Fatalf("no I/O through %s (gateway 2) 60 s after the kill of gateway 1; status %s", b.name, mpathStatus(t, tools).raw)
		}
	}
	t.Logf("gateway 1 killed after %d verified I/Os through %s; I/O reached %s %.2f s after the kill",
		opsBeforeKill, a.name, b.name, moved.Sub(killed).Seconds())
	time.Sleep(3 * time.Second) // I/O through the survivor
	res := run.stopAndWait()
	for _, e := range res.errs {
		t.Error(e)
	}
	pauseEnd := res.pauseAt.Add(res.pause)
	t.Logf("verified I/O: %d I/Os (%d writes, %d reads; %d before the kill, %d after), %d failed or wrong; longest I/O %.2f s; longest pause with no I/O completing %.2f s, from %+.2f s to %+.2f s of the kill",
		res.total, res.writes, res.reads, opsBeforeKill, res.total-opsBeforeKill, len(res.errs), res.longest.Seconds(), res.pause.Seconds(),
		res.pauseAt.Sub(killed).Seconds(), pauseEnd.Sub(killed).Seconds())
	if res.total-opsBeforeKill < 10 {
		t.Errorf("only %d I/Os completed after the kill", res.total-opsBeforeKill)
	}
	// Replies gateway 1 sent before it died may still complete I/O just
	// after: the pause begins at the latest a moment after its death.
	if res.pauseAt.After(died.Add(time.Second)) || pauseEnd.Before(killed) {
		t.Errorf("the longest pause (%.2f s) was not across the kill", res.pause.Seconds())
	}

	// The dead path failed, once; group 2 in use, its path activated by
	// the ALUA handler (pg_init).
	st = mpathStatus(t, tools)
	t.Logf("dmsetup status after the failover: %s", st.raw)
	if st.paths[a.dev] != "F" || st.paths[b.dev] != "A" || st.failCount[a.dev] != 1 || st.failCount[b.dev] != 0 ||
		st.nextGroup != 2 || st.pgInits < 1 {
		t.Errorf("dmsetup status should show %s (gateway 1) failed once, %s active, group 2 in use after a pg_init: %s", a.dev, b.dev, st.raw)
	}

	// Everything reads back through the multipath device, and the image
	// itself holds it.
	buf := guesttools.AlignedBuf(t, 1<<20)
	for off := 0; off < luSize; off += len(buf) {
		if n, err := unix.Pread(fd, buf, int64(off)); err != nil || n != len(buf) {
			t.Fatalf("read-back at %d through %s: %d, %v", off, mp, n, err)
		}
		if !bytes.Equal(buf, model[off:off+len(buf)]) {
			t.Fatalf("read-back at %d through %s: %s", off, mp, guesttools.Diff(buf, model[off:off+len(buf)]))
		}
	}
	if got, err := os.ReadFile(img); err != nil {
		t.Fatal(err)
	} else if !bytes.Equal(got, model) {
		t.Fatalf("the image file differs from what was acknowledged: %s", guesttools.Diff(got, model))
	}
	t.Logf("the whole device read back through %s and the image file equal what was acknowledged; %.0f s since the test's start",
		mp, time.Since(testStart).Seconds())

	failBack(t, tools, gws[0], a)
	fioAcrossKill(t, tools, dir, gws[0], a, b)

	// The survivor is stopped (and must exit 0) after the logouts, by
	// the cleanups; nothing it logged may be a warning or an error.
	if text, err := os.ReadFile(gws[1].logPath); err != nil {
		t.Error(err)
	} else if bytes.Contains(text, []byte("level=warning")) || bytes.Contains(text, []byte("level=error")) {
		t.Errorf("gateway 2 logged warnings or errors (its log is below)")
	}
}

// failBack starts the killed gateway again, waits for Linux's iSCSI layer
// to log in to it again (iscsid keeps trying) and brings its path back
// into the map the way multipathd would with "failback immediate":
// reinstate_path, then switch_group to the first group.
func failBack(t *testing.T, o *guesttools.Tools, g *gateway, d *disk) {
	start := time.Now()
	g.start(t)
	for deadline := time.Now().Add(60 * time.Second); readSys(filepath.Join("/sys/block", d.name, "device", "state")) != "running"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s is %q 60 s after gateway %d's restart, not running", d.name,
				readSys(filepath.Join("/sys/block", d.name, "device", "state")), g.group)
		}
	}
	for _, msg := range [][]string{{"reinstate_path", d.dev}, {"switch_group", "1"}} {
		if out, err := o.Run("dmsetup", append([]string{"message", mapName, "0"}, msg...)...); err != nil {
			t.Fatalf("dmsetup message %s 0 %s: %v: %s", mapName, strings.Join(msg, " "), err, out)
		}
	}
	st := mpathStatus(t, o)
	if st.paths[d.dev] != "A" || st.nextGroup != 1 {
		t.Fatalf("after reinstate_path %s and switch_group 1: %s", d.dev, st.raw)
	}
	t.Logf("gateway %d started again; %s running again %.1f s later, its path reinstated and group 1 in use: %s",
		g.group, d.name, time.Since(start).Seconds(), st.raw)
}

// fioJob writes fioSize octets at random with block sizes of 4 KiB to
// 256 KiB, rate-limited so that the writing lasts several seconds even
// on a fast machine, then reads everything back checking each block's
// CRC32c and header (offset, length); any I/O error or verify failure
// fails fio.
const (
	fioSize = 32 << 20
	fioJob  = `[global]
filename=/dev/mapper/` + mapName + `
direct=1
ioengine=libaio
iodepth=8
bsrange=4k-256k
size=32m
rate=,4m
verify=crc32c
do_verify=1
verify_fatal=1
verify_state_save=0
[multipath]
rw=randwrite
`
)

// fioAcrossKill runs fio with verify on the multipath device and kills the
// gateway of the active path (a) once fio's writes go through it: fio must
// finish without an I/O error or a verify failure, through the other
// path (b), and dm-multipath must show a failed again.
func fioAcrossKill(t *testing.T, o *guesttools.Tools, dir string, g *gateway, a, b *disk) {
	job := filepath.Join(dir, "multipath.fio")
	if err := os.WriteFile(job, []byte(fioJob), 0o644); err != nil {
		t.Fatal(err)
	}
	aBefore, bBefore := a.ios(t), b.ios(t)
	cmd := o.Command("fio", "--output-format=json", job)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("fio: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	waitFio := func() error {
		select {
		case err := <-exited:
			return err
		case <-time.After(120 * time.Second):
			cmd.Process.Kill()
			<-exited
			return fmt.Errorf("fio still ran 120 s after the kill (killed)")
		}
	}
	// fio loads its 60-odd libraries over 9p first: wait for its I/O.
	for deadline := time.Now().Add(90 * time.Second); a.ios(t) < aBefore+8; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-exited:
			t.Fatalf("fio exited (%v) before its I/O reached %s:\n%s%s", err, a.name, stderr.String(), stdout.String())
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			t.Fatalf("fio's I/O did not reach %s within 90 s of its start:\n%s", a.name, stderr.String())
		}
	}
	started := time.Since(start)
	time.Sleep(2 * time.Second)
	if b.ios(t) != bBefore {
		cmd.Process.Kill()
		<-exited
		t.Fatalf("fio's I/O went through %s (gateway 2) before the kill", b.name)
	}
	select {
	case err := <-exited:
		t.Fatalf("fio finished (%v) before the kill, 2 s after its I/O began: its job is too small for this machine", err)
	default:
	}
	killed, _ := g.kill(t)
	err := waitFio()
	t.Logf("fio: I/O from %.1f s after its start; gateway %d killed 2 s later; fio done %.1f s after the kill (%v)",
		started.Seconds(), g.group, time.Since(killed).Seconds(), err)
	if stderr.Len() > 0 {
		t.Logf("fio's stderr:\n%s", stderr.String())
	}
	if err != nil {
		t.Fatalf("fio across the kill: %v:\n%s", err, stdout.String())
	}
	var rep struct {
		Jobs []struct {
			Error       int `json:"error"`
			Read, Write struct {
				TotalIOs int64 `json:"total_ios"`
				IOBytes  int64 `json:"io_bytes"`
				ClatNs   struct {
					Max float64 `json:"max"`
				} `json:"clat_ns"`
			}
		} `json:"jobs"`
	}
	// fio may print notes before its JSON.
	js := stdout.Bytes()
	if i := bytes.IndexByte(js, '{'); i > 0 {
		js = js[i:]
	}
	if err := json.Unmarshal(js, &rep); err != nil || len(rep.Jobs) != 1 {
		t.Fatalf("fio's JSON report (%v):\n%s", err, stdout.String())
	}
	j := rep.Jobs[0]
	t.Logf("fio across the kill: error %d; %d writes (%d MiB), %d verify reads (%d MiB); longest write %.2f s, longest read %.2f s; I/Os through %s %d, through %s %d",
		j.Error, j.Write.TotalIOs, j.Write.IOBytes>>20, j.Read.TotalIOs, j.Read.IOBytes>>20,
		j.Write.ClatNs.Max/1e9, j.Read.ClatNs.Max/1e9, a.name, a.ios(t)-aBefore, b.name, b.ios(t)-bBefore)
	if j.Error != 0 || j.Write.IOBytes != fioSize || j.Read.IOBytes != fioSize {
		t.Errorf("fio: error %d, wrote %d and verified %d octets, want no error and %d each", j.Error, j.Write.IOBytes, j.Read.IOBytes, fioSize)
	}
	if b.ios(t) == bBefore {
		t.Errorf("none of fio's I/O went through %s (gateway 2) after the kill", b.name)
	}
	st := mpathStatus(t, o)
	t.Logf("dmsetup status after the second failover: %s", st.raw)
	if st.paths[a.dev] != "F" || st.paths[b.dev] != "A" || st.failCount[a.dev] != 2 || st.nextGroup != 2 {
		t.Errorf("dmsetup status should show %s failed twice, %s active, group 2 in use: %s", a.dev, b.dev, st.raw)
	}
}

// loadModules insmods the modules the host copied into the shared
// directory (modules/modules.order), skipping those already loaded.
func loadModules(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(modulesDir, modulesList))
	if err != nil {
		t.Fatalf("the host's module list: %v", err)
	}
	for _, ko := range strings.Fields(string(b)) {
		if fileExists(filepath.Join("/sys/module", vmlab.ModuleName(ko))) {
			continue
		}
		if out, err := exec.Command("insmod", filepath.Join(modulesDir, ko)).CombinedOutput(); err != nil {
			t.Fatalf("insmod %s: %v: %s", ko, err, out)
		}
	}
}

// gateway is one ddptarget process.
type gateway struct {
	bin, cfg, portal, logPath string
	group                     int
	cmd                       *exec.Cmd
	done                      chan struct{} // closed when cmd has exited
}

// startGateway starts ddptarget exporting img as LUN 0 of targetIQN on
// portal, as ALUA target port group group, and waits until it listens.
func startGateway(t *testing.T, bin, dir, portal, img string, group int) *gateway {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "ddptarget.yaml")
	text := fmt.Sprintf(`portals:
  - listen: %s
targets:
  - name: %s
    luns:
      - {id: 0, path: %s, size: %d}
    alua: {group: %d, groups: [{id: 1, state: active-optimized}, {id: 2, state: active-non-optimized}]}
control: {socket: %s}
state: {dir: %s}
log: {level: info}
`, portal, targetIQN, img, luSize, group, filepath.Join(dir, "ctl.sock"), filepath.Join(dir, "state"))
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	g := &gateway{bin: bin, cfg: cfg, portal: portal, logPath: filepath.Join(dir, "ddptarget.log"), group: group}
	t.Cleanup(func() {
		g.stop(t)
		b, _ := os.ReadFile(g.logPath)
		t.Logf("gateway %d's log:\n%s", group, b)
	})
	g.start(t)
	return g
}

// start starts the gateway's process (again) and waits until it listens.
func (g *gateway) start(t *testing.T) {
	lf, err := os.OpenFile(g.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	g.cmd = exec.Command(g.bin, "--config", g.cfg)
	g.cmd.Stdout, g.cmd.Stderr = lf, lf
	if err := g.cmd.Start(); err != nil {
		t.Fatalf("starting gateway %d: %v", g.group, err)
	}
	done := make(chan struct{})
	g.done = done
	go func(cmd *exec.Cmd) { cmd.Wait(); close(done) }(g.cmd)
	_, port, _ := strings.Cut(g.portal, ":")
	p, _ := strconv.Atoi(port)
	for deadline := time.Now().Add(30 * time.Second); !listening(p); time.Sleep(50 * time.Millisecond) {
		select {
		case <-done:
			b, _ := os.ReadFile(g.logPath)
			t.Fatalf("gateway %d exited (%v) before it listened:\n%s", g.group, g.cmd.ProcessState, b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway %d does not listen on %s 30 s after its start", g.group, g.portal)
		}
	}
}

// listening says whether a TCP socket listens on port, from
// /proc/net/tcp (connecting to find out would be a connection to the
// gateway).
func listening(port int) bool {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return false
	}
	suffix := fmt.Sprintf(":%04X", port)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && strings.HasSuffix(f[1], suffix) && f[3] == "0A" {
			return true
		}
	}
	return false
}

// kill sends SIGKILL, waits for the process to be gone and returns when
// the signal was sent and when the process was found gone.
func (g *gateway) kill(t *testing.T) (at, gone time.Time) {
	at = time.Now()
	if err := g.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9 gateway %d: %v", g.group, err)
	}
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("gateway %d still runs 10 s after SIGKILL", g.group)
	}
	return at, time.Now()
}

// stop shuts a running gateway down with SIGTERM; it must exit 0.
func (g *gateway) stop(t *testing.T) {
	select {
	case <-g.done:
		return
	default:
	}
	g.cmd.Process.Signal(unix.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		g.cmd.Process.Kill()
		<-g.done
		t.Errorf("gateway %d did not exit within 30 s of SIGTERM", g.group)
		return
	}
	if code := g.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("gateway %d exited %d after SIGTERM", g.group, code)
	}
}

// disk is the SCSI disk of one iSCSI session.
type disk struct {
	name, dev                  string // sdX, major:minor
	wwid, dhState, accessState string
}

// ios returns how many reads and writes the disk has completed.
func (d *disk) ios(t *testing.T) int64 {
	b, err := os.ReadFile(filepath.Join("/sys/block", d.name, "stat"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) < 5 {
		t.Fatalf("/sys/block/%s/stat: %q", d.name, b)
	}
	r, _ := strconv.ParseInt(f[0], 10, 64)
	w, _ := strconv.ParseInt(f[4], 10, 64)
	return r + w
}

// findDisks waits for the disk of each iSCSI session to appear and returns
// them by the session's portal.
func findDisks(t *testing.T) map[string]*disk {
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		disks := map[string]*disk{}
		sessions, _ := filepath.Glob("/sys/class/iscsi_session/session*")
		for _, s := range sessions {
			n := strings.TrimPrefix(filepath.Base(s), "session")
			addr, _ := os.ReadFile(filepath.Join("/sys/class/iscsi_connection", "connection"+n+":0", "persistent_address"))
			port, _ := os.ReadFile(filepath.Join("/sys/class/iscsi_connection", "connection"+n+":0", "persistent_port"))
			blocks, _ := filepath.Glob(filepath.Join(s, "device", "target*", "*:*:*:*", "block", "*"))
			if len(blocks) != 1 {
				continue
			}
			d := &disk{name: filepath.Base(blocks[0])}
			sys := filepath.Join("/sys/block", d.name)
			d.dev = readSys(filepath.Join(sys, "dev"))
			d.wwid = readSys(filepath.Join(sys, "device", "wwid"))
			d.dhState = readSys(filepath.Join(sys, "device", "dh_state"))
			d.accessState = readSys(filepath.Join(sys, "device", "access_state"))
			size, _ := strconv.ParseInt(readSys(filepath.Join(sys, "size")), 10, 64)
			if size*512 != luSize {
				continue // not read yet, or not the LU: the deadline's message says
			}
			disks[strings.TrimSpace(string(addr))+":"+strings.TrimSpace(string(port))] = d
		}
		if disks[gatewayPortals[0]] != nil && disks[gatewayPortals[1]] != nil {
			return disks
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %d MiB disk of each gateway's session 30 s after the logins (sessions %v, disks %v)", luSize>>20, sessions, disks)
		}
	}
}

func readSys(p string) string {
	b, _ := os.ReadFile(p)
	return strings.TrimSpace(string(b))
}

// mapperDevice returns the multipath device's node: /dev/mapper/NAME,
// which libdevmapper creates without udev.
func mapperDevice(t *testing.T, o *guesttools.Tools) string {
	p := filepath.Join("/dev/mapper", mapName)
	if fileExists(p) {
		return p
	}
	out, err := o.Run("dmsetup", "info", "-c", "--noheadings", "-o", "major,minor", mapName)
	t.Fatalf("no %s after dmsetup create (dmsetup info: %v: %s)", p, err, out)
	return ""
}

// status is dm-multipath's status line: how many times a path group was
// initialized (the ALUA handler's activation), the group the next I/O
// goes to, and each path's state (A active, F failed) and fail count by
// its major:minor.
type status struct {
	raw                string
	pgInits, nextGroup int
	paths              map[string]string
	failCount          map[string]int
}

func mpathStatus(t *testing.T, o *guesttools.Tools) status {
	out, err := o.Run("dmsetup", "status", mapName)
	if err != nil {
		t.Fatalf("dmsetup status %s: %v: %s", mapName, err, out)
	}
	s := status{raw: strings.TrimSpace(out), paths: map[string]string{}, failCount: map[string]int{}}
	// A path is "<major:minor> <A|F> <fail count>" among the groups'
	// fields; no other field has a colon.
	f := strings.Fields(s.raw)
	// "<start> <length> multipath 2 <queue_io> <pg_init_count> <#hw
	// handler fields> <fields...> <#groups> <next group> ..."
	if len(f) < 8 || f[2] != "multipath" || f[3] != "2" {
		t.Fatalf("dmsetup status %s: not the multipath status this test reads: %s", mapName, s.raw)
	}
	s.pgInits, _ = strconv.Atoi(f[5])
	hw, _ := strconv.Atoi(f[6])
	if 8+hw < len(f) {
		s.nextGroup, _ = strconv.Atoi(f[8+hw])
	}
	for i := 0; i+2 < len(f); i++ {
		if strings.Contains(f[i], ":") && (f[i+1] == "A" || f[i+1] == "F") {
			s.paths[f[i]] = f[i+1]
			s.failCount[f[i]], _ = strconv.Atoi(f[i+2])
		}
	}
	return s
}

// ioRun is verified I/O on the multipath device: workers, each in its
// own region, write random data and read back what their region should
// hold, recording each I/O's completion.
type ioRun struct {
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	res  ioResult
	last time.Time // the latest completion, for pauses
}

type ioResult struct {
	total, writes, reads int
	errs                 []string
	longest              time.Duration // the slowest single I/O
	pause                time.Duration // the longest time with no I/O completing
	pauseAt              time.Time     // when that pause began
}

func startIO(t *testing.T, fd int, model []byte) *ioRun {
	const workers, maxIO = 4, 256 << 10
	r := &ioRun{stop: make(chan struct{}), last: time.Now()}
	region := luSize / workers
	for w := range workers {
		buf := guesttools.AlignedBuf(t, maxIO)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			base := w * region
			for {
				select {
				case <-r.stop:
					return
				default:
				}
				size := 4096 * (1 + rng.IntN(maxIO/4096))
				off := base + 4096*rng.IntN((region-size)/4096+1)
				want := model[off : off+size] // this worker's region only
				b := buf[:size]
				write := rng.IntN(2) == 0
				if write {
					guesttools.Fill(rng, b)
				}
				start := time.Now()
				var n int
				var err error
				if write {
					n, err = unix.Pwrite(fd, b, int64(off))
				} else {
					n, err = unix.Pread(fd, b, int64(off))
				}
				msg := ""
				switch {
				case err != nil || n != size:
					msg = fmt.Sprintf("%s of %d at %d: %d, %v", map[bool]string{true: "write", false: "read"}[write], size, off, n, err)
				case write:
					copy(want, b)
				case !bytes.Equal(b, want):
					msg = fmt.Sprintf("read of %d at %d: %s", size, off, guesttools.Diff(b, want))
				}
				r.done(start, write, msg)
				if msg != "" {
					return
				}
			}
		}()
	}
	return r
}

func (r *ioRun) done(start time.Time, write bool, msg string) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if msg != "" {
		r.res.errs = append(r.res.errs, msg)
		return
	}
	r.res.total++
	if write {
		r.res.writes++
	} else {
		r.res.reads++
	}
	r.res.longest = max(r.res.longest, now.Sub(start))
	if gap := now.Sub(r.last); gap > r.res.pause {
		r.res.pause, r.res.pauseAt = gap, r.last
	}
	r.last = now
}

func (r *ioRun) ops() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.res.total
}

func (r *ioRun) stopAndWait() ioResult {
	close(r.stop)
	r.wg.Wait()
	return r.res
}

// logDmesg logs what the kernel said about the sessions, the disks and
// the multipath device.
func logDmesg(t *testing.T) {
	out, err := exec.Command("dmesg").CombinedOutput()
	if err != nil {
		t.Logf("dmesg: %v", err)
		return
	}
	var keep []string
	for _, line := range strings.Split(string(out), "\n") {
		l := strings.ToLower(line)
		for _, w := range []string{"iser", "iscsi", "siw", "scsi", " sd", "alua", "device-mapper", "multipath", "dm-"} {
			if strings.Contains(l, w) {
				keep = append(keep, line)
				break
			}
		}
	}
	t.Logf("kernel log (iSER, iSCSI, SCSI, ALUA, device-mapper):\n%s", strings.Join(keep, "\n"))
}
