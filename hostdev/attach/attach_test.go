package attach

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/hostdev/mount"
	"github.com/ddpstore/ddpstore/hostdev/nbd"
	"github.com/ddpstore/ddpstore/internal/testtarget"
	"github.com/ddpstore/ddpstore/transport/initiator"
	log "github.com/sirupsen/logrus"
)

func TestMain(m *testing.M) {
	log.SetOutput(io.Discard) // Serve logs through the standard logger
	os.Exit(m.Run())
}

// deadPID is a process that does not exist (above the kernel's pid_max).
const deadPID = 1<<22 + 1

func TestKindOf(t *testing.T) {
	for _, c := range []struct {
		dev  string
		want *Kind
		idx  int
	}{
		{"/dev/nbd0", NBD, 0},
		{"/dev/nbd15", NBD, 15},
		{"nbd3", NBD, 3},
		{"/dev/ublkb7", UBLK, 7},
		{"/dev/ublkb120", UBLK, 120},
		{"/dev/ublkc0", nil, 0}, // ublk's character device, not its block device
		{"/dev/nbd", nil, 0},
		{"/dev/nbd0p1", nil, 0},
		{"/dev/loop0", nil, 0},
		{"/dev/sda", nil, 0},
	} {
		if got := KindOf(c.dev); got != c.want {
			t.Errorf("KindOf(%s) = %v, want %v", c.dev, got, c.want)
		}
		if c.want != nil {
			if got := devIndex(c.dev); got != c.idx {
				t.Errorf("devIndex(%s) = %d, want %d", c.dev, got, c.idx)
			}
		}
	}
	if NBD.Flag != "--"+NBD.Name || UBLK.Flag != "--"+UBLK.Name || len(Kinds) != 2 {
		t.Errorf("kinds: %+v %+v", NBD, UBLK)
	}
}

func TestUnavailable(t *testing.T) {
	k := &Kind{Module: "nbd", Node: "/nonexistent/nbd0", available: func() error { return nil }}
	if err := k.Unavailable(); err == nil || !strings.HasPrefix(err.Error(), "this kernel has no nbd (/nonexistent/nbd0: ") ||
		!strings.HasSuffix(err.Error(), "); use the default loop device") {
		t.Errorf("missing node: %v", err)
	}
	k = &Kind{Module: "ublk_drv", Node: "/"}
	if err := k.Unavailable(); err == nil || err.Error() != "the ublk_drv backend is not implemented; use the default loop device" {
		t.Errorf("no implementation: %v", err)
	}
	k = &Kind{Module: "nbd", Node: "/", available: func() error { return errors.New("no netlink family nbd") }}
	if err := k.Unavailable(); err == nil || err.Error() != "nbd: no netlink family nbd" {
		t.Errorf("refused: %v", err)
	}
	k = &Kind{Module: "nbd", Node: "/", available: func() error { return nil }}
	err := k.Unavailable()
	if os.Geteuid() == 0 && err != nil || os.Geteuid() != 0 && (err == nil || err.Error() != "nbd devices need root") {
		t.Errorf("available (euid %d): %v", os.Geteuid(), err)
	}
}

func TestPaths(t *testing.T) {
	if p := StatePath("/run/d", "/dev/nbd3"); p != "/run/d/blockdevs/nbd3.json" {
		t.Errorf("state path %s", p)
	}
	p := LogPath("/run/d", "ublk", "iqn.2024-01.org.example:disk/1")
	if !regexp.MustCompile(`^/run/d/ublk-iqn\.2024-01\.org\.example_disk_1-[0-9]+\.log$`).MatchString(p) {
		t.Errorf("log path %s", p)
	}
	if LogPath("/run/d", "ublk", "t") == LogPath("/run/d", "ublk", "t") {
		t.Errorf("two log paths are the same")
	}
}

func TestStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	st := State{PID: 42, Device: "/dev/ublkb2", Kind: "ublk", Target: "iqn.x:t", Portal: "10.0.0.1:3260", LUN: 3,
		Size: 1 << 30, BlockSize: 4096, ReadOnly: true, Log: "/run/d/ublk.log"}
	path := StatePath(dir, st.Device)
	if err := writeState(path, st); err != nil {
		t.Fatal(err)
	}
	got, err := ReadState(path)
	if err != nil || got != st {
		t.Errorf("read back %+v, %v; want %+v", got, err, st)
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary file is left: %v", err)
	}
	// The field names are what other tools (and the integration tests) read.
	b, _ := os.ReadFile(path)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"pid", "device", "kind", "target", "portal", "lun", "size", "block_size", "read_only", "log"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no %q in %s", k, b)
		}
	}
	st.ReadOnly, st.Log = false, ""
	if err := writeState(path, st); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); bytes.Contains(b, []byte("read_only")) || bytes.Contains(b, []byte(`"log"`)) {
		t.Errorf("empty optional fields written:\n%s", b)
	}
	if _, err := ReadState(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing state: %v", err)
	}
}

