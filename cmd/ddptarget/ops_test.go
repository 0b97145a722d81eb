package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/config"
	"github.com/ddpstore/ddpstore/internal/testtarget"
	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/lu"
	"github.com/ddpstore/ddpstore/transport/scsi"
)

// The tests here run ddptarget as systemd would and as an operator does:
// readiness over $NOTIFY_SOCKET, the control socket with "ddptarget
// status", the metrics endpoint, and the unit files.

const opsTarget = "iqn.2026-11.io.ddpstore:ops"

// opsDaemon is a ddptarget process started by startDaemon.
type opsDaemon struct {
	cmd     *exec.Cmd
	portal  string
	metrics string
	socket  string
	config  string
	notify  *net.UnixConn // where it sends its sd_notify messages
	stderr  *bytes.Buffer
}

// startDaemon writes a configuration with one portal, a memory LUN and a
// file LUN, the metrics endpoint and a control socket under dir, and runs
// ddptarget on it with NOTIFY_SOCKET set; it returns once READY=1 came.
func startDaemon(t *testing.T) *opsDaemon {
	t.Helper()
	dir := t.TempDir()
	d := &opsDaemon{portal: freePort(t), metrics: freePort(t), socket: filepath.Join(dir, "run", "ddptarget.sock"),
		config: filepath.Join(dir, "target.yaml"), stderr: &bytes.Buffer{}}
	writeOpsConfig(t, d, dir, "")
	nsock := filepath.Join(dir, "notify.sock")
	var err error
	d.notify, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: nsock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.notify.Close() })
	d.cmd = exec.Command(ddptarget(t), "--config", d.config)
	d.cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+nsock)
	d.cmd.Stdout, d.cmd.Stderr = io.Discard, d.stderr
	d.cmd.WaitDelay = 5 * time.Second
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.cmd.Process.Kill()
			d.cmd.Wait()
		}
	})
	msg := d.next(t, 60*time.Second) // the race-built binary starts slowly on a busy machine
	if !hasLine(msg, "READY=1") || !hasLine(msg, fmt.Sprintf("MAINPID=%d", d.cmd.Process.Pid)) {
		t.Fatalf("first notification %q, want READY=1 and MAINPID", msg)
	}
	return d
}

// writeOpsConfig writes d's configuration; extra is appended to the
// target's LUN list.
func writeOpsConfig(t *testing.T, d *opsDaemon, dir, extra string) {
	t.Helper()
	cfg := fmt.Sprintf(`portals:
  - listen: %s
targets:
  - name: %s
    alias: ops
    luns:
      - {id: 0, memory: 1MiB}
      - {id: 1, path: %s, size: 2MiB}
%smetrics: {listen: %s}
control: {socket: %s}
`, d.portal, opsTarget, filepath.Join(dir, "lun1.img"), extra, d.metrics, d.socket)
	if err := os.WriteFile(d.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
}

// next returns the next sd_notify datagram.
func (d *opsDaemon) next(t *testing.T, timeout time.Duration) string {
	t.Helper()
	d.notify.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 4096)
	n, err := d.notify.Read(buf)
	if err != nil {
		t.Fatalf("no sd_notify message within %s: %v\nstderr:\n%s", timeout, err, d.stderr)
	}
	return string(buf[:n])
}

