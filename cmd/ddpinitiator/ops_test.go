package main

import (
	"bytes"
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

	"github.com/ddpstore/ddpstore/internal/testbin"
	"github.com/ddpstore/ddpstore/internal/testtarget"
)

// TestMountNotifyAndMetrics runs "ddpinitiator mount" in the foreground as
// the systemd unit does: with NOTIFY_SOCKET set it sends READY=1 once the
// LUN file is there, serves the session's metrics on --metrics-listen,
// which count what is written through the mount, and sends STOPPING=1 at
// SIGTERM before it unmounts and exits 0.
func TestMountNotifyAndMetrics(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mount needs root (the FUSE mount is made directly)")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no FUSE: %v", err)
	}
	tt := testtarget.Start(t, testtarget.Memory(t, 4<<20))
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	nsock := filepath.Join(dir, "notify.sock")
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: nsock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()
	next := func(timeout time.Duration) string {
		t.Helper()
		notify.SetReadDeadline(time.Now().Add(timeout))
		buf := make([]byte, 4096)
		n, err := notify.Read(buf)
		if err != nil {
			t.Fatalf("no sd_notify message within %s: %v", timeout, err)
		}
		return string(buf[:n])
	}
	maddr := testbin.FreeAddr(t)
	cmd := exec.Command(ddpinitiator(t), "mount", "--target", testtarget.TargetName, "--metrics-listen", maddr,
		"--run-dir", filepath.Join(dir, "run"), tt.Addr, mnt)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+nsock)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
			exec.Command("umount", "-l", mnt).Run()
		}
	}()
	if msg := next(60 * time.Second); !strings.HasPrefix(msg, "READY=1\n") {
		t.Fatalf("first notification %q, want READY=1\n%s", msg, stderr.String())
	}
	lun := filepath.Join(mnt, "lun0")
	data := bytes.Repeat([]byte("ddpstore"), 8192) // 64 KiB
	f, err := os.OpenFile(lun, os.O_WRONLY, 0)     // no O_TRUNC: a LUN's size is fixed
	if err != nil {
		t.Fatalf("READY=1 sent, but opening %s: %v", lun, err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatalf("writing %s: %v", lun, err)
	}
	f.Close()
	resp, err := http.Get("http://" + maddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`ddpinitiator_written_bytes_total{lun="0",target="` + testtarget.TargetName + `"} 65536`,
		`ddpinitiator_reconnects_total{target="` + testtarget.TargetName + `"} 0`,
		`ddpinitiator_command_duration_seconds_count{lun="0",op="write",target="` + testtarget.TargetName + `"}`,
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("the scrape has no %s", want)
		}
	}
	if !bytes.Contains(body, []byte(`ddpinitiator_commands_total{lun="0",op="write",status="good",target="`+testtarget.TargetName+`"}`)) ||
		bytes.Contains(body, []byte(`ddpinitiator_commands_total{lun="0",op="write",status="good",target="`+testtarget.TargetName+`"} 0`)) {
		t.Errorf("no write commands counted:\n%s", body)
	}
	// The RNIC's counters: the commands went out as Sends, the 64 KiB of
	// data at least as payload.
	sends := []byte(`ddpinitiator_rdma_messages_total{direction="sent",message="send"} `)
	if i := bytes.Index(body, sends); i < 0 || body[i+len(sends)] == '0' {
		t.Errorf("the RNIC's Sends are not counted:\n%s", body)
	}
	if !bytes.Contains(body, []byte(`ddpinitiator_rdma_octets_total{direction="sent"}`)) {
		t.Errorf("the RNIC's octets are not exported")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if msg := next(20 * time.Second); !strings.HasPrefix(msg, "STOPPING=1") {
		t.Errorf("notification at SIGTERM %q, want STOPPING=1", msg)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("mount exited: %v\n%s", err, stderr.String())
	}
}

// TestMetricsListenBusy: a metrics address that cannot be had fails the
// mount with one line, before any login.
func TestMetricsListenBusy(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	code, stderr := runInitiator(t, "mount", "--metrics-listen", l.Addr().String(), "--run-dir", filepath.Join(dir, "run"), closedPort(t), dir)
	wantOneLine(t, code, stderr, exitFailed, "ddpinitiator mount: metrics: listen tcp "+l.Addr().String(), "address already in use")
}