func TestListAndPrint(t *testing.T) {
	dir := t.TempDir()
	for _, st := range []State{
		{PID: os.Getpid(), Device: "/dev/nbd0", Kind: "nbd", Target: "iqn.x:a", Portal: "10.0.0.1:3260", LUN: 0, Size: 4 << 20},
		{PID: deadPID, Device: "/dev/ublkb1", Kind: "ublk", Target: "iqn.x:b", Portal: "10.0.0.2:3260", LUN: 2, Size: 3 << 29},
		{PID: os.Getpid(), Device: "/dev/nbd1", Kind: "nbd", Target: "iqn.x:a", Portal: "10.0.0.1:3260", LUN: 1, Size: 1 << 30},
	} {
		if err := writeState(StatePath(dir, st.Device), st); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "blockdevs", "broken.json"), []byte("{"), 0o644)
	var b bytes.Buffer
	for _, st := range List(dir) {
		st.Print(&b)
	}
	want := fmt.Sprintf("/dev/nbd0: LUN 0 of iqn.x:a at 10.0.0.1:3260, 4.0 MiB, pid %d, served\n", os.Getpid()) +
		fmt.Sprintf("/dev/nbd1: LUN 1 of iqn.x:a at 10.0.0.1:3260, 1.0 GiB, pid %d, served\n", os.Getpid()) +
		fmt.Sprintf("/dev/ublkb1: LUN 2 of iqn.x:b at 10.0.0.2:3260, 1.5 GiB, pid %d, PROCESS GONE\n", deadPID)
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	if got := devicesOf(dir, os.Getpid()); strings.Join(got, " ") != "/dev/nbd0 /dev/nbd1" {
		t.Errorf("devices of this process: %v", got)
	}
	if got := List(filepath.Join(dir, "none")); len(got) != 0 {
		t.Errorf("an empty run directory lists %v", got)
	}
}

func TestRecoverable(t *testing.T) {
	dir := t.TempDir()
	if _, err := Recoverable(dir, "/dev/ublkb0"); err == nil || !strings.HasPrefix(err.Error(), "no state of it (open ") ||
		!strings.HasSuffix(err.Error(), "; see --run-dir)") {
		t.Errorf("no state: %v", err)
	}
	for _, c := range []struct {
		pid  int
		want string
	}{
		{deadPID, ""},
		{os.Getpid(), ""}, // the daemon child that recovers it reads it again
		{os.Getppid(), fmt.Sprintf("it is still served by pid %d", os.Getppid())},
	} {
		writeState(StatePath(dir, "/dev/ublkb0"), State{PID: c.pid, Device: "/dev/ublkb0", Target: "iqn.x:t", Portal: "p:1", LUN: 4})
		st, err := Recoverable(dir, "/dev/ublkb0")
		if c.want == "" && (err != nil || st.LUN != 4 || st.Target != "iqn.x:t" || st.Portal != "p:1") ||
			c.want != "" && (err == nil || err.Error() != c.want) {
			t.Errorf("pid %d: %+v %v, want %q", c.pid, st, err, c.want)
		}
	}
}

func TestDetachRefuses(t *testing.T) {
	dir := t.TempDir()
	if err := Detach(dir, "/dev/loop0", nil); err == nil || err.Error() != "/dev/loop0 is not an NBD or ublk device (/dev/nbdN, /dev/ublkbN)" {
		t.Errorf("a loop device: %v", err)
	}
	want := "/dev/nbd7 was not attached by ddpinitiator attach --nbd (no " + dir + "/blockdevs/nbd7.json; see --run-dir)"
	if err := Detach(dir, "/dev/nbd7", nil); err == nil || err.Error() != want {
		t.Errorf("no state: %v, want %s", err, want)
	}
}

func TestInUse(t *testing.T) {
	f := filepath.Join(t.TempDir(), "f")
	os.WriteFile(f, nil, 0o644)
	if err := inUse(f); err != nil {
		t.Errorf("a file nobody holds: %v", err)
	}
	if err := inUse(f + "-missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing device: %v", err)
	}
}

func TestBuffers(t *testing.T) {
	c := Config{Slots: 4, MaxWrite: 1 << 20}
	mc := mount.Config{Slots: 4, MaxWrite: 1 << 20}
	if c.Buffers() != mc.Buffers() {
		t.Errorf("buffers %d, a mount's %d", c.Buffers(), mc.Buffers())
	}
}

// fakeDevice stands for a kernel device: a path, and Done once it is
// disconnected.
type fakeDevice struct {
	path string
	once sync.Once
	done chan struct{}
}

