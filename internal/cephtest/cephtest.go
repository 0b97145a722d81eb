// Package cephtest starts a real single-node Ceph cluster for a test: one
// monitor and one OSD from Debian's ceph packages (installed by
// scripts/ceph.sh when missing), everything under the test's t.TempDir(),
// on 127.0.0.1, with cephx on. The OSD keeps its objects in memory
// (memstore), every pool has one replica (`osd pool default size = 1`), and
// Start creates the pool "rbd", initialised for RBD images.
//
// There is no manager daemon: Ceph 16.2's monitor creates pools, and the
// OSD serves I/O, without one (a manager only keeps the PG statistics that
// `ceph -s` shows). Nothing here waits on PG states, which need it: a client
// operation on a PG that is not active yet simply waits until it is.
//
// On this project's 2-core machines Start takes about 7 s when the machine
// is idle and 8-13 s at a load average of 5-7 (mostly the ceph and rbd
// commands, which are Python or start a librados client each); teardown
// takes under 0.1 s, as the daemons are killed (their data is thrown away).
// That is why the tests that use it run in `make test`.
//
// Start skips the test, saying why, only when the ceph programs are missing
// and scripts/ceph.sh cannot install them (not root, no apt-get). Every
// daemon is killed and waited for in t.Cleanup; each also gets SIGKILL from
// the kernel if the test process dies first (Pdeathsig).
package cephtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Programs the cluster needs: ceph-mon, ceph-osd (ceph-base: monmaptool),
// ceph-common (ceph, rbd, rados, ceph-authtool).
var programs = []string{"ceph-mon", "ceph-osd", "monmaptool", "ceph-authtool", "ceph", "rbd", "rados"}

// startTimeout bounds the whole of Start; a loaded 2-core host stretches
// the 7 s several times over.
const startTimeout = 3 * time.Minute

// Cluster is a running single-node cluster.
type Cluster struct {
	dir     string
	conf    string
	keyring string
	monAddr string

	mu    sync.Mutex
	procs []*daemon
}

type daemon struct {
	name string
	cmd  *exec.Cmd
	log  string // the daemon's own log file
	out  string // its stdout and stderr
	done chan struct{}
	err  error // Wait's result, once done is closed
}

// Conf returns the path of the cluster's ceph.conf (a client's -c).
func (c *Cluster) Conf() string { return c.conf }

// Pool returns the name of the RBD pool Start created.
func (c *Cluster) Pool() string { return "rbd" }

// User returns the client name the keyring holds, without "client.".
func (c *Cluster) User() string { return "admin" }

// Keyring returns the path of client.admin's keyring (ceph.conf names it
// too, so a client that reads Conf finds it without being told).
func (c *Cluster) Keyring() string { return c.keyring }

// Dir returns the directory that holds everything of the cluster: data,
// keyrings, sockets and logs (log/).
func (c *Cluster) Dir() string { return c.dir }

// MonAddr returns the monitor's address (msgr2 only).
func (c *Cluster) MonAddr() string { return c.monAddr }

// PIDs returns the process ids of the cluster's daemons.
func (c *Cluster) PIDs() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var pids []int
	for _, d := range c.procs {
		pids = append(pids, d.cmd.Process.Pid)
	}
	return pids
}

// Start starts a cluster for t and stops it in t.Cleanup.
func Start(t testing.TB) *Cluster {
	t.Helper()
	if err := ensurePrograms(); err != nil {
		t.Skipf("cephtest: %v", err)
	}
	c := &Cluster{dir: t.TempDir()}
	t.Cleanup(c.stop)
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := c.start(ctx); err != nil {
		t.Fatalf("cephtest: %v", err)
	}
	t.Logf("cephtest: cluster up in %v (mon %s, dir %s)", time.Since(begin).Round(10*time.Millisecond), c.monAddr, c.dir)
	return c
}

