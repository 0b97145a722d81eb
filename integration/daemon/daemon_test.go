// Package daemon tests the ddptarget program as a process: its flags, its
// configuration, its signals, and data that survives a restart.
package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/internal/testbin"
	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/transport/initiator"
	log "github.com/sirupsen/logrus"
)

const initiatorName = "iqn.2026-11.io.ddpstore:host1"

var (
	targetProg    = &testbin.Program{Name: "ddptarget"}
	initiatorProg = &testbin.Program{Name: "ddpinitiator"}
)

func TestMain(m *testing.M) { testbin.Main(m) }

func ddptarget(t *testing.T) string    { return targetProg.Path(t) }
func ddpinitiator(t *testing.T) string { return initiatorProg.Path(t) }

// freePort returns a loopback port nobody listens on now.
func freePort(t *testing.T) string { return testbin.FreeAddr(t) }

// proc is a running ddptarget.
type proc struct {
	cmd  *exec.Cmd
	logs *safeBuf
	done chan error
}

type safeBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *safeBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// startTarget runs ddptarget with the config file and waits until it
// listens on addr.
func startTarget(t *testing.T, cfgPath, addr string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(ddptarget(t), "--config", cfgPath), logs: &safeBuf{}, done: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("ddptarget log:\n%s", p.logs.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return p
		}
		select {
		case err := <-p.done:
			t.Fatalf("ddptarget exited: %v\n%s", err, p.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("ddptarget not listening on %s after 20 s\n%s", addr, p.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends sig and waits for the exit status.
func (p *proc) stop(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(40 * time.Second):
		t.Fatalf("ddptarget did not exit on %v", sig)
	}
	return p.cmd.ProcessState.ExitCode()
}

func dial(t *testing.T, addr, name string) *initiator.Session {
	t.Helper()
	return dialConfig(t, addr, initiator.Config{InitiatorName: initiatorName, TargetName: name})
}

// dialConfig logs in to addr with cfg (quiet, 8 MiB of buffers unless cfg
// says) on an RNIC of its own; both go when the test ends.
func dialConfig(t *testing.T, addr string, cfg initiator.Config) *initiator.Session {
	t.Helper()
	dev := iwarp.NewDevice(0)
	t.Cleanup(func() { dev.Close() })
	l := log.New()
	l.SetOutput(io.Discard)
	cfg.Log = log.NewEntry(l)
	if cfg.Buffers == 0 {
		cfg.Buffers = 8 << 20
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := initiator.Dial(ctx, dev, "tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func rw16(op byte, lba uint64, blocks uint32) []byte {
	c := make([]byte, 16)
	c[0] = op
	binary.BigEndian.PutUint64(c[2:], lba)
	binary.BigEndian.PutUint32(c[10:], blocks)
	return c
}

func do(t *testing.T, s *initiator.Session, cmd *initiator.Command) {
	t.Helper()
	if err := s.Do(context.Background(), cmd); err != nil || cmd.Status != 0 {
		t.Fatalf("CDB %x: %v status %#x sense %x", cmd.CDB, err, cmd.Status, cmd.Sense)
	}
}

func writeConfig(t *testing.T, dir, body string) string {
	p := filepath.Join(dir, "target.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFileLUNSurvivesRestart writes to a file LUN, stops the daemon with
// SIGTERM (exit 0), starts it again and reads the data back.
func TestFileLUNSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	addr := freePort(t)
	img := filepath.Join(dir, "disk1.img")
	cfg := writeConfig(t, dir, fmt.Sprintf(`
portals:
  - listen: %s
targets:
  - name: iqn.2026-11.io.ddpstore:disk1
    luns:
      - {id: 0, path: %s, size: 16MiB}
`, addr, img))
	p := startTarget(t, cfg, addr)
	s := dial(t, addr, "iqn.2026-11.io.ddpstore:disk1")
	buf, _ := s.Alloc(1 << 20)
	rand.New(rand.NewSource(7)).Read(buf)
	want := append([]byte(nil), buf...)
	do(t, s, &initiator.Command{CDB: rw16(0x8a, 2048, 2048), Dir: initiator.DataOut, Data: buf})
	s.Close()
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d after SIGTERM\n%s", code, p.logs.String())
	}
	st, err := os.Stat(img)
	if err != nil || st.Size() != 16<<20 {
		t.Fatalf("image: %v, size %d", err, st.Size())
	}

	startTarget(t, cfg, addr)
	s2 := dial(t, addr, "iqn.2026-11.io.ddpstore:disk1")
	rb, _ := s2.Alloc(1 << 20)
	do(t, s2, &initiator.Command{CDB: rw16(0x88, 2048, 2048), Dir: initiator.DataIn, Data: rb})
	if !bytes.Equal(rb, want) {
		t.Fatal("data written before the restart is not there after it")
	}
}

// TestCheck: --check prints the effective config of a valid file and exits
// 0; an invalid one exits 2 with a message naming the line.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	good := writeConfig(t, dir, "targets:\n  - name: iqn.2026-11.io.ddpstore:x\n    luns:\n      - {id: 0, memory: 1MiB}\n")
	out, err := exec.Command(ddptarget(t), "--check", "--config", good).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "iqn.2026-11.io.ddpstore:x") || !strings.Contains(string(out), "queue_depth") {
		t.Fatalf("--check of a good file: %v\n%s", err, out)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("targets:\n  - name: iqn.2026-11.io.ddpstore:x\n    luns:\n      - {id: 0, memory: 12QB}\n"), 0o644)
	cmd := exec.Command(ddptarget(t), "--check", "--config", bad)
	out, _ = cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "bad.yaml:4") {
		t.Fatalf("--check of a bad file: exit %d\n%s", cmd.ProcessState.ExitCode(), out)
	}
	cmd = exec.Command(ddptarget(t), "--help")
	out, _ = cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 0 || !strings.Contains(string(out), "SIGHUP") {
		t.Fatalf("--help: exit %d\n%s", cmd.ProcessState.ExitCode(), out)
	}
	cmd = exec.Command(ddptarget(t), "--bogus")
	cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 2 {
		t.Fatalf("unknown flag: exit %d, want 2", cmd.ProcessState.ExitCode())
	}
}

// TestReloadLUNs: SIGHUP adds a LUN and then removes it while I/O runs on
// another LUN of the same session, which never notices.
func TestReloadLUNs(t *testing.T) {
	dir := t.TempDir()
	addr := freePort(t)
	base := fmt.Sprintf("portals:\n  - listen: %s\ntargets:\n  - name: iqn.2026-11.io.ddpstore:disk1\n    luns:\n      - {id: 0, memory: 8MiB}\n", addr)
	cfg := writeConfig(t, dir, base)
	p := startTarget(t, cfg, addr)
	s := dial(t, addr, "iqn.2026-11.io.ddpstore:disk1")
	stop := make(chan struct{})
	ioErr := make(chan error, 1)
	go func() {
		buf, _ := s.Alloc(64 << 10)
		rb, _ := s.Alloc(64 << 10)
		for i := 0; ; i++ {
			select {
			case <-stop:
				ioErr <- nil
				return
			default:
			}
			rand.New(rand.NewSource(int64(i))).Read(buf)
			w := &initiator.Command{CDB: rw16(0x8a, 0, 128), Dir: initiator.DataOut, Data: buf}
			r := &initiator.Command{CDB: rw16(0x88, 0, 128), Dir: initiator.DataIn, Data: rb}
			if err := s.Do(context.Background(), w); err != nil || w.Status != 0 {
				ioErr <- fmt.Errorf("write: %v %#x", err, w.Status)
				return
			}
			if err := s.Do(context.Background(), r); err != nil || r.Status != 0 || !bytes.Equal(buf, rb) {
				ioErr <- fmt.Errorf("read: %v %#x equal %v", err, r.Status, bytes.Equal(buf, rb))
				return
			}
		}
	}()
	lun1 := func(want uint8) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			cmd := &initiator.Command{LUN: 1, CDB: make([]byte, 6)}
			if err := s.Do(context.Background(), cmd); err != nil {
				t.Fatal(err)
			}
			if cmd.Status == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("LUN 1 answers %#x, want %#x\n%s", cmd.Status, want, p.logs.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	writeConfig(t, dir, base+"      - {id: 1, memory: 1MiB}\n")
	p.cmd.Process.Signal(syscall.SIGHUP)
	lun1(0)
	writeConfig(t, dir, base)
	p.cmd.Process.Signal(syscall.SIGHUP)
	lun1(0x02)
	// A broken file is refused and the daemon keeps serving.
	writeConfig(t, dir, base+"      - {id: 0, memory: 1MiB}\n")
	p.cmd.Process.Signal(syscall.SIGHUP)
	time.Sleep(500 * time.Millisecond)
	close(stop)
	if err := <-ioErr; err != nil {
		t.Fatalf("I/O on LUN 0 during reloads: %v", err)
	}
	if !strings.Contains(p.logs.String(), "reload") {
		t.Errorf("no reload logged:\n%s", p.logs.String())
	}
	if code := p.stop(t, syscall.SIGINT); code != 0 {
		t.Fatalf("exit status %d after SIGINT", code)
	}
	sc := bufio.NewScanner(strings.NewReader(p.logs.String()))
	refused := false
	for sc.Scan() {
		if strings.Contains(sc.Text(), "refused") {
			refused = true
		}
	}
	if !refused {
		t.Errorf("the broken reload was not reported:\n%s", p.logs.String())
	}
}
