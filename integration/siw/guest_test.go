package siw

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/integration/vmlab"
)

// This file holds what the TestGuest* tests share inside the vmlab guest:
// siw's module parameters, rping processes and tcpdump captures.

// guestAddr is the vmlab guest's own address, where siw listens. Traffic to
// it from the guest itself goes over lo, where the captures are taken.
const guestAddr = "10.0.2.15"

// pcapDir is where the guest writes its captures and their descriptions,
// relative to the test binary's working directory: the directory shared
// with the host, whose TestSiwInterop decodes them after the VM exits.
const pcapDir = "pcap"

func inGuest(t *testing.T) {
	t.Helper()
	if os.Getenv("VMLAB_GUEST") != "1" {
		t.Skip("runs inside the vmlab guest (Linux siw); run it with shared/vmlab/run-vm.sh")
	}
	siwOnce.Do(func() {
		out, err := exec.Command("rdma", "link", "add", "siw0", "type", "siw", "netdev", "eth0").CombinedOutput()
		if err != nil && !bytes.Contains(out, []byte("exist")) {
			t.Logf("rdma link add: %v: %s", err, out)
		}
		// siw's zero-copy transmit hands the application's pages to TCP; a
		// segment TCP retransmits after rping has refilled its buffer carries
		// the new octets. Our end drops the duplicate, but tshark may decode
		// the retransmitted copy and report a bad CRC and garbage PDUs (seen
		// with 64 KiB pings). Copying transmit keeps the captures faithful.
		if err := os.WriteFile("/sys/module/siw/parameters/zcopy_tx", []byte("N"), 0); err != nil {
			t.Logf("siw zcopy_tx=N: %v", err)
		}
	})
}

var siwOnce sync.Once

// siwParams sets siw's MPA module parameters (mpa_version,
// mpa_crc_required, mpa_crc_strict, peer_to_peer) for the rest of the test
// and restores every one of them at its end. siw reads them at each
// connection's MPA Startup.
func siwParams(t *testing.T, set map[string]string) {
	t.Helper()
	for name, v := range set {
		p := filepath.Join("/sys/module/siw/parameters", name)
		old, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("siw parameter %s: %v", name, err)
		}
		if err := os.WriteFile(p, []byte(v), 0); err != nil {
			t.Fatalf("siw parameter %s=%s: %v", name, v, err)
		}
		t.Cleanup(func() {
			if err := os.WriteFile(p, bytes.TrimSpace(old), 0); err != nil {
				t.Errorf("restoring siw parameter %s: %v", name, err)
			}
		})
	}
}

// proc is a child process (rping, tcpdump) whose output is collected and
// which is killed, if still running, when the test ends.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  vmlab.SyncBuffer
	done chan struct{}
	err  error // valid after done
}

func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name + " " + strings.Join(args, " "), cmd: exec.Command(name, args...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		t.Logf("%s said:\n%s", p.name, p.out.String())
	})
	return p
}

// wait waits up to d for the process to exit and returns its error; a
// process still running then is killed and reported as timed out.
func (p *proc) wait(d time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		p.kill()
		return fmt.Errorf("%s: still running after %v, killed", p.name, d)
	}
}

func (p *proc) kill() {
	select {
	case <-p.done:
	default:
		p.cmd.Process.Kill()
		<-p.done
	}
}

