package soak

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/hostdev/bench"
	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/transport/initiator"
	log "github.com/sirupsen/logrus"
)

const (
	targetName = "iqn.2026-11.io.ddpstore:soak"
	// LUN 0 (file): the FUSE mount's fio in its first fioSize octets, the
	// canary slots after canaryBase. LUN 1, 2 and 4 (files): one long bench
	// each (LUN 4 over iSCSI/TCP). LUN 3 (memory): the short-lived clients.
	fioSize     = 64 << 20
	canaryBase  = 96 << 20
	canarySlot  = 256 << 10
	canarySlots = 32
	shortLUN    = 3
)

// longBench is one of the long-lived "ddpinitiator bench --verify"
// processes, for the whole soak.
type longBench struct {
	name string
	args []string
	cmd  *exec.Cmd
	out  bytes.Buffer
	errf string // stderr, a file
	done chan struct{}
	res  *bench.Result
}

// targetProc is one incarnation of ddptarget.
type targetProc struct {
	n       int
	cmd     *exec.Cmd
	started time.Duration
	done    chan struct{}
}

type rig struct {
	t        *testing.T
	dur      time.Duration
	dir      string
	mnt      string
	runDir   string
	tbin     string
	ibin     string
	fio      string
	addr     string // the iSER portal
	tcpAddr  string // the iSCSI/TCP portal
	ports    []string
	tMetrics string
	mMetrics string
	cfg      string
	tlogPath string
	tlog     *lockedFile
	start    time.Time
	ctx      context.Context
	cancel   context.CancelFunc

	// clients: short-lived clients hold it shared; a restart holds it
	// alone, so that no client of the memory LUN spans a restart.
	clients sync.RWMutex

	mu         sync.Mutex
	tgt        *targetProc
	restarting bool
	stopping   bool
	failures   []string
	series     map[string]*series
	order      []string
	cuts       []time.Duration
	mountPID   int
	mountStats map[string]float64
	// Terminates and Rejects of the target, by series, over its lives
	targetErrors map[string]float64
	// how long the mount took to reconnect after each cut that hit it
	mountBack []time.Duration
	// what the target had once only the mount was left
	endSessions, endConnections int

	// counts
	fioRuns, fioIOs, fioErrors                                 atomic.Int64
	shortSessions, shortOK, shortCutShort, shortFailed         atomic.Int64
	shortKilled                                                atomic.Int64
	shortIOs, shortVerifyErrors, shortLosses                   atomic.Int64
	canarySessions, canaryChecks, canaryWrites, canaryMismatch atomic.Int64
	cutCount, socketsKilled                                    atomic.Int64
	restarts, kills                                            atomic.Int64
	longestStop                                                atomic.Int64 // ns
	targets                                                    int

	canaryGen [canarySlots]uint32
	canaryN   int
	benches   []*longBench
}

func (r *rig) benchResult(name string) *bench.Result {
	for _, b := range r.benches {
		if b.name == name {
			return b.res
		}
	}
	return nil
}

// addFailure records a failure without stopping anything (the end).
func (r *rig) addFailure(format string, a ...any) {
	r.mu.Lock()
	r.failures = append(r.failures, fmt.Sprintf(format, a...))
	r.mu.Unlock()
}