func (d *fakeDevice) Path() string          { return d.path }
func (d *fakeDevice) Done() <-chan struct{} { return d.done }
func (d *fakeDevice) Err() error            { return nil }
func (d *fakeDevice) Disconnect(time.Duration) error {
	d.once.Do(func() { close(d.done) })
	return nil
}

// fakeKind makes fakeDevices, files under dir, and hands them to made;
// attach fails for LUN failLUN.
func fakeKind(dir string, made chan<- *fakeDevice, failLUN int) *Kind {
	n := 0
	return &Kind{
		Name: "fake", Flag: "--fake",
		attach: func(_ context.Context, lun *nbd.LUN, _ int, _ string, _ *log.Entry) (device, error) {
			if int(lun.Disk.LUN()) == failLUN {
				return nil, errors.New("refused")
			}
			d := &fakeDevice{path: filepath.Join(dir, fmt.Sprintf("fake%d", n)), done: make(chan struct{})}
			n++
			os.WriteFile(d.path, nil, 0o644)
			made <- d
			return d, nil
		},
	}
}

// TestServe serves two LUNs of a target as fake devices: their state is
// written and their paths printed; one taken down (as the kernel does at
// detach) loses its state, a signal takes down the other, and Serve logs
// out.
func TestServe(t *testing.T) {
	tt := testtarget.Start(t, testtarget.Memory(t, 4<<20), testtarget.Memory(t, 8<<20))
	dir := t.TempDir()
	made := make(chan *fakeDevice, 2)
	c := Config{Kind: fakeKind(dir, made, -1), Target: testtarget.TargetName, Portal: tt.Addr, RunDir: dir, Slots: 4, MaxWrite: 128 << 10}
	s := tt.Dial(t, initiator.Config{Buffers: c.Buffers()})
	sigs := make(chan os.Signal, 1)
	var out bytes.Buffer
	errc := make(chan error, 1)
	go func() { errc <- Serve(context.Background(), s, c, &out, sigs, nil) }()
	d0, d1 := <-made, <-made
	deadline := time.Now().Add(10 * time.Second)
	for len(List(dir)) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	l := List(dir)
	if len(l) != 2 {
		t.Fatalf("states %+v", l)
	}
	byLUN := map[uint16]State{}
	for _, st := range l {
		byLUN[st.LUN] = st.State
	}
	for lun, size := range map[uint16]int64{0: 4 << 20, 1: 8 << 20} {
		st := byLUN[lun]
		if st.Size != size || st.Kind != "fake" || st.PID != os.Getpid() || st.Target != testtarget.TargetName || st.Portal != tt.Addr ||
			st.Device != d0.path && st.Device != d1.path {
			t.Errorf("LUN %d: state %+v", lun, st)
		}
	}
	d0.Disconnect(0)
	for len(List(dir)) != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if l := List(dir); len(l) != 1 || l[0].Device != d1.path {
		t.Fatalf("after one is taken down: %+v", l)
	}
	sigs <- os.Interrupt
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not end after the signal")
	}
	if l := List(dir); len(l) != 0 {
		t.Errorf("states left: %+v", l)
	}
	if out.String() != d0.path+"\n"+d1.path+"\n" {
		t.Errorf("printed %q", out.String())
	}
	if s.Err() == nil {
		t.Errorf("the session is still up: no logout")
	}
}

// TestServeFails: a device that cannot be made takes down those made
// before it, and so does a LUN the configuration selects that the target
// does not report; a recovery without state fails before any device.
func TestServeFails(t *testing.T) {
	tt := testtarget.Start(t, testtarget.Memory(t, 4<<20), testtarget.Memory(t, 4<<20))
	dir := t.TempDir()
	made := make(chan *fakeDevice, 2)
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Kind = fakeKind(dir, made, 1) }, "LUN 1: refused"},
		{func(c *Config) { c.LUNs = []uint16{0, 5} }, "the configuration selects LUN 5, which " + testtarget.TargetName + " does not report"},
		{func(c *Config) { c.Recover = "/dev/nbd9" }, "recovering /dev/nbd9: open " + dir + "/blockdevs/nbd9.json: no such file or directory"},
	} {
		c := Config{Kind: fakeKind(dir, made, -1), Target: testtarget.TargetName, RunDir: dir, Slots: 4, MaxWrite: 128 << 10}
		tc.edit(&c)
		s := tt.Dial(t, initiator.Config{Buffers: c.Buffers()})
		err := Serve(context.Background(), s, c, nil, nil, nil)
		if err == nil || err.Error() != tc.want {
			t.Errorf("got %v, want %s", err, tc.want)
		}
		select {
		case d := <-made:
			select {
			case <-d.Done():
			default:
				t.Errorf("%s is left up", d.path)
			}
		default:
		}
		if l := List(dir); len(l) != 0 {
			t.Errorf("states left: %+v", l)
		}
	}
}