// Launch starts a cluster in dir, for a program rather than a test (make
// compare); Stop ends it. An error says what is missing or what failed.
func Launch(dir string) (*Cluster, error) {
	if err := ensurePrograms(); err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := c.start(ctx); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// Stop kills the cluster's daemons and waits for them.
func (c *Cluster) Stop() { c.stop() }

// Command runs one of the cluster's command-line programs (ceph, rbd,
// rados) with -c Conf and returns what it printed.
func (c *Cluster) Command(ctx context.Context, prog string, args ...string) (string, error) {
	return c.output(ctx, prog, append([]string{"-c", c.conf}, args...)...)
}

// ensurePrograms runs scripts/ceph.sh when a program is missing, and says
// what is still missing after it.
func ensurePrograms() error {
	if missing(programs) == nil {
		return nil
	}
	script, err := findScript()
	if err != nil {
		return fmt.Errorf("%s missing and %v", strings.Join(missing(programs), ", "), err)
	}
	out, err := exec.Command(script).CombinedOutput()
	if m := missing(programs); m != nil {
		return fmt.Errorf("%s missing and %s failed (%v): %s", strings.Join(m, ", "), script, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func missing(progs []string) []string {
	var m []string
	for _, p := range progs {
		if _, err := exec.LookPath(p); err != nil {
			m = append(m, p)
		}
	}
	return m
}

// findScript looks for scripts/ceph.sh in the working directory (a test's
// package directory) and its parents.
func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "scripts", "ceph.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no scripts/ceph.sh above the working directory to install them")
		}
		dir = parent
	}
}

func (c *Cluster) start(ctx context.Context) error {
	for _, d := range []string{"log", "run", "crash"} {
		if err := os.Mkdir(filepath.Join(c.dir, d), 0o755); err != nil {
			return err
		}
	}
	c.conf = filepath.Join(c.dir, "ceph.conf")
	c.keyring = filepath.Join(c.dir, "client.admin.keyring")
	monKeyring := filepath.Join(c.dir, "mon.keyring")
	if err := c.run(ctx, "ceph-authtool", "--create-keyring", monKeyring, "--gen-key", "-n", "mon.", "--cap", "mon", "allow *"); err != nil {
		return err
	}
	if err := c.run(ctx, "ceph-authtool", "--create-keyring", c.keyring, "--gen-key", "-n", "client.admin",
		"--cap", "mon", "allow *", "--cap", "osd", "allow *", "--cap", "mgr", "allow *"); err != nil {
		return err
	}
	if err := c.run(ctx, "ceph-authtool", monKeyring, "--import-keyring", c.keyring); err != nil {
		return err
	}
	fsid := uuid()

	// The monitor's port is picked free, then bound by ceph-mon: another
	// process may take it in between, so a monitor that cannot bind is
	// retried on another port.
	var err error
	for try := 0; try < 3; try++ {
		if err = c.startMon(ctx, fsid, monKeyring); err == nil {
			break
		}
		if ctx.Err() != nil {
			return err
		}
	}
	if err != nil {
		return err
	}

	osdUUID := uuid()
	secret, err := c.output(ctx, "ceph-authtool", "--gen-print-key")
	if err != nil {
		return err
	}
	secret = strings.TrimSpace(secret)
	secretFile := filepath.Join(c.dir, "osd.secret.json")
	if err := os.WriteFile(secretFile, []byte(`{"cephx_secret": "`+secret+`"}`), 0o600); err != nil {
		return err
	}
	idOut, err := c.output(ctx, "ceph", "-c", c.conf, "osd", "new", osdUUID, "-i", secretFile)
	if err != nil {
		return err
	}
	id := strings.TrimSpace(idOut)
	if _, err := strconv.Atoi(id); err != nil {
		return fmt.Errorf("ceph osd new printed %q, not an OSD id", idOut)
	}
	osdDir := filepath.Join(c.dir, "osd."+id)
	if err := os.Mkdir(osdDir, 0o755); err != nil {
		return err
	}
	if err := c.run(ctx, "ceph-authtool", "--create-keyring", filepath.Join(osdDir, "keyring"), "-n", "osd."+id, "--add-key", secret); err != nil {
		return err
	}
	if err := c.run(ctx, "ceph-osd", "-c", c.conf, "-i", id, "--mkfs", "--osd-uuid", osdUUID); err != nil {
		return err
	}
	osd, err := c.spawn("osd."+id, "ceph-osd", "-c", c.conf, "-i", id, "-f")
	if err != nil {
		return err
	}

	if err := c.run(ctx, "ceph", "-c", c.conf, "osd", "pool", "create", c.Pool(), "8"); err != nil {
		return err
	}
	// rbd pool init writes the pool's first object: it returns once the
	// OSD is up and the PG active.
	if err := c.run(ctx, "rbd", "-c", c.conf, "pool", "init", c.Pool()); err != nil {
		return c.withDaemon(err, osd)
	}
	return nil
}