// startRpingServer starts `rping -s` on siw and returns once it listens.
func startRpingServer(t *testing.T, port, size, count int) *proc {
	t.Helper()
	p := startProc(t, "rping", "-s", "-a", guestAddr, "-p", fmt.Sprint(port),
		"-C", fmt.Sprint(count), "-S", fmt.Sprint(size), "-V")
	// rping -s says nothing when it listens; wait until the port is bound.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		out, _ := exec.Command("ss", "-Hltn", fmt.Sprintf("sport = :%d", port)).Output()
		if len(bytes.TrimSpace(out)) > 0 {
			return p
		}
		select {
		case <-p.done:
			t.Fatalf("rping -s exited early: %v", p.err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	// siw's listening endpoint may not show in ss on every kernel: fall
	// back to the caller's connect retries.
	return p
}

// startRpingClient starts `rping -c` against our server on port.
func startRpingClient(t *testing.T, port, size, count int) *proc {
	t.Helper()
	return startProc(t, "rping", "-c", "-a", guestAddr, "-p", fmt.Sprint(port),
		"-C", fmt.Sprint(count), "-S", fmt.Sprint(size), "-V")
}

// capture is a tcpdump of one scenario's TCP port on lo, written into the
// shared directory with a description of what the host should find in it.
type capture struct {
	t    *testing.T
	meta captureMeta
	p    *proc
	tmp  string // where tcpdump writes
	once sync.Once
}

// captureMeta tells the host-side decoder what a capture holds and what to
// check in it (see pcap_test.go). It is written as NAME.json beside
// NAME.pcap.
type captureMeta struct {
	Name string `json:"name"`
	Port int    `json:"port"`
	// Role is ours: "client" (MPA Initiator, rping -s on siw) or "server"
	// (MPA Responder, rping -c on siw).
	Role string `json:"role"`
	// Rev is the MPA revision the Reply should carry (0: not checked).
	Rev int `json:"rev,omitempty"`
	// CRC is whether CRCs should be in use by the Startup frames' C bits
	// (RFC 5044: unless both are 0); nil when not checked.
	CRC *bool `json:"crc,omitempty"`
	// Rejected: the Reply should have R set.
	Rejected bool `json:"rejected,omitempty"`
	// FullOperation: FPDUs should follow the Startup.
	FullOperation bool `json:"full_operation"`
	// Terminate, when set, is a Terminate that must be in the capture, sent
	// from the given side ("ours" or "siw").
	Terminate *termMeta `json:"terminate,omitempty"`
	// RTR, when set, is the peer-to-peer ready-to-receive message ("write"
	// or "read") that must be the Initiator's first FPDU, zero-length.
	RTR string `json:"rtr,omitempty"`
	// Connections, when not 0, is how many MPA Requests the capture holds
	// (perftest connects twice per run).
	Connections int `json:"connections,omitempty"`
	// Ops are RDMAP opcodes that must each be in at least one FPDU sent
	// by the given side.
	Ops []opMeta `json:"ops,omitempty"`
	// Dropped is how many packets tcpdump says the kernel dropped: the
	// capture is incomplete then.
	Dropped int `json:"dropped,omitempty"`
	// Outcome is what the guest test saw, for the report.
	Outcome string `json:"outcome"`
}

// opMeta is an RDMAP opcode (RFC 5040 4.3) that FPDUs from a side ("ours"
// or "siw") must carry.
type opMeta struct {
	From   string `json:"from"`
	Opcode int    `json:"opcode"`
}

// The RDMAP opcodes (RFC 5040 4.3) the captures are checked for.
const opWrite, opReadRequest, opReadResponse, opSend = 0, 1, 2, 3

var opNames = map[int]string{0: "RDMA Write", 1: "RDMA Read Request", 2: "RDMA Read Response", 3: "Send",
	4: "Send with Invalidate", 5: "Send with SE", 6: "Send with SE and Invalidate", 7: "Terminate"}

type termMeta struct {
	From  string `json:"from"`
	Layer int    `json:"layer"`
	EType int    `json:"etype"`
	Code  int    `json:"code"`
}

func boolp(b bool) *bool { return &b }

// startCapture starts tcpdump on lo for port and returns once it listens.
// stop (also run at the end of the test) ends it and writes the
// description.
func startCapture(t *testing.T, meta captureMeta) *capture {
	t.Helper()
	if err := os.MkdirAll(pcapDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// perftest's many small messages made tcpdump lose packets ("dropped
	// by kernel") under TCG. In immediate mode libpcap uses TPACKET_V2, a
	// ring of one slot per packet, each as large as the snapshot length:
	// 16 MiB of 256 KiB slots (-s 0) held 64 packets. Now a slot fits the
	// largest frame on lo (14 + 65535 octets) and the ring is 64 MiB: about
	// 1000 packets of slack. tcpdump writes to the guest's tmpfs, and stop
	// copies the file into the shared directory, rather than over 9p.
	c := &capture{t: t, meta: meta, tmp: filepath.Join(os.TempDir(), "siw-"+meta.Name+".pcap")}
	os.Remove(c.tmp)
	os.Remove(filepath.Join(pcapDir, meta.Name+".pcap"))
	cmd := exec.Command("tcpdump", "-i", "lo", "-n", "--immediate-mode", "-B", "65536", "-s", "65549", "-w", c.tmp, "tcp", "port", fmt.Sprint(meta.Port))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: "tcpdump " + meta.Name, cmd: cmd, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Skipf("tcpdump: %v", err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			p.out.Write(append(sc.Bytes(), '\n'))
			if !signalled && strings.Contains(sc.Text(), "listening on") {
				close(ready)
				signalled = true
			}
		}
		p.err = cmd.Wait()
		close(p.done)
	}()
	c.p = p
	t.Cleanup(c.stop)
	select {
	case <-ready:
		// "listening on" can precede the capture's first packet by a
		// moment under TCG; a connection's MPA Request missed here leaves
		// tshark's MPA heuristic nothing to recognise the stream by.
		time.Sleep(500 * time.Millisecond)
	case <-p.done:
		t.Fatalf("tcpdump exited: %v\n%s", p.err, p.out.String())
	case <-time.After(10 * time.Second):
		t.Fatalf("tcpdump did not start listening:\n%s", p.out.String())
	}
	return c
}

// stop ends the capture (SIGINT, so that tcpdump flushes) after a moment
// for the last segments (FIN, RST) to pass, and writes the description.
func (c *capture) stop() {
	c.once.Do(func() {
		time.Sleep(150 * time.Millisecond)
		c.p.cmd.Process.Signal(syscall.SIGINT)
		if err := c.p.wait(5 * time.Second); err != nil && !strings.Contains(err.Error(), "interrupt") {
			c.t.Logf("tcpdump: %v", err)
		}
		out := strings.TrimSpace(c.p.out.String())
		c.t.Logf("%s", out)
		if m := droppedRE.FindStringSubmatch(out); m != nil {
			c.meta.Dropped, _ = strconv.Atoi(m[1])
		}
		if err := copyFile(filepath.Join(pcapDir, c.meta.Name+".pcap"), c.tmp); err != nil {
			c.t.Errorf("keeping the capture: %v", err)
		}
		os.Remove(c.tmp)
		if c.meta.Outcome == "" {
			c.meta.Outcome = "test ended before recording an outcome"
		}
		if c.t.Failed() {
			c.meta.Outcome = "GUEST TEST FAILED: " + c.meta.Outcome
		}
		b, err := json.MarshalIndent(c.meta, "", "  ")
		if err != nil {
			c.t.Error(err)
			return
		}
		if err := os.WriteFile(filepath.Join(pcapDir, c.meta.Name+".json"), b, 0o644); err != nil {
			c.t.Error(err)
		}
	})
}

var droppedRE = regexp.MustCompile(`(\d+) packets? dropped by kernel`)

func copyFile(dst, src string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// outcome records what happened, for the description and the log.
func (c *capture) outcome(format string, args ...any) {
	c.meta.Outcome = fmt.Sprintf(format, args...)
	c.t.Logf("outcome: %s", c.meta.Outcome)
}

// kernelLog returns a function that returns the kernel log lines added
// since kernelLog was called (siw reports a Terminate it receives there).
func kernelLog() func() string {
	before, _ := exec.Command("dmesg").Output()
	return func() string {
		after, _ := exec.Command("dmesg").Output()
		if len(after) >= len(before) && bytes.Equal(after[:len(before)], before) {
			return string(after[len(before):])
		}
		return string(after)
	}
}

// scenarioCtx bounds one scenario.
func scenarioCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