func hasLine(msg, line string) bool {
	for _, l := range strings.Split(msg, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

// stop sends SIGTERM and waits for a clean exit; STOPPING=1 comes first.
func (d *opsDaemon) stop(t *testing.T) {
	t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	if msg := d.next(t, 20*time.Second); !hasLine(msg, "STOPPING=1") {
		t.Errorf("notification at SIGTERM %q, want STOPPING=1", msg)
	}
	if err := d.cmd.Wait(); err != nil {
		t.Errorf("ddptarget exited: %v\n%s", err, d.stderr)
	}
}

// TestNotifyReady: READY=1 comes only once the portal listens (a
// connection made right after it is accepted), SIGHUP is RELOADING=1 then
// READY=1, SIGTERM is STOPPING=1; the control socket is 0600 while the
// daemon runs and gone after it.
func TestNotifyReady(t *testing.T) {
	d := startDaemon(t)
	c, err := net.DialTimeout("tcp", d.portal, time.Second)
	if err != nil {
		t.Fatalf("READY=1 sent, but the portal %s does not accept: %v", d.portal, err)
	}
	c.Close()
	fi, err := os.Stat(d.socket)
	if err != nil {
		t.Fatalf("READY=1 sent, but no control socket: %v", err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("control socket mode %v, want a socket 0600", fi.Mode())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		t.Errorf("control socket owned by uid %d, not the daemon's %d", st.Uid, os.Geteuid())
	}

	d.cmd.Process.Signal(syscall.SIGHUP)
	msg := d.next(t, 20*time.Second)
	if !hasLine(msg, "RELOADING=1") || !strings.Contains(msg, "MONOTONIC_USEC=") {
		t.Errorf("notification at SIGHUP %q, want RELOADING=1 with MONOTONIC_USEC", msg)
	}
	if msg := d.next(t, 20*time.Second); !hasLine(msg, "READY=1") {
		t.Errorf("notification after the reload %q, want READY=1", msg)
	}
	d.stop(t)
	if _, err := os.Stat(d.socket); !os.IsNotExist(err) {
		t.Errorf("the control socket outlives the daemon: %v", err)
	}
}

// TestStatusLiveTarget logs a session in to a ddptarget process, does I/O,
// and checks what "ddptarget status" and "status --json" say about it,
// and what its metrics endpoint says.
func TestStatusLiveTarget(t *testing.T) {
	d := startDaemon(t)
	dev := iwarp.NewDevice(0)
	defer dev.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const initiatorName = "iqn.2026-11.io.ddpstore:ops-host"
	s, err := initiator.Dial(ctx, dev, "tcp", d.portal, initiator.Config{InitiatorName: initiatorName,
		TargetName: opsTarget, Buffers: 1 << 20, Log: testtarget.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	buf, err := s.Alloc(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	do := func(lun uint16, op byte, blocks uint16, dir initiator.Direction) {
		cdb := make([]byte, 10)
		cdb[0] = op
		binary.BigEndian.PutUint16(cdb[7:], blocks)
		cmd := &initiator.Command{LUN: lun, CDB: cdb, Dir: dir, Data: buf[:int(blocks)*512]}
		if err := s.Do(ctx, cmd); err != nil || cmd.Status != scsi.StatusGood {
			t.Fatalf("LUN %d op %#x: %v, status %#x", lun, op, err, cmd.Status)
		}
	}
	for range 3 {
		do(1, scsi.Write10, 8, initiator.DataOut)
	}
	for range 2 {
		do(1, scsi.Read10, 16, initiator.DataIn)
	}

	// --json, the form for scripts.
	out, errOut, code := runStatus(t, "--json", "--socket", d.socket)
	if code != 0 {
		t.Fatalf("status --json: exit %d: %s", code, errOut)
	}
	var st Status
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("status --json is not JSON: %v\n%s", err, out)
	}
	if st.PID != d.cmd.Process.Pid || st.Config != d.config || st.Metrics != d.metrics {
		t.Errorf("status: pid %d config %q metrics %q", st.PID, st.Config, st.Metrics)
	}
	if len(st.Portals) != 1 || st.Portals[0].Address != d.portal || st.Portals[0].Transport != "tcp" {
		t.Errorf("portals %+v", st.Portals)
	}
	if len(st.Targets) != 1 || st.Targets[0].Name != opsTarget || st.Targets[0].Alias != "ops" || len(st.Targets[0].LUNs) != 2 {
		t.Fatalf("targets %+v", st.Targets)
	}
	l0, l1 := st.Targets[0].LUNs[0], st.Targets[0].LUNs[1]
	if l0.ID != 0 || l0.Size != 1<<20 || l0.Backing != "memory" || l0.IO.Reads != 0 || l0.IO.Writes != 0 {
		t.Errorf("LUN 0 %+v", l0)
	}
	if l1.ID != 1 || l1.Size != 2<<20 || l1.Backing != "file" || !strings.HasSuffix(l1.Path, "lun1.img") {
		t.Errorf("LUN 1 %+v", l1)
	}
	if l1.IO.Writes != 3 || l1.IO.Reads != 2 || l1.IO.WrittenBytes != 3*8*512 || l1.IO.ReadBytes != 2*16*512 || l1.IO.Errors != 0 {
		t.Errorf("LUN 1 I/O %+v, want 3 writes of 4 KiB and 2 reads of 8 KiB", l1.IO)
	}
	if len(st.Sessions) != 1 {
		t.Fatalf("sessions %+v, want one", st.Sessions)
	}
	ss := st.Sessions[0]
	host, _, _ := net.SplitHostPort(ss.Peer)
	if ss.Initiator != initiatorName || ss.Target != opsTarget || ss.Kind != "normal" || ss.Transport != "iser" ||
		ss.TSIH == 0 || host != "127.0.0.1" || time.Since(ss.Since) > time.Minute || time.Since(ss.Since) < 0 {
		t.Errorf("session %+v", ss)
	}
	if ss.Commands != 5 || ss.WrittenBytes != 3*8*512 || ss.ReadBytes != 2*16*512 {
		t.Errorf("session I/O: %d commands, %d read, %d written; want 5, %d, %d", ss.Commands, ss.ReadBytes, ss.WrittenBytes, 2*16*512, 3*8*512)
	}
	if p := ss.Params; p == nil || p.QueueDepth == 0 || p.MaxBurstLength == 0 || p.FirstBurstLength == 0 || !p.InitialR2T || p.HeaderDigest {
		t.Errorf("session parameters %+v", ss.Params)
	}

	// The text form, for people.
	text, errOut, code := runStatus(t, "--socket", d.socket)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	for _, want := range []string{d.portal + " (tcp)", opsTarget + " (ops): any initiator", "memory", "file " + l1.Path,
		initiatorName, ss.Peer, fmt.Sprintf("%#04x", ss.TSIH), "http://" + d.metrics + "/metrics", "Sessions: 1",
		"ImmediateData Yes, InitialR2T Yes, digests None/None"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("status does not say %q:\n%s", want, text)
		}
	}
	t.Logf("ddptarget status:\n%s", text)

	// --config finds the same socket.
	if _, errOut, code := runStatus(t, "--config", d.config); code != 0 {
		t.Errorf("status --config: exit %d: %s", code, errOut)
	}

	// The metrics endpoint of the process counts the same I/O.
	resp, err := http.Get("http://" + d.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`ddptarget_commands_total{lun="1",op="write",status="good",target="` + opsTarget + `"} 3`,
		`ddptarget_written_bytes_total{lun="1",target="` + opsTarget + `"} 12288`,
		`ddptarget_sessions{kind="normal"} 1`,
		`ddptarget_commands_total{lun="0",op="read",status="good",target="` + opsTarget + `"} 0`,
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("the scrape has no %s", want)
		}
	}

	s.Logout(ctx)
	d.stop(t)
	if _, errOut, code := runStatus(t, "--socket", d.socket); code != exitFailed || !strings.Contains(errOut, "no ddptarget answers on "+d.socket) {
		t.Errorf("status with no daemon: exit %d, %q", code, errOut)
	}
}

// runStatus runs "ddptarget status ARGS".
func runStatus(t *testing.T, args ...string) (stdout []byte, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(ddptarget(t), append([]string{"status"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Run()
	return out.Bytes(), errb.String(), cmd.ProcessState.ExitCode()
}

// TestControlSocketInUse: a second daemon on a control socket that a live
// one holds fails with one line; a stale socket file is replaced.
func TestControlSocketInUse(t *testing.T) {
	d := startDaemon(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "second.yaml")
	os.WriteFile(cfg, fmt.Appendf(nil, "portals: [{listen: %s}]\ntargets: [{name: %s, luns: [{id: 0, memory: 1MiB}]}]\ncontrol: {socket: %s}\n",
		freePort(t), opsTarget, d.socket), 0o644)
	code, stderr := runTarget(t, nil, "--config", cfg)
	wantOneLine(t, code, stderr, exitFailed, "control socket "+d.socket+": another ddptarget is serving it")
	d.stop(t)

	// A socket file nobody answers on, as a daemon killed with SIGKILL leaves.
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	got, err := listenControl(stale)
	if err != nil {
		t.Fatalf("a stale socket is not replaced: %v", err)
	}
	got.Close()
	os.WriteFile(stale, nil, 0o644)
	if _, err := listenControl(stale); err == nil || !strings.Contains(err.Error(), "is not a socket") {
		t.Errorf("a regular file in the socket's place: %v", err)
	}
}

// TestSystemdUnits runs systemd-analyze verify on the units of
// dist/systemd, with the binaries they name stood in for (verify checks
// that ExecStart is executable). Any message fails the test: verify exits
// 0 on a mistyped setting, only saying so.
func TestSystemdUnits(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		out, ierr := exec.Command("../../scripts/opstools.sh").CombinedOutput()
		if sa, err = exec.LookPath("systemd-analyze"); err != nil {
			t.Skipf("systemd-analyze is not installed and scripts/opstools.sh could not install it (%v): %s", ierr, bytes.TrimSpace(out))
		}
	}
	units, err := filepath.Glob("../../dist/systemd/*.service")
	if err != nil || len(units) != 2 {
		t.Fatalf("units %v, %v", units, err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	for _, p := range []string{"ddptarget", "ddpinitiator"} {
		if err := os.Symlink("/bin/true", filepath.Join(bin, p)); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range units {
		text, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(text, []byte("/usr/local/bin/")) {
			t.Fatalf("%s does not run /usr/local/bin/...", u)
		}
		os.WriteFile(filepath.Join(dir, filepath.Base(u)), bytes.ReplaceAll(text, []byte("/usr/local/bin/"), []byte(bin+"/")), 0o644)
	}
	cmd := exec.Command(sa, "verify", "./ddptarget.service", "./ddpinitiator-mount@mnt-ddp.service")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// What the units promise.
	unit, _ := os.ReadFile("../../dist/systemd/ddptarget.service")
	for _, want := range []string{"Type=notify", "ExecReload=/bin/kill -HUP $MAINPID", "RuntimeDirectory=ddpstore"} {
		if !bytes.Contains(unit, []byte(want)) {
			t.Errorf("ddptarget.service has no %s", want)
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(unit))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "TimeoutStopSec=") && sc.Text() <= "TimeoutStopSec=30s" {
			t.Errorf("%s: the daemon's graceful shutdown takes up to 30 s", sc.Text())
		}
	}
}

// TestPortGroups: every ALUA state the configuration accepts is one of the
// LU layer's, each a different one.
func TestPortGroups(t *testing.T) {
	a := &config.ALUA{Group: 1}
	for i, s := range config.ALUAStates {
		a.Groups = append(a.Groups, config.PortGroup{ID: i + 1, State: s})
	}
	seen := map[lu.ALUAState]bool{}
	for i, g := range portGroups(a) {
		if int(g.ID) != i+1 || seen[g.State] || g.State.String() == "" || (i > 0 && g.State == lu.ActiveOptimized) {
			t.Errorf("%s became %v", config.ALUAStates[i], g)
		}
		seen[g.State] = true
	}
}