func TestSelect(t *testing.T) {
	for _, c := range []struct {
		nbd, ublk, foreground bool
		want                  *Kind
		err                   string
	}{
		{false, false, false, nil, ""}, // loop devices
		{true, false, false, NBD, ""},
		{false, true, true, UBLK, ""},
		{true, true, false, nil, "--nbd and --ublk exclude each other"},
		{true, true, true, nil, "--nbd and --ublk exclude each other"},
		{false, false, true, nil, "--foreground goes with --nbd or --ublk"},
	} {
		k, err := Select(c.nbd, c.ublk, c.foreground)
		if k != c.want || c.err == "" && err != nil || c.err != "" && (err == nil || err.Error() != c.err || !IsUsage(err)) {
			t.Errorf("nbd %v ublk %v foreground %v: %v %v, want %v %q", c.nbd, c.ublk, c.foreground, k, err, c.want, c.err)
		}
	}
}

func TestForRecovery(t *testing.T) {
	dir := t.TempDir()
	// No state: a failure, not a usage error, whatever the device.
	for _, dev := range []string{"/dev/ublkb0", "/dev/sda"} {
		_, k, err := ForRecovery(dir, dev, false, false)
		if k != nil || err == nil || IsUsage(err) || !strings.HasPrefix(err.Error(), "--recover "+dev+": no state of it (") {
			t.Errorf("%s without state: %v %v", dev, k, err)
		}
	}
	for _, dev := range []string{"/dev/ublkb0", "/dev/nbd3", "/dev/sda"} {
		writeState(StatePath(dir, dev), State{PID: deadPID, Device: dev, Target: "iqn.x:t", Portal: "p:1", LUN: 2})
	}
	writeState(StatePath(dir, "/dev/nbd4"), State{PID: os.Getppid(), Device: "/dev/nbd4"})
	for _, c := range []struct {
		dev        string
		nbd, ublk  bool
		want       *Kind
		err        string
		usageError bool
	}{
		{"/dev/ublkb0", false, false, UBLK, "", false},
		{"/dev/ublkb0", false, true, UBLK, "", false},
		{"/dev/nbd3", true, false, NBD, "", false},
		{"/dev/nbd3", false, false, NBD, "", false},
		{"/dev/ublkb0", true, false, nil, "--recover /dev/ublkb0 is not a device of the kind asked for", true},
		{"/dev/nbd3", false, true, nil, "--recover /dev/nbd3 is not a device of the kind asked for", true},
		{"/dev/sda", false, false, nil, "--recover takes an NBD or ublk device (/dev/nbdN, /dev/ublkbN), not /dev/sda", true},
		{"/dev/nbd4", true, false, nil, fmt.Sprintf("--recover /dev/nbd4: it is still served by pid %d", os.Getppid()), false},
	} {
		st, k, err := ForRecovery(dir, c.dev, c.nbd, c.ublk)
		if k != c.want || c.err == "" && (err != nil || st.Target != "iqn.x:t" || st.Portal != "p:1" || st.LUN != 2) ||
			c.err != "" && (err == nil || err.Error() != c.err || IsUsage(err) != c.usageError) {
			t.Errorf("%s nbd %v ublk %v: %+v %v %v, want %v %q", c.dev, c.nbd, c.ublk, st, k, err, c.want, c.err)
		}
	}
}

func TestPrintList(t *testing.T) {
	dir := t.TempDir()
	var b bytes.Buffer
	if n, served := PrintList(dir, &b); n != 0 || !served || b.Len() != 0 {
		t.Errorf("no devices: %d %v %q", n, served, b.String())
	}
	live := State{PID: os.Getpid(), Device: "/dev/nbd0", Kind: "nbd", Target: "iqn.x:a", Portal: "10.0.0.1:3260", Size: 4 << 20}
	writeState(StatePath(dir, live.Device), live)
	if n, served := PrintList(dir, &b); n != 1 || !served || b.String() != fmt.Sprintf("/dev/nbd0: LUN 0 of iqn.x:a at 10.0.0.1:3260, 4.0 MiB, pid %d, served\n", os.Getpid()) {
		t.Errorf("a served device: %d %v %q", n, served, b.String())
	}
	writeState(StatePath(dir, "/dev/ublkb1"), State{PID: deadPID, Device: "/dev/ublkb1", Kind: "ublk", Target: "iqn.x:b", Portal: "p:1", LUN: 2, Size: 1 << 20})
	b.Reset()
	if n, served := PrintList(dir, &b); n != 2 || served || !strings.HasSuffix(b.String(), "PROCESS GONE\n") {
		t.Errorf("one device's process gone: %d %v %q", n, served, b.String())
	}
}
