package mount

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindIn(t *testing.T) {
	mi := `22 1 0:21 / /proc rw,nosuid - proc proc rw
40 22 0:40 / /mnt/a\040b rw,nosuid shared:1 - fuse.ddpstore iqn.x:a rw,user_id=0
41 40 0:41 / /mnt/a\040b rw - ext4 /dev/loop0 rw
50 22 0:50 / /mnt/c rw master:2 shared:3 - fuse.ddpstore iqn.x:c\134d rw
`
	for _, c := range []struct {
		dir  string
		want Entry
		ok   bool
	}{
		{"/mnt/a b", Entry{"/mnt/a b", "ext4", "/dev/loop0"}, true}, // the last one is on top
		{"/mnt/c", Entry{"/mnt/c", FSType, `iqn.x:c\d`}, true},
		{"/mnt/a\\040b", Entry{}, false},
		{"/nowhere", Entry{}, false},
	} {
		got, ok := findIn(mi, c.dir)
		if got != c.want || ok != c.ok {
			t.Errorf("%q: %+v %v, want %+v %v", c.dir, got, ok, c.want, c.ok)
		}
	}
	if got := unescape(`a\040b\`); got != `a b\` {
		t.Errorf("unescape: %q", got)
	}
}

func TestNames(t *testing.T) {
	id := ID("/mnt/a")
	if !strings.HasPrefix(id, "mnt-a-") || len(id) != len("mnt-a-")+8 || ID("/mnt/b") == id {
		t.Errorf("ID(/mnt/a) = %q", id)
	}
	long := ID("/" + strings.Repeat("x", 100))
	if len(long) != 40+1+8 {
		t.Errorf("a long mount point's ID has %d characters", len(long))
	}
	if p := StatePath("/run/d", "/mnt/a"); p != "/run/d/mounts/"+id+".json" {
		t.Errorf("state path %s", p)
	}
	if p := LogPath("/run/d", "/mnt/a"); p != "/run/d/"+id+".log" {
		t.Errorf("log path %s", p)
	}
	if s := sanitize("iqn.2024-01.org.example:disk/1 x"); s != "iqn.2024-01.org.example_disk_1_x" {
		t.Errorf("sanitize: %s", s)
	}
}

func TestSelectLUNs(t *testing.T) {
	got, err := SelectLUNs([]uint16{0, 1, 2}, nil, "t")
	if err != nil || len(got) != 3 {
		t.Errorf("none selected: %v %v", got, err)
	}
	got, err = SelectLUNs([]uint16{0, 1, 2}, []uint16{2, 0}, "t")
	if err != nil || len(got) != 2 || got[0] != 2 || got[1] != 0 {
		t.Errorf("2 and 0 selected: %v %v", got, err)
	}
	if _, err = SelectLUNs([]uint16{0}, []uint16{3}, "t"); err == nil || err.Error() != "the configuration selects LUN 3, which t does not report" {
		t.Errorf("an unreported LUN: %v", err)
	}
	if _, err = SelectLUNs(nil, nil, "t"); err == nil || err.Error() != "t reports no LUNs" {
		t.Errorf("no LUNs: %v", err)
	}
}

func TestBuffers(t *testing.T) {
	c := Config{Slots: 4, MaxWrite: 1 << 20}
	if got := c.Buffers(); got != 4*(1<<20+8192)+1<<20 {
		t.Errorf("buffers %d", got)
	}
}

func TestStateAndList(t *testing.T) {
	run := t.TempDir()
	info := Info{PID: os.Getpid(), Mountpoint: filepath.Join(run, "not-mounted"), Target: "iqn.x:a", Portal: "10.0.0.1:3260",
		Files: []File{{Name: "lun0", Path: "/m/lun0", Size: 4 << 20, BlockSize: 512, ReadOnly: true}}}
	if err := writeState(StatePath(run, info.Mountpoint), info); err != nil {
		t.Fatal(err)
	}
	back, err := ReadState(StatePath(run, info.Mountpoint))
	if err != nil || back.PID != info.PID || len(back.Files) != 1 || back.Files[0] != info.Files[0] {
		t.Fatalf("read back %+v, %v", back, err)
	}
	gone := info
	gone.PID, gone.Mountpoint = 1<<22+1, "/gone" // above pid_max's limit: no such process
	if err := writeState(StatePath(run, gone.Mountpoint), gone); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(run, "mounts", "bad.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	byDir := map[string]Status{}
	for _, st := range List(run) {
		if st.Err != nil {
			byDir["bad"] = st
			continue
		}
		byDir[st.Info.Mountpoint] = st
	}
	if st := byDir[info.Mountpoint]; st.Gone != "NOT MOUNTED" {
		t.Errorf("a live process whose mount is gone: %q", st.Gone)
	}
	if st := byDir["/gone"]; st.Gone != "PROCESS GONE" {
		t.Errorf("a dead process: %q", st.Gone)
	}
	if st, ok := byDir["bad"]; !ok || !strings.HasSuffix(st.Path, "bad.json") {
		t.Errorf("a broken state file is not listed with its error")
	}
	var b bytes.Buffer
	st := byDir["/gone"]
	st.Print(&b)
	want := "/gone: iqn.x:a at 10.0.0.1:3260, pid 4194305, PROCESS GONE\n  /m/lun0  4.0 MiB\n"
	if b.String() != want {
		t.Errorf("status:\n%s\nwant\n%s", b.String(), want)
	}
	// A session with failover paths lists them, the one in use marked.
	st.Info.Portal, st.Info.Paths = "10.0.0.2:3260", []string{"10.0.0.1:3260", "10.0.0.2:3260"}
	b.Reset()
	st.Print(&b)
	want = "/gone: iqn.x:a at 10.0.0.2:3260, pid 4194305, PROCESS GONE\n  paths: 10.0.0.1:3260, 10.0.0.2:3260 (in use)\n  /m/lun0  4.0 MiB\n"
	if b.String() != want {
		t.Errorf("status with paths:\n%s\nwant\n%s", b.String(), want)
	}
	if len(List(t.TempDir())) != 0 {
		t.Errorf("an empty run directory lists mounts")
	}
}

func TestPrintMounted(t *testing.T) {
	var b bytes.Buffer
	PrintMounted(&b, Info{Mountpoint: "/m", Target: "iqn.x:a", Portal: "10.0.0.1:3260", Files: []File{
		{Path: "/m/lun0", Size: 1 << 30, BlockSize: 512},
		{Path: "/m/lun1", Size: 3 << 19, BlockSize: 4096, ReadOnly: true},
	}})
	want := "mounted iqn.x:a at 10.0.0.1:3260 on /m:\n" +
		"  /m/lun0  1.0 GiB (512-octet blocks)\n" +
		"  /m/lun1  1.5 MiB (4096-octet blocks, read-only)\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestDetachRefusesForeignFile(t *testing.T) {
	err := Detach("/run/d", "/dev/loop7", "/srv/disk.img", nil)
	if err == nil || err.Error() != "/dev/loop7 is attached to /srv/disk.img, which ddpinitiator attach did not make (see --run-dir)" {
		t.Errorf("got %v", err)
	}
}

func TestReporter(t *testing.T) {
	var r *Reporter
	r.Report(Info{}) // the foreground's: nothing happens
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	r = &Reporter{f: pw}
	r.Report(Info{Error: "no"})
	r.Report(Info{Error: "twice"})
	b := make([]byte, 100)
	n, _ := pr.Read(b)
	if got := string(b[:n]); !strings.Contains(got, `"error":"no"`) || strings.Contains(got, "twice") {
		t.Errorf("reported %q", got)
	}
}

func TestWaitExit(t *testing.T) {
	if err := waitExit(os.Getpid(), 0); err != nil {
		t.Errorf("this process: %v", err)
	}
	if err := waitExit(1<<22+1, 0); err != nil {
		t.Errorf("no such process: %v", err)
	}
	if !Alive(os.Getpid()) || Alive(1<<22+1) {
		t.Errorf("Alive")
	}
}

func TestDropFlags(t *testing.T) {
	fs := flag.NewFlagSet("attach", flag.ContinueOnError)
	fs.Bool("nbd", false, "")
	fs.Bool("daemon", false, "")
	fs.String("run-dir", "", "")
	fs.String("target", "", "")
	for _, c := range []struct {
		args, drop []string
		want       string
	}{
		{[]string{"--nbd", "--target", "t", "--run-dir", "/r", "--daemon"}, []string{"nbd", "run-dir", "daemon"}, "--target t"},
		{[]string{"-nbd=true", "--run-dir=/r", "--target=t"}, []string{"nbd", "run-dir"}, "--target=t"},
		{[]string{"--target", "nbd", "--nbd"}, []string{"nbd"}, "--target nbd"}, // a value is no flag
		{[]string{"--log-file", "/l", "-x"}, []string{"log-file"}, "-x"},        // not in fs: it takes a value
		{nil, []string{"nbd"}, ""},
	} {
		if got := strings.Join(DropFlags(fs, c.args, c.drop...), " "); got != c.want {
			t.Errorf("DropFlags(%q, %q) = %q, want %q", c.args, c.drop, got, c.want)
		}
	}
}

func TestDefaultRunDir(t *testing.T) {
	d := DefaultRunDir()
	if os.Geteuid() == 0 && d != "/run/ddpinitiator" || os.Geteuid() != 0 && !strings.Contains(d, "ddpinitiator") {
		t.Errorf("DefaultRunDir() = %s (euid %d)", d, os.Geteuid())
	}
}

func TestDetachLoopRefuses(t *testing.T) {
	run := t.TempDir()
	var out bytes.Buffer
	for _, dev := range []string{"/dev/sda", "/dev/nbd0", "/dev/loopy", filepath.Join(run, "loop")} {
		err := DetachLoop(run, dev, &out)
		if !IsUsage(err) || !strings.Contains(err.Error(), "is not a loop device") {
			t.Errorf("%s: %v, want a usage error: not a loop device", dev, err)
		}
	}
	// A loop device that does not exist is not attached: a failure, not
	// a usage error.
	err := DetachLoop(run, "/dev/loop987654", &out)
	if err == nil || IsUsage(err) || err.Error() != "/dev/loop987654 is not attached" {
		t.Errorf("an unattached loop device: %v", err)
	}
	if out.Len() != 0 {
		t.Errorf("refusals reported steps: %q", out.String())
	}
	if IsUsage(nil) || IsUsage(errors.New("x")) {
		t.Error("IsUsage of nil or a plain error")
	}
}

func TestReporterFail(t *testing.T) {
	var log bytes.Buffer
	var r *Reporter
	r.Fail(&log, "ddpinitiator mount", errors.New("no LUNs")) // the foreground's: only the line
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	r = &Reporter{f: pw}
	r.Fail(&log, "ddpinitiator attach", errors.New("login to t at p: refused"))
	if want := "ddpinitiator mount: no LUNs\nddpinitiator attach: login to t at p: refused\n"; log.String() != want {
		t.Errorf("printed %q, want %q", log.String(), want)
	}
	var info Info
	if err := json.NewDecoder(pr).Decode(&info); err != nil || info.Error != "login to t at p: refused" {
		t.Errorf("reported %+v (%v), want the error without the prefix", info, err)
	}
}

func TestPrintList(t *testing.T) {
	run := t.TempDir()
	var out bytes.Buffer
	var warned []string
	warn := func(msg string) { warned = append(warned, msg) }
	if n, served := PrintList(run, &out, warn); n != 0 || !served || out.Len() != 0 || warned != nil {
		t.Errorf("no mounts: %d %v %q %q", n, served, out.String(), warned)
	}
	// A mount whose process is gone makes the list not served.
	gone := Info{PID: 1<<22 + 1, Mountpoint: "/gone", Target: "iqn.x:a", Portal: "10.0.0.1:3260"}
	if err := writeState(StatePath(run, gone.Mountpoint), gone); err != nil {
		t.Fatal(err)
	}
	n, served := PrintList(run, &out, warn)
	if n != 1 || served || out.String() != "/gone: iqn.x:a at 10.0.0.1:3260, pid 4194305, PROCESS GONE\n" || warned != nil {
		t.Errorf("a dead mount: %d %v %q %q", n, served, out.String(), warned)
	}
	// A state file that cannot be read is counted, not printed, and warned of.
	os.Remove(StatePath(run, gone.Mountpoint))
	bad := filepath.Join(run, "mounts", "bad.json")
	if err := os.WriteFile(bad, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	n, served = PrintList(run, &out, warn)
	if n != 1 || served || out.Len() != 0 || len(warned) != 1 || !strings.HasPrefix(warned[0], bad+": ") {
		t.Errorf("a broken state file: %d %v %q %q", n, served, out.String(), warned)
	}
}