// startMon writes ceph.conf for a free port, makes the monitor's store and
// starts it, returning once it accepts connections.
func (c *Cluster) startMon(ctx context.Context, fsid, monKeyring string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	c.monAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := os.WriteFile(c.conf, []byte(c.confText(fsid)), 0o644); err != nil {
		return err
	}
	monmap := filepath.Join(c.dir, "monmap")
	os.Remove(monmap)
	os.RemoveAll(filepath.Join(c.dir, "mon.a"))
	if err := c.run(ctx, "monmaptool", "--create", "--fsid", fsid, "--addv", "a", "[v2:"+c.monAddr+"]", monmap); err != nil {
		return err
	}
	if err := c.run(ctx, "ceph-mon", "-c", c.conf, "--mkfs", "-i", "a", "--monmap", monmap, "--keyring", monKeyring); err != nil {
		return err
	}
	mon, err := c.spawn("mon.a", "ceph-mon", "-c", c.conf, "-i", "a", "-f")
	if err != nil {
		return err
	}
	for {
		conn, err := net.DialTimeout("tcp", c.monAddr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-mon.done:
			c.forget(mon)
			return c.withDaemon(errors.New("ceph-mon exited"), mon)
		case <-ctx.Done():
			return c.withDaemon(fmt.Errorf("ceph-mon not listening on %s: %v", c.monAddr, ctx.Err()), mon)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// confText is the cluster's ceph.conf. Clients log to log/client.NAME.PID.log
// and have no admin socket (several in one process would fight over it).
func (c *Cluster) confText(fsid string) string {
	d := c.dir
	return fmt.Sprintf(`[global]
fsid = %[2]s
mon host = [v2:%[3]s]
public addr = 127.0.0.1
ms bind msgr1 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
auth allow insecure global id reclaim = false
keyring = %[4]s
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
run dir = %[1]s/run
crash dir = %[1]s/crash
log file = %[1]s/log/$name.log

[client]
log file = %[1]s/log/$name.$pid.log
admin socket =

[mon]
mon data = %[1]s/$name
keyring = %[1]s/mon.keyring
admin socket = %[5]s
pid file = %[1]s/run/$name.pid

[osd]
osd data = %[1]s/$name
keyring = %[1]s/$name/keyring
osd objectstore = memstore
memstore device bytes = 4294967296
osd crush initial weight = 1
admin socket = %[5]s
pid file = %[1]s/run/$name.pid
`, d, fsid, c.monAddr, c.keyring, c.adminSocket())
}

// adminSocket is where the daemons' admin sockets go: run/, unless that
// path is too long for a Unix socket (then they have none).
func (c *Cluster) adminSocket() string {
	p := filepath.Join(c.dir, "run", "$name.asok")
	if len(filepath.Join(c.dir, "run", "osd.100.asok")) >= 108 {
		return ""
	}
	return p
}

// spawn starts a daemon in the foreground, its output in log/NAME.out.
func (c *Cluster) spawn(name, prog string, args ...string) (*daemon, error) {
	outPath := filepath.Join(c.dir, "log", name+".out")
	out, err := os.Create(outPath)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command(prog, args...)
	cmd.Env = env()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %v", prog, err)
	}
	d := &daemon{name: name, cmd: cmd, log: filepath.Join(c.dir, "log", name+".log"), out: outPath, done: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		close(d.done)
	}()
	c.mu.Lock()
	c.procs = append(c.procs, d)
	c.mu.Unlock()
	return d, nil
}

// forget drops a daemon that has exited from the ones stop waits for.
func (c *Cluster) forget(d *daemon) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range c.procs {
		if p == d {
			c.procs = append(c.procs[:i], c.procs[i+1:]...)
			return
		}
	}
}

// stop kills every daemon and waits for each to be gone.
func (c *Cluster) stop() {
	c.mu.Lock()
	procs := c.procs
	c.procs = nil
	c.mu.Unlock()
	for _, d := range procs {
		d.cmd.Process.Kill()
	}
	for _, d := range procs {
		<-d.done
	}
}

// withDaemon adds the last lines of a daemon's output and log to err, and
// whether it is still running.
func (c *Cluster) withDaemon(err error, d *daemon) error {
	state := "running"
	select {
	case <-d.done:
		state = fmt.Sprintf("exited: %v", d.err)
	default:
	}
	return fmt.Errorf("%v (%s %s; %s: %s; %s: %s)", err, d.name, state,
		d.out, tail(d.out, 5), d.log, tail(d.log, 10))
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// run runs a command to completion; its error carries its output.
func (c *Cluster) run(ctx context.Context, prog string, args ...string) error {
	_, err := c.output(ctx, prog, args...)
	return err
}

// output runs a command and returns its standard output.
func (c *Cluster) output(ctx context.Context, prog string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.Join(strings.Fields(stderr.String()+" "+stdout.String()), " ")
		if len(msg) > 800 {
			msg = "..." + msg[len(msg)-800:]
		}
		return "", fmt.Errorf("%s %s: %v: %s", prog, strings.Join(args, " "), err, msg)
	}
	return stdout.String(), nil
}

// env is the test's environment without what would point a ceph program
// at another cluster.
func env() []string {
	var e []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "CEPH_ARGS=") || strings.HasPrefix(kv, "CEPH_CONF=") {
			continue
		}
		e = append(e, kv)
	}
	return e
}