// TestSoak: see the package comment and docs/operations.md.
func TestSoak(t *testing.T) {
	d := os.Getenv("SOAK_DURATION")
	if d == "" {
		t.Skip("SOAK_DURATION is not set: the soak runs with make soak (DURATION=10m) or make test (2m)")
	}
	dur, err := time.ParseDuration(d)
	if err != nil || dur < 30*time.Second {
		t.Fatalf("SOAK_DURATION=%q: want a duration of at least 30s", d)
	}
	if os.Geteuid() != 0 {
		t.Skip("the soak needs root: it mounts with FUSE and cuts connections with ss -K")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("this kernel has no FUSE: %v", err)
	}
	r := &rig{t: t, dur: dur, series: map[string]*series{}, targetErrors: map[string]float64{}}
	r.fio = need(t, "fio", "fio")
	need(t, "ss", "iproute2")
	r.dir = t.TempDir()
	r.mnt = filepath.Join(r.dir, "mnt")
	r.runDir = filepath.Join(r.dir, "run")
	for _, d := range []string{r.mnt, r.runDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r.tbin, r.ibin = buildPrograms(t, t.TempDir())
	r.addr, r.tcpAddr, r.tMetrics, r.mMetrics = freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	for _, a := range []string{r.addr, r.tcpAddr} {
		_, p, _ := net.SplitHostPort(a)
		r.ports = append(r.ports, p)
	}
	r.cfg = filepath.Join(r.dir, "target.yaml")
	os.WriteFile(r.cfg, []byte(fmt.Sprintf(`portals:
  - listen: %s
  - {listen: %s, transport: iscsi-tcp}
targets:
  - name: %s
    luns:
      - {id: 0, path: %s, size: 128MiB}
      - {id: 1, path: %s, size: 128MiB}
      - {id: 2, path: %s, size: 128MiB}
      - {id: 3, memory: 64MiB}
      - {id: 4, path: %s, size: 128MiB}
metrics: {listen: %s}
control: {socket: %s}
# every client is on 127.0.0.1, and after a cut of all connections
# several log in at once: the per-address bound is not what is soaked
limits: {max_logging_in_per_address: 16}
state: {dir: %s}
`, r.addr, r.tcpAddr, targetName, filepath.Join(r.dir, "lun0.img"), filepath.Join(r.dir, "lun1.img"),
		filepath.Join(r.dir, "lun2.img"), filepath.Join(r.dir, "lun4.img"), r.tMetrics, filepath.Join(r.dir, "ddptarget.sock"), filepath.Join(r.dir, "state"))), 0o644)
	r.tlogPath = filepath.Join(r.dir, "ddptarget.log")
	f, err := os.Create(r.tlogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r.tlog = &lockedFile{f: f}

	r.ctx, r.cancel = context.WithCancel(context.Background())
	defer r.cancel()
	// A watchdog: a soak that has not ended well after its time fails
	// (and cleans up) instead of hanging make test.
	watchdog := time.AfterFunc(dur+8*time.Minute, func() { r.fail("the soak is still running %v after its end; stopped", 8*time.Minute) })
	defer watchdog.Stop()

	r.start = time.Now()
	t.Cleanup(r.cleanup)
	if r.startTarget() == nil {
		r.report()
		return
	}
	r.mount()
	benches := r.startBenches()
	t.Logf("soak: %v; target %s (pid %d), mount %s (pid %d), benches started", dur, r.addr, r.tgt.cmd.Process.Pid, r.mnt, r.mountPID)

	var wg sync.WaitGroup
	run := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }
	sampled := make(chan struct{})
	go func() { defer close(sampled); r.sampler(benches) }()
	run(r.fioLoop)
	run(r.shortClients)
	run(r.chaos)
	wg.Wait()
	r.waitBenches(benches)
	if r.ctx.Err() == nil {
		if err := r.canary(false); err != nil {
			r.fail("final canary check: %v", err)
		}
	}
	if r.ctx.Err() == nil {
		r.checkSessions()
	}
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
	r.cancel()
	<-sampled
	r.finish()
	r.report()
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (r *rig) since() time.Duration { return time.Since(r.start) }

// end is when the workloads stop starting I/O.
func (r *rig) end() time.Time { return r.start.Add(r.dur) }

// fail records a failure and stops the soak.
func (r *rig) fail(format string, a ...any) {
	msg := fmt.Sprintf("[%v] ", r.since().Round(time.Second)) + fmt.Sprintf(format, a...)
	r.mu.Lock()
	r.failures = append(r.failures, msg)
	r.mu.Unlock()
	r.t.Log("soak failure: " + msg)
	r.cancel()
}

// sleep waits d or until the soak stops; false when it stopped.
func (r *rig) sleep(d time.Duration) bool {
	select {
	case <-r.ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// startTarget starts an incarnation of ddptarget and waits until it
// listens; nil after a failure.
func (r *rig) startTarget() *targetProc {
	r.targets++
	p := &targetProc{n: r.targets, started: r.since(), done: make(chan struct{})}
	r.tlog.printf("==== soak: ddptarget incarnation %d at %v\n", p.n, p.started.Round(time.Millisecond))
	p.cmd = exec.Command(r.tbin, "--config", r.cfg)
	p.cmd.Stdout, p.cmd.Stderr = r.tlog, r.tlog
	if err := p.cmd.Start(); err != nil {
		r.fail("start ddptarget: %v", err)
		return nil
	}
	go func() {
		err := p.cmd.Wait()
		close(p.done)
		r.mu.Lock()
		expected := r.restarting || r.stopping
		r.mu.Unlock()
		if !expected {
			r.fail("ddptarget (pid %d, incarnation %d) died: %v; its log:\n%s", p.cmd.Process.Pid, p.n, err, tail(r.tlogPath, 40))
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for _, addr := range []string{r.addr, r.tcpAddr} {
		if !r.waitListening(p, addr, deadline) {
			return nil
		}
	}
	r.mu.Lock()
	r.tgt = p
	r.series[fmt.Sprintf("ddptarget#%d", p.n)] = &series{Name: fmt.Sprintf("ddptarget#%d", p.n), Proc: "ddptarget", Start: p.started}
	r.order = append(r.order, fmt.Sprintf("ddptarget#%d", p.n))
	r.mu.Unlock()
	return p
}

// waitListening waits until addr accepts connections; false (a failure
// recorded) if p dies or the deadline passes first.
func (r *rig) waitListening(p *targetProc, addr string, deadline time.Time) bool {
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return true
		}
		select {
		case <-p.done:
			return false // its death is a failure already
		default:
		}
		if time.Now().After(deadline) {
			r.fail("ddptarget not listening on %s 30 s after its start:\n%s", addr, tail(r.tlogPath, 40))
			p.cmd.Process.Kill()
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopTarget stops the current incarnation: with SIGTERM it must exit 0
// within 45 s (its drain takes up to 30); SIGKILL is a crash.
func (r *rig) stopTarget(sig syscall.Signal) bool {
	r.mu.Lock()
	p := r.tgt
	r.restarting = true
	r.mu.Unlock()
	if p == nil {
		return false
	}
	r.scrapeTarget() // its counts, before they are gone
	t0 := time.Now()
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(45 * time.Second):
		r.fail("ddptarget (pid %d) did not exit within 45 s of SIGTERM:\n%s", p.cmd.Process.Pid, tail(r.tlogPath, 40))
		p.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, into the log
		time.Sleep(2 * time.Second)
		p.cmd.Process.Kill()
		<-p.done
		return false
	}
	took := time.Since(t0)
	if sig == syscall.SIGTERM && int64(took) > r.longestStop.Load() {
		r.longestStop.Store(int64(took))
	}
	r.mu.Lock()
	if s := r.series[fmt.Sprintf("ddptarget#%d", p.n)]; s != nil {
		s.End = r.since()
	}
	r.mu.Unlock()
	if code := p.cmd.ProcessState.ExitCode(); sig == syscall.SIGTERM && code != 0 {
		r.fail("ddptarget exited %d after SIGTERM:\n%s", code, tail(r.tlogPath, 40))
		return false
	}
	return true
}

// scrapeTarget adds the current incarnation's Terminates and Rejects to
// those of the incarnations before it.
func (r *rig) scrapeTarget() {
	m, err := scrapeSeries(r.tMetrics, "ddptarget_rdma_terminates_total", "ddptarget_rejects_total")
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, v := range m {
		if v > 0 {
			r.targetErrors[k] += v
		}
	}
}

// mount mounts the target with "ddpinitiator mount --daemon".
func (r *rig) mount() {
	out, err := exec.Command(r.ibin, "mount", "--daemon", "--run-dir", r.runDir, "--target", targetName,
		"--recovery-timeout", "120s", "--nop-interval", "1s", "--metrics-listen", r.mMetrics, r.addr, r.mnt).CombinedOutput()
	if err != nil {
		r.t.Fatalf("ddpinitiator mount: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`as pid (\d+)`).FindSubmatch(out)
	if m == nil {
		r.t.Fatalf("ddpinitiator mount did not name its pid:\n%s", out)
	}
	r.mountPID, _ = strconv.Atoi(string(m[1]))
	r.mu.Lock()
	r.series["mount"] = &series{Name: "mount", Proc: "mount", Start: r.since()}
	r.order = append(r.order, "mount")
	r.mu.Unlock()
}

func (r *rig) mountLog() string {
	logs, _ := filepath.Glob(filepath.Join(r.runDir, "*.log"))
	if len(logs) == 0 {
		return ""
	}
	return logs[0]
}

// startBenches starts the long verified benches, half reads, for the
// whole soak: small random I/O on LUN 1 and large on LUN 2 over iSER,
// medium on LUN 4 over iSCSI/TCP.
func (r *rig) startBenches() []*longBench {
	var bs []*longBench
	for _, b := range []struct {
		name, lun, bs, depth string
		tcp                  bool
	}{
		{"bench-4k", "1", "4KiB", "16", false},
		{"bench-256k", "2", "256KiB", "4", false},
		{"bench-tcp-64k", "4", "64KiB", "8", true},
	} {
		lb := &longBench{name: b.name, done: make(chan struct{}), errf: filepath.Join(r.dir, b.name+".log")}
		lb.args = []string{"bench", "--target", targetName, "--lun", b.lun, "--rw", "randrw", "--bs", b.bs, "--iodepth", b.depth,
			"--size", "96MiB", "--verify", "--runtime", r.dur.String(), "--json", "--progress", "never",
			"--recovery-timeout", "120s", "--nop-interval", "1s", r.addr}
		if b.tcp {
			lb.args = append(lb.args[:len(lb.args)-1], "--transport", "iscsi-tcp", r.tcpAddr)
		}
		lb.cmd = exec.Command(r.ibin, lb.args...)
		ef, err := os.Create(lb.errf)
		if err != nil {
			r.t.Fatal(err)
		}
		lb.cmd.Stdout, lb.cmd.Stderr = &lb.out, ef
		if err := lb.cmd.Start(); err != nil {
			r.t.Fatal(err)
		}
		go func() {
			err := lb.cmd.Wait()
			ef.Close()
			close(lb.done)
			if r.ctx.Err() == nil && time.Now().Before(r.end().Add(-time.Second)) {
				r.fail("%s (pid %d) ended before its time: %v\n%s\n%s", lb.name, lb.cmd.Process.Pid, err, tail(lb.errf, 20), lb.out.String())
			}
		}()
		r.mu.Lock()
		r.series[b.name] = &series{Name: b.name, Proc: b.name, Start: r.since()}
		r.order = append(r.order, b.name)
		r.mu.Unlock()
		bs = append(bs, lb)
	}
	r.benches = bs
	return bs
}

// waitBenches waits for the long benches to end and reads their results.
func (r *rig) waitBenches(bs []*longBench) {
	limit := time.After(time.Until(r.end()) + 3*time.Minute)
	for _, b := range bs {
		select {
		case <-b.done:
		case <-limit:
			r.fail("%s did not end within 3 minutes of its runtime:\n%s", b.name, tail(b.errf, 20))
			b.cmd.Process.Signal(syscall.SIGQUIT)
			<-b.done
			continue
		case <-r.ctx.Done():
			b.cmd.Process.Signal(syscall.SIGINT)
			<-b.done
		}
		r.mu.Lock()
		if s := r.series[b.name]; s != nil {
			s.End = r.since()
		}
		r.mu.Unlock()
		var res bench.Result
		if err := json.Unmarshal(b.out.Bytes(), &res); err != nil {
			if r.ctx.Err() == nil {
				r.fail("%s: no result (%v): exit %d\n%s\n%s", b.name, err, b.cmd.ProcessState.ExitCode(), b.out.String(), tail(b.errf, 20))
			}
			continue
		}
		b.res = &res
		if res.VerifyErrors > 0 {
			r.fail("%s: %d verify errors, the first: %s", b.name, res.VerifyErrors, res.FirstError)
		} else if code := b.cmd.ProcessState.ExitCode(); code != 0 {
			r.fail("%s exited %d:\n%s", b.name, code, tail(b.errf, 20))
		}
	}
}

// fioJobs: random writes of mixed sizes verified as they go (a backlog
// of reads behind the writes) and at the end; sequential 1 MiB writes
// verified at the end. O_DIRECT through the mount.
var fioJobs = []string{`[global]
filename=${DDP_FILE}
size=` + strconv.Itoa(fioSize) + `
direct=1
ioengine=libaio
verify=crc32c
verify_fatal=1
do_verify=1
randrepeat=0
[soak-randwrite-mixed]
rw=randwrite
bsrange=4k-128k
iodepth=16
verify_backlog=64
`, `[global]
filename=${DDP_FILE}
size=` + strconv.Itoa(fioSize) + `
direct=1
ioengine=libaio
verify=crc32c
verify_fatal=1
do_verify=1
[soak-write-1m]
rw=write
bs=1m
iodepth=4
`}

type fioOut struct {
	Jobs []struct {
		Error int `json:"error"`
		Read  struct {
			IOs int64 `json:"total_ios"`
		} `json:"read"`
		Write struct {
			IOs int64 `json:"total_ios"`
		} `json:"write"`
	} `json:"jobs"`
}

// fioLoop runs the fio jobs in turn through the mount until the end.
func (r *rig) fioLoop() {
	var files []string
	for i, j := range fioJobs {
		p := filepath.Join(r.dir, fmt.Sprintf("soak%d.fio", i))
		os.WriteFile(p, []byte(j), 0o644)
		files = append(files, p)
	}
	wd := filepath.Join(r.dir, "fio")
	os.Mkdir(wd, 0o755)
	for i := 0; r.ctx.Err() == nil && time.Now().Before(r.end()); i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, r.fio, "--output-format=json", files[i%len(files)])
		cmd.Env = append(os.Environ(), "DDP_FILE="+filepath.Join(r.mnt, "lun0"))
		cmd.Dir = wd // fio leaves verify state files in its working directory
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		r.fioRuns.Add(1)
		var res fioOut
		out := stdout.Bytes()
		if k := bytes.IndexByte(out, '{'); k > 0 {
			out = out[k:]
		}
		jerr := json.Unmarshal(out, &res)
		for _, j := range res.Jobs {
			r.fioIOs.Add(j.Read.IOs + j.Write.IOs)
		}
		if err != nil || jerr != nil || len(res.Jobs) == 0 || res.Jobs[0].Error != 0 {
			r.fioErrors.Add(1)
			r.fail("fio run %d (%s) through the mount: %v\n%s\n%s", i+1, filepath.Base(files[i%len(files)]), err, stderr.String(), lastLines(stdout.String(), 30))
			return
		}
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// shortClients makes clients come and go until shortly before the end:
// verified benches of 1 to 3 s on the memory LUN, mostly, and logins
// and discoveries.
func (r *rig) shortClients() {
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for r.ctx.Err() == nil && time.Now().Before(r.end().Add(-5*time.Second)) {
		r.clients.RLock()
		var args []string
		kind := "bench"
		switch k := rng.Intn(10); {
		case k == 0:
			kind, args = "login", []string{"login", "--target", targetName}
		case k == 1:
			kind, args = "discover", []string{"discover"}
		default:
			bs := []string{"4KiB", "16KiB", "64KiB", "256KiB"}[rng.Intn(4)]
			depth := []string{"1", "4", "16"}[rng.Intn(3)]
			args = []string{"bench", "--target", targetName, "--lun", strconv.Itoa(shortLUN), "--rw", "randrw", "--bs", bs,
				"--iodepth", depth, "--verify", "--runtime", fmt.Sprintf("%dms", 1000+rng.Intn(2000)), "--json",
				"--progress", "never", "--recovery-timeout", "30s"}
		}
		if rng.Intn(4) == 0 {
			args = append(args, "--transport", "iscsi-tcp", r.tcpAddr)
		} else {
			args = append(args, r.addr)
		}
		t0 := r.since()
		ctx, cancel := context.WithTimeout(r.ctx, 90*time.Second)
		cmd := exec.CommandContext(ctx, r.ibin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		// One bench in eight vanishes: SIGKILL in the middle of its I/O,
		// leaving the target to notice and clean up.
		kill := kind == "bench" && rng.Intn(8) == 0
		err := cmd.Start()
		if err == nil {
			if kill {
				time.AfterFunc(time.Duration(300+rng.Intn(1200))*time.Millisecond, func() { cmd.Process.Kill() })
			}
			err = cmd.Wait()
		}
		cancel()
		t1 := r.since()
		r.clients.RUnlock()
		if r.ctx.Err() != nil {
			return
		}
		r.shortSessions.Add(1)
		r.shortLosses.Add(int64(strings.Count(stderr.String(), "connection lost")))
		code := cmd.ProcessState.ExitCode()
		if kind == "bench" {
			var res bench.Result
			if json.Unmarshal(stdout.Bytes(), &res) == nil {
				r.shortIOs.Add(res.IOs)
				r.shortVerifyErrors.Add(res.VerifyErrors)
			}
		}
		switch {
		case kill && code == -1:
			r.shortKilled.Add(1)
		case code == 0:
			r.shortOK.Add(1)
		case code == 3:
			r.fail("a short-lived %s found wrong data: %s\n%s", kind, strings.Join(args, " "), stdout.String())
			return
		case code == 1 && r.cutBetween(t0, t1):
			// a cut during its login: it may fail, as it would against a
			// flaky network; it must not hang or find wrong data
			r.shortCutShort.Add(1)
		default:
			r.shortFailed.Add(1)
			r.fail("a short-lived %s failed (exit %d, %v) with no cut during it: %s\n%s%s", kind, code, err, strings.Join(args, " "), stdout.String(), stderr.String())
			return
		}
		if !r.sleep(time.Duration(200+rng.Intn(1500)) * time.Millisecond) {
			return
		}
	}
}

func (r *rig) cutBetween(t0, t1 time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.cuts {
		if c >= t0-time.Second && c <= t1 {
			return true
		}
	}
	return false
}

// restartEvery is the time between target restarts: a quarter of the
// soak, at least 40 s (so that each incarnation's resources can be judged)
// and at most 3 minutes.
func restartEvery(d time.Duration) time.Duration {
	return min(max(d/4, 40*time.Second), 3*time.Minute)
}

// chaos cuts connections every 4 to 10 s, runs a canary client after
// each cut, and restarts the target every restartEvery (the last one at
// least 30 s before the end), until 15 s before the end.
func (r *rig) chaos() {
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	every := restartEvery(r.dur)
	nextRestart := r.start.Add(every)
	lastRestart := r.end().Add(-30 * time.Second)
	stop := r.end().Add(-15 * time.Second)
	for r.sleep(time.Duration(4000+rng.Intn(6000)) * time.Millisecond) {
		now := time.Now()
		if now.After(stop) {
			return
		}
		if now.After(nextRestart) && !nextRestart.After(lastRestart) {
			nextRestart = nextRestart.Add(every)
			if !r.restart() {
				return
			}
			continue
		}
		r.cut(rng)
		if !r.sleep(time.Second) {
			return
		}
		if err := r.canary(true); err != nil {
			r.fail("canary after a cut: %v", err)
			return
		}
	}
}

// restart writes a canary slot, stops the target with SIGTERM, starts it
// again on the same files, and reads every canary slot back: what was
// acknowledged before the restart must be there after it.
func (r *rig) restart() bool {
	r.clients.Lock()
	defer r.clients.Unlock()
	if err := r.canary(true); err != nil {
		r.fail("canary before restart %d: %v", r.restarts.Load()+1, err)
		return false
	}
	sig := syscall.SIGTERM
	if r.restarts.Load()%2 == 1 {
		sig = syscall.SIGKILL // every second restart is a crash
	}
	if !r.stopTarget(sig) {
		return false
	}
	if sig == syscall.SIGKILL {
		r.kills.Add(1)
	}
	time.Sleep(500 * time.Millisecond)
	p := r.startTarget()
	r.mu.Lock()
	r.restarting = false
	r.mu.Unlock()
	if p == nil {
		return false
	}
	r.restarts.Add(1)
	r.t.Logf("soak: [%v] restart %d (%v): ddptarget pid %d", r.since().Round(time.Second), r.restarts.Load(), sig, p.cmd.Process.Pid)
	if err := r.canary(false); err != nil {
		r.fail("canary after restart %d: data acknowledged before it: %v", r.restarts.Load(), err)
		return false
	}
	return true
}

// cut kills TCP connections to the target's portal with ss -K: all of
// them from both ends, only the target's ends, only the initiators' ends,
// or one connection.
func (r *rig) cut(rng *rand.Rand) {
	either := func(dir string) string {
		var f []string
		for _, p := range r.ports {
			f = append(f, fmt.Sprintf("%s = :%s", dir, p))
		}
		return strings.Join(f, " or ")
	}
	var filter, what string
	switch rng.Intn(4) {
	case 0:
		what, filter = "all, both ends", fmt.Sprintf("( %s or %s )", either("sport"), either("dport"))
	case 1:
		what, filter = "all, target's ends", fmt.Sprintf("( %s )", either("sport"))
	case 2:
		what, filter = "all, initiators' ends", fmt.Sprintf("( %s )", either("dport"))
	default:
		out, _ := exec.Command("ss", "-Htn", "state", "established", fmt.Sprintf("( %s )", either("dport"))).Output()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) == 0 || lines[0] == "" {
			return
		}
		f := strings.Fields(lines[rng.Intn(len(lines))])
		if len(f) < 4 {
			return
		}
		_, lport, _ := net.SplitHostPort(f[2])
		_, rport, _ := net.SplitHostPort(f[3])
		what, filter = "one, initiator's end", fmt.Sprintf("( sport = :%s and dport = :%s )", lport, rport)
	}
	before, _ := scrape(r.mMetrics, "ddpinitiator_connection_losses_total", "ddpinitiator_reconnects_total")
	r.mu.Lock()
	r.cuts = append(r.cuts, r.since())
	r.mu.Unlock()
	t0 := time.Now()
	out, err := exec.Command("ss", "-K", "-Htn", "state", "established", filter).CombinedOutput()
	if err != nil {
		r.fail("ss -K %s: %v\n%s", filter, err, out)
		return
	}
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	r.cutCount.Add(1)
	r.socketsKilled.Add(int64(n))
	r.tlog.printf("==== soak: [%v] cut %s: %d sockets\n", r.since().Round(time.Millisecond), what, n)
	// How long the mount took to be back, when the cut hit it.
	if before == nil {
		return
	}
	for time.Since(t0) < 20*time.Second {
		m, err := scrape(r.mMetrics, "ddpinitiator_connection_losses_total", "ddpinitiator_reconnects_total")
		if err == nil {
			lost := m["ddpinitiator_connection_losses_total"] - before["ddpinitiator_connection_losses_total"]
			if lost == 0 && time.Since(t0) > time.Second {
				return // not the mount's connection
			}
			if lost > 0 && m["ddpinitiator_reconnects_total"] >= before["ddpinitiator_reconnects_total"]+lost {
				r.mu.Lock()
				r.mountBack = append(r.mountBack, time.Since(t0))
				r.mu.Unlock()
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// canary is a client of its own, in this process: it logs in, reads back
// every canary slot written so far (checking the pattern of the slot's
// last generation), writes the next slot when write is set, and logs out.
func (r *rig) canary(write bool) error {
	dev := iwarp.NewDevice(0)
	defer dev.Close()
	l := log.New()
	l.SetOutput(io.Discard)
	ctx, cancel := context.WithTimeout(r.ctx, 90*time.Second)
	defer cancel()
	s, err := initiator.Dial(ctx, dev, "tcp", r.addr, initiator.Config{InitiatorName: "iqn.2026-11.io.ddpstore:soak-canary",
		TargetName: targetName, Log: log.NewEntry(l), Buffers: 1 << 20, RecoveryTimeout: 60 * time.Second})
	if err != nil {
		return fmt.Errorf("login: %w", err)
	}
	defer s.Close()
	r.canarySessions.Add(1)
	buf, err := s.Alloc(canarySlot)
	if err != nil {
		return err
	}
	rw := func(op byte, lba uint64) error {
		cdb := make([]byte, 16)
		cdb[0] = op
		binary.BigEndian.PutUint64(cdb[2:], lba)
		binary.BigEndian.PutUint32(cdb[10:], canarySlot/512)
		cmd := &initiator.Command{LUN: 0, CDB: cdb, Data: buf, Dir: initiator.DataIn}
		if op == 0x8a {
			cmd.Dir = initiator.DataOut
		}
		if err := s.Do(ctx, cmd); err != nil {
			return err
		}
		if cmd.Status != 0 {
			return &initiator.StatusError{Status: cmd.Status, Sense: cmd.Sense}
		}
		return nil
	}
	lbaOf := func(slot int) uint64 { return uint64(canaryBase+slot*canarySlot) / 512 }
	check := func(slot int) error {
		if err := rw(0x88, lbaOf(slot)); err != nil {
			return fmt.Errorf("read of slot %d: %w", slot, err)
		}
		r.canaryChecks.Add(1)
		if msg := bench.Check(buf, lbaOf(slot), r.canaryGen[slot]); msg != "" {
			r.canaryMismatch.Add(1)
			return fmt.Errorf("slot %d: %s", slot, msg)
		}
		return nil
	}
	for slot, gen := range r.canaryGen {
		if gen > 0 {
			if err := check(slot); err != nil {
				return err
			}
		}
	}
	if write {
		slot := r.canaryN % canarySlots
		r.canaryN++
		r.canaryGen[slot]++
		bench.Stamp(buf, lbaOf(slot), r.canaryGen[slot])
		if err := rw(0x8a, lbaOf(slot)); err != nil {
			return fmt.Errorf("write of slot %d: %w", slot, err)
		}
		r.canaryWrites.Add(1)
		if err := check(slot); err != nil {
			return err
		}
	}
	return nil
}

// sampleEvery: a second for short soaks, about 300 samples for longer
// ones, at most 5 s apart.
func sampleEvery(d time.Duration) time.Duration {
	return min(max(d/300, time.Second), 5*time.Second)
}

// sampler samples the long-lived processes until the soak stops, and
// checks that they live.
func (r *rig) sampler(bs []*longBench) {
	tick := time.NewTicker(sampleEvery(r.dur))
	defer tick.Stop()
	lastLog := time.Now()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-tick.C:
		}
		at := r.since()
		r.mu.Lock()
		tgt, restarting := r.tgt, r.restarting
		r.mu.Unlock()
		if tgt != nil && !restarting {
			if s, ok := procStatus(tgt.cmd.Process.Pid); ok {
				if m, err := scrape(r.tMetrics, "go_goroutines", "go_memstats_heap_inuse_bytes"); err == nil {
					s.Goroutines, s.Heap = int(m["go_goroutines"]), int64(m["go_memstats_heap_inuse_bytes"])
				}
				r.add(fmt.Sprintf("ddptarget#%d", tgt.n), at, s)
			}
		}
		if s, ok := procStatus(r.mountPID); ok {
			if m, err := scrape(r.mMetrics, "go_goroutines", "go_memstats_heap_inuse_bytes", "ddpinitiator_reconnects_total", "ddpinitiator_connection_losses_total"); err == nil {
				s.Goroutines, s.Heap = int(m["go_goroutines"]), int64(m["go_memstats_heap_inuse_bytes"])
				r.mu.Lock()
				r.mountStats = m
				r.mu.Unlock()
			}
			r.add("mount", at, s)
		} else {
			r.fail("the mount daemon (pid %d) died; its log:\n%s", r.mountPID, tail(r.mountLog(), 40))
			return
		}
		for _, b := range bs {
			select {
			case <-b.done:
				continue
			default:
			}
			if s, ok := procStatus(b.cmd.Process.Pid); ok {
				r.add(b.name, at, s)
			}
		}
		if time.Since(lastLog) >= time.Minute {
			lastLog = time.Now()
			r.t.Logf("soak: [%v] fio I/Os %d, short sessions %d, cuts %d, restarts %d", at.Round(time.Second),
				r.fioIOs.Load(), r.shortSessions.Load(), r.cutCount.Load(), r.restarts.Load())
		}
	}
}

func (r *rig) add(name string, at time.Duration, s sample) {
	s.At = at
	r.mu.Lock()
	defer r.mu.Unlock()
	if se := r.series[name]; se != nil {
		se.Samples = append(se.Samples, s)
		se.End = at
	}
}

// checkSessions: once every client but the mount has gone, the target
// must soon list one session and count one connection; more is a session
// it lost track of.
func (r *rig) checkSessions() {
	var last string
	for deadline := time.Now().Add(20 * time.Second); ; {
		out, err := exec.Command(r.tbin, "status", "--json", "--config", r.cfg).Output()
		var st struct {
			Sessions []struct {
				Initiator, Kind, Peer string
			} `json:"sessions"`
		}
		m, merr := scrape(r.tMetrics, "ddptarget_connections")
		if err == nil && json.Unmarshal(out, &st) == nil && merr == nil {
			r.mu.Lock()
			r.endSessions, r.endConnections = len(st.Sessions), int(m["ddptarget_connections"])
			r.mu.Unlock()
			if len(st.Sessions) == 1 && m["ddptarget_connections"] == 1 {
				return
			}
			last = fmt.Sprintf("%d sessions %+v, ddptarget_connections %v", len(st.Sessions), st.Sessions, m["ddptarget_connections"])
		} else {
			last = fmt.Sprintf("status: %v %v\n%s", err, merr, out)
		}
		if time.Now().After(deadline) {
			r.fail("20 s after every client but the mount ended, the target still has %s", last)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// finish unmounts and stops the target, checking both end cleanly.
func (r *rig) finish() {
	if r.mountPID != 0 {
		out, err := exec.Command(r.ibin, "umount", "--run-dir", r.runDir, r.mnt).CombinedOutput()
		if err != nil {
			r.addFailure("umount: %v\n%s", err, out)
		} else {
			r.mountPID = 0
		}
	}
	r.mu.Lock()
	p := r.tgt
	r.mu.Unlock()
	if p != nil {
		select {
		case <-p.done:
			return
		default:
		}
		r.scrapeTarget()
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			if code := p.cmd.ProcessState.ExitCode(); code != 0 {
				r.addFailure("ddptarget exited %d at the end:\n%s", code, tail(r.tlogPath, 40))
			}
		case <-time.After(45 * time.Second):
			r.addFailure("ddptarget did not exit within 45 s of SIGTERM at the end")
			p.cmd.Process.Kill()
		}
	}
	// Panics and races in any log are failures even if nothing else saw them.
	logs := []string{r.tlogPath, r.mountLog()}
	for _, b := range r.benches {
		logs = append(logs, b.errf)
	}
	for _, l := range logs {
		if bad := grepFile(l, "panic:", "DATA RACE", "fatal error:"); len(bad) > 0 {
			r.addFailure("%s: %s", filepath.Base(l), strings.Join(bad[:min(len(bad), 5)], "\n"))
		}
	}
}

// cleanup undoes what a failed soak left: the mount, the processes.
func (r *rig) cleanup() {
	r.mu.Lock()
	r.stopping = true
	p := r.tgt
	r.mu.Unlock()
	r.cancel()
	if r.mountPID != 0 {
		if out, err := exec.Command(r.ibin, "umount", "--run-dir", r.runDir, r.mnt).CombinedOutput(); err != nil {
			r.t.Logf("umount: %v\n%s", err, out)
			exec.Command("umount", "-l", r.mnt).Run()
			syscall.Kill(r.mountPID, syscall.SIGKILL)
		}
	}
	if p != nil {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	}
	for _, b := range r.benches {
		select {
		case <-b.done:
		default:
			b.cmd.Process.Kill()
			<-b.done
		}
	}
	if r.t.Failed() {
		r.t.Logf("ddptarget log (tail):\n%s", tail(r.tlogPath, 60))
		if l := r.mountLog(); l != "" {
			r.t.Logf("mount log (tail):\n%s", tail(l, 60))
		}
	}
}