// cli runs one of the cluster's command-line programs with -c Conf.
func (c *Cluster) cli(t testing.TB, prog string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := c.output(ctx, prog, append([]string{"-c", c.conf}, args...)...)
	if err != nil {
		t.Fatalf("cephtest: %v", err)
	}
	return out
}

// Ceph runs the ceph command against the cluster and returns what it printed.
func (c *Cluster) Ceph(t testing.TB, args ...string) string {
	t.Helper()
	return c.cli(t, "ceph", args...)
}

// RBD runs the rbd command against the cluster and returns what it printed.
func (c *Cluster) RBD(t testing.TB, args ...string) string {
	t.Helper()
	return c.cli(t, "rbd", args...)
}

// Rados runs the rados command against the cluster and returns what it printed.
func (c *Cluster) Rados(t testing.TB, args ...string) string {
	t.Helper()
	return c.cli(t, "rados", args...)
}

// CreateImage creates an RBD image of size octets in Pool (format 2, the
// default features: layering, exclusive-lock, object-map, fast-diff,
// deep-flatten; objects of 4 MiB).
func (c *Cluster) CreateImage(t testing.TB, name string, size int64) {
	t.Helper()
	c.RBD(t, "create", "--size", strconv.FormatInt(size, 10)+"B", c.Pool()+"/"+name)
}

// CreatePool creates a pool of one replica, initialised for RBD.
func (c *Cluster) CreatePool(t testing.TB, name string) {
	t.Helper()
	c.Ceph(t, "osd", "pool", "create", name, "8")
	c.RBD(t, "pool", "init", name)
}

// Objects returns the names of the objects in pool.
func (c *Cluster) Objects(t testing.TB, pool string) []string {
	t.Helper()
	return strings.Fields(c.Rados(t, "-p", pool, "ls"))
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// uuid returns a random (version 4) UUID.
func uuid() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
