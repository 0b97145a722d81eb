package daemon

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/transport/initiator"
)

const gatewayTarget = "iqn.2026-11.io.ddpstore:shared"

// dialAs is dial with another InitiatorName.
func dialAs(t *testing.T, addr, target, name string) *initiator.Session {
	t.Helper()
	return dialConfig(t, addr, initiator.Config{InitiatorName: name, TargetName: target})
}

// gatewayConfig writes the configuration of one gateway of the shared
// image file img: its portal, its own control socket and state directory,
// and the ALUA section (alua "" for none).
func gatewayConfig(t *testing.T, dir, addr, img, alua string) string {
	t.Helper()
	return gatewayConfigLUN(t, dir, addr, fmt.Sprintf("{id: 0, path: %s, size: 16MiB}", img), alua)
}

// gatewayConfigLUN is gatewayConfig with LUN 0 as lun says.
func gatewayConfigLUN(t *testing.T, dir, addr, lun, alua string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return writeConfig(t, dir, fmt.Sprintf(`
portals:
  - listen: %s
targets:
  - name: %s
    luns:
      - %s
%s
control: {socket: %s}
state: {dir: %s}
log: {level: warn}
`, addr, gatewayTarget, lun, alua, filepath.Join(dir, "ctl.sock"), filepath.Join(dir, "state")))
}

// rtpg sends REPORT TARGET PORT GROUPS and returns (group id, state) pairs
// with each group's one relative port.
func rtpg(t *testing.T, s *initiator.Session) [][3]uint16 {
	t.Helper()
	buf, _ := s.Alloc(4096)
	cdb := []byte{0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0}
	do(t, s, &initiator.Command{CDB: cdb, Dir: initiator.DataIn, Data: buf})
	n := int(binary.BigEndian.Uint32(buf))
	var gs [][3]uint16
	for d := buf[4 : 4+n]; len(d) >= 8; {
		ports := int(d[7])
		gs = append(gs, [3]uint16{binary.BigEndian.Uint16(d[2:]), uint16(d[0] & 0x0f), binary.BigEndian.Uint16(d[10:])})
		d = d[8+4*ports:]
	}
	return gs
}

// relativePort reads the relative target port identifier of the path from
// INQUIRY's Device Identification page.
func relativePort(t *testing.T, s *initiator.Session) uint16 {
	t.Helper()
	buf, _ := s.Alloc(4096)
	do(t, s, &initiator.Command{CDB: []byte{0x12, 1, 0x83, 1, 0, 0}, Dir: initiator.DataIn, Data: buf[:256]})
	for d := buf[4 : 4+int(binary.BigEndian.Uint16(buf[2:]))]; len(d) >= 4; d = d[4+int(d[3]):] {
		if d[1]&0x3f == 0x14 { // association target port, type relative port
			return binary.BigEndian.Uint16(d[6:])
		}
	}
	t.Fatal("no relative target port designator")
	return 0
}

// TestTwoGatewaysALUA: two ddptarget processes export one image under one
// target name, each as its own target port group; both report both
// groups with their states (implicit ALUA), each its own port, and what is
// written through one is read through the other.
func TestTwoGatewaysALUA(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "shared.img")
	groups := "    alua: {group: %d, groups: [{id: 1, state: active-optimized}, {id: 2, state: active-non-optimized}]}"
	addr1, addr2 := freePort(t), freePort(t)
	startTarget(t, gatewayConfig(t, filepath.Join(dir, "gw1"), addr1, img, fmt.Sprintf(groups, 1)), addr1)
	startTarget(t, gatewayConfig(t, filepath.Join(dir, "gw2"), addr2, img, fmt.Sprintf(groups, 2)), addr2)
	s1, s2 := dial(t, addr1, gatewayTarget), dial(t, addr2, gatewayTarget)

	want := [][3]uint16{{1, 0, 1}, {2, 1, 2}} // AO on port 1, ANO on port 2
	for i, s := range []*initiator.Session{s1, s2} {
		if got := rtpg(t, s); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("gateway %d reports groups %v, want %v", i+1, got, want)
		}
		if p := relativePort(t, s); p != uint16(i+1) {
			t.Errorf("gateway %d says its port is %d", i+1, p)
		}
	}
	// One image: each gateway reads what the other wrote.
	for i, pair := range [][2]*initiator.Session{{s1, s2}, {s2, s1}} {
		w, _ := pair[0].Alloc(1 << 20)
		rand.New(rand.NewSource(int64(i))).Read(w)
		do(t, pair[0], &initiator.Command{CDB: rw16(0x8a, uint64(i)*4096, 2048), Dir: initiator.DataOut, Data: w})
		r, _ := pair[1].Alloc(1 << 20)
		do(t, pair[1], &initiator.Command{CDB: rw16(0x88, uint64(i)*4096, 2048), Dir: initiator.DataIn, Data: r})
		if !bytes.Equal(r, w) {
			t.Fatalf("pass %d: the other gateway does not read what was written", i)
		}
	}
}

// TestPersistentReservationSurvivesRestart: a registration and
// reservation made with APTPL are in the state directory before GOOD and
// hold after ddptarget restarts: another initiator sees the key and the
// reservation, and its WRITE is a RESERVATION CONFLICT.
func TestPersistentReservationSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	addr := freePort(t)
	cfg := gatewayConfig(t, dir, addr, filepath.Join(dir, "disk.img"), "")
	p := startTarget(t, cfg, addr)
	a := dialAs(t, addr, gatewayTarget, "iqn.2026-11.io.ddpstore:node-a")
	params, _ := a.Alloc(4096)
	params = params[:24]
	binary.BigEndian.PutUint64(params[8:], 0xa1a1) // SERVICE ACTION RESERVATION KEY
	params[20] = 0x01                              // APTPL
	do(t, a, &initiator.Command{CDB: []byte{0x5f, 0x00, 0, 0, 0, 0, 0, 0, 24, 0}, Dir: initiator.DataOut, Data: params})
	clear(params)
	binary.BigEndian.PutUint64(params, 0xa1a1)
	do(t, a, &initiator.Command{CDB: []byte{0x5f, 0x01, 0x01, 0, 0, 0, 0, 0, 24, 0}, Dir: initiator.DataOut, Data: params}) // RESERVE, Write Exclusive
	state := filepath.Join(dir, "state", "pr", gatewayTarget, "lun0.json")
	if _, err := os.Stat(state); err != nil {
		t.Fatalf("no state file after REGISTER with APTPL: %v", err)
	}
	a.Close()
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d after SIGTERM", code)
	}

	startTarget(t, cfg, addr)
	b := dialAs(t, addr, gatewayTarget, "iqn.2026-11.io.ddpstore:node-b")
	buf, _ := b.Alloc(1 << 20)
	do(t, b, &initiator.Command{CDB: []byte{0x5e, 0x01, 0, 0, 0, 0, 0, 0, 64, 0}, Dir: initiator.DataIn, Data: buf[:64]}) // READ RESERVATION
	if binary.BigEndian.Uint32(buf[4:]) != 16 || binary.BigEndian.Uint64(buf[8:]) != 0xa1a1 || buf[21] != 0x01 {
		t.Fatalf("READ RESERVATION after restart: %x", buf[:24])
	}
	w := &initiator.Command{CDB: rw16(0x8a, 0, 8), Dir: initiator.DataOut, Data: buf[:4096]}
	if err := b.Do(context.Background(), w); err != nil || w.Status != 0x18 {
		t.Fatalf("another initiator's WRITE under the kept reservation: %v, status %#x, want RESERVATION CONFLICT", err, w.Status)
	}
	r := &initiator.Command{CDB: rw16(0x88, 0, 8), Dir: initiator.DataIn, Data: buf[:4096]}
	do(t, b, r) // Write Exclusive: reads are allowed
}

// TestGatewayDies: a session with both gateways of a shared image as its
// portals keeps doing verified I/O when the gateway it uses is killed
// (SIGKILL): it moves to the other, reissues what was outstanding, and
// everything acknowledged before the kill reads back through the survivor.
func TestGatewayDies(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "shared.img")
	groups := "    alua: {group: %d, groups: [{id: 1, state: active-optimized}, {id: 2, state: active-non-optimized}]}"
	addr1, addr2 := freePort(t), freePort(t)
	gw1 := startTarget(t, gatewayConfig(t, filepath.Join(dir, "gw1"), addr1, img, fmt.Sprintf(groups, 1)), addr1)
	startTarget(t, gatewayConfig(t, filepath.Join(dir, "gw2"), addr2, img, fmt.Sprintf(groups, 2)), addr2)
	s := dialConfig(t, addr1, initiator.Config{InitiatorName: initiatorName, TargetName: gatewayTarget,
		RecoveryTimeout: 30 * time.Second, Alternates: []string{addr2}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Four writers, each on its own 1 MiB: write a block run, read it back,
	// remember what was acknowledged.
	type ack struct {
		lba  uint64
		data []byte
	}
	acked := make([][]ack, 4)
	stop := make(chan struct{})
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			buf, _ := s.Alloc(64 << 10)
			rb, _ := s.Alloc(64 << 10)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				lba := uint64(w*2048 + (i%16)*128)
				rng.Read(buf)
				wc := &initiator.Command{CDB: rw16(0x8a, lba, 128), Dir: initiator.DataOut, Data: buf}
				if err := s.Do(ctx, wc); err != nil || wc.Status != 0 {
					errs <- fmt.Errorf("writer %d: WRITE at %d: %v status %#x", w, lba, err, wc.Status)
					return
				}
				acked[w] = append(acked[w], ack{lba, append([]byte(nil), buf...)})
				rc := &initiator.Command{CDB: rw16(0x88, lba, 128), Dir: initiator.DataIn, Data: rb}
				if err := s.Do(ctx, rc); err != nil || rc.Status != 0 || !bytes.Equal(rb, buf) {
					errs <- fmt.Errorf("writer %d: READ at %d: %v status %#x, data equal %v", w, lba, err, rc.Status, bytes.Equal(rb, buf))
					return
				}
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	gw1.cmd.Process.Kill()
	<-gw1.done
	deadline := time.Now().Add(30 * time.Second)
	for s.Portal() != addr2 {
		if time.Now().After(deadline) {
			t.Fatalf("the session did not move to the surviving gateway: on %s, err %v", s.Portal(), s.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second) // I/O through the survivor
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The last acknowledged write of every block run reads back.
	rb, _ := s.Alloc(64 << 10)
	n := 0
	for w := range acked {
		last := map[uint64][]byte{}
		for _, a := range acked[w] {
			last[a.lba] = a.data
		}
		for lba, want := range last {
			rc := &initiator.Command{CDB: rw16(0x88, lba, 128), Dir: initiator.DataIn, Data: rb}
			do(t, s, rc)
			if !bytes.Equal(rb, want) {
				t.Fatalf("LBA %d: the last acknowledged write is not what the survivor reads", lba)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("nothing was written")
	}
	t.Logf("%d block runs checked through the survivor", n)
}

// TestMountGatewayDies: a mount of a shared image whose configuration
// lists both gateways stays up when the one in use is killed during a
// verifying fio: fio finishes without an error, and status shows the
// survivor in use among the paths.
func TestMountGatewayDies(t *testing.T) {
	needMount(t)
	dir := t.TempDir()
	mountGatewayDies(t, dir, fmt.Sprintf("{id: 0, path: %s, size: 16MiB}", filepath.Join(dir, "shared.img")), false)
}

// TestMountRoundRobinGatewayDies: a round-robin mount over two
// active/optimized gateways keeps fio verify going, without an error,
// when one is killed with -9.
func TestMountRoundRobinGatewayDies(t *testing.T) {
	needMount(t)
	dir := t.TempDir()
	mountGatewayDies(t, dir, fmt.Sprintf("{id: 0, path: %s, size: 16MiB}", filepath.Join(dir, "shared.img")), true)
}

// mountGatewayDies mounts LUN 0 (as lun says) of two gateways, runs fio
// verify through the mount, kills the gateway in use with -9 in the
// middle, and checks that fio saw no error and the mount moved to the
// other gateway. It returns the longest write fio waited for: the pause
// the failover caused.
//
// With roundRobin the mount uses both gateways at once (multipath:
// round-robin, both active/optimized), and keeps going on the survivor.
func mountGatewayDies(t *testing.T, dir, lun string, roundRobin bool) time.Duration {
	bin := need(t, "fio", "fio")
	groups := "    alua: {group: %d, groups: [{id: 1, state: active-optimized}, {id: 2, state: active-non-optimized}]}"
	mode := ""
	if roundRobin {
		groups = "    alua: {group: %d, groups: [{id: 1, state: active-optimized}, {id: 2, state: active-optimized}]}"
		mode = "    multipath: round-robin\n"
	}
	addr1, addr2 := freePort(t), freePort(t)
	cfg1 := gatewayConfigLUN(t, filepath.Join(dir, "gw1"), addr1, lun, fmt.Sprintf(groups, 1))
	gw1 := startTarget(t, cfg1, addr1)
	startTarget(t, gatewayConfigLUN(t, filepath.Join(dir, "gw2"), addr2, lun, fmt.Sprintf(groups, 2)), addr2)
	icfg := filepath.Join(dir, "initiator.yaml")
	os.WriteFile(icfg, []byte(fmt.Sprintf("initiator_name: %s\ntargets:\n  - name: %s\n    portals: [%s, %s]\n%srecovery_timeout: 60s\nnop: {interval: 1s, timeout: 5s}\n",
		initiatorName, gatewayTarget, addr1, addr2, mode)), 0o644)
	runDir, mnt := filepath.Join(dir, "run"), filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	mustRun(t, ddpinitiator(t), "mount", "--daemon", "--config", icfg, "--run-dir", runDir, mnt)
	t.Cleanup(func() {
		if out, code := run(ddpinitiator(t), "umount", "--run-dir", runDir, mnt); code != 0 {
			t.Errorf("umount: exit %d\n%s", code, out)
		}
	})
	if out := mustRun(t, ddpinitiator(t), "status", "--run-dir", runDir); roundRobin &&
		!strings.Contains(out, "paths, round-robin: "+addr1+" (up, active/optimized), "+addr2+" (up, active/optimized)\n") ||
		!roundRobin && (!strings.Contains(out, " at "+addr1+",") ||
			!strings.Contains(out, "paths: "+addr1+" (in use), "+addr2) ||
			!strings.Contains(out, "ALUA port groups: 1 active/optimized (in use), 2 active/non-optimized\n")) {
		t.Fatalf("status before the failover:\n%s", out)
	}
	job := filepath.Join(dir, "failover.fio")
	os.WriteFile(job, []byte(`[global]
filename=${DDP_FILE}
size=12M
direct=1
ioengine=libaio
iodepth=8
bs=64k
verify=crc32c
verify_fatal=1
do_verify=1
[write-through-a-failover]
rw=randwrite
rate=4m
`), 0o644)
	cmd := exec.Command(bin, "--output-format=json", job)
	cmd.Env = append(os.Environ(), "DDP_FILE="+filepath.Join(mnt, "lun0"))
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fioDone := make(chan error, 1)
	go func() { fioDone <- cmd.Wait() }()
	time.Sleep(1500 * time.Millisecond) // into the write phase
	gw1.cmd.Process.Kill()
	<-gw1.done
	select {
	case err := <-fioDone:
		if err != nil || !strings.Contains(out.String(), `"error" : 0`) {
			t.Fatalf("fio through the failover: %v\n%s", err, out.String())
		}
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("fio did not finish after the gateway died\n%s", out.String())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := mustRun(t, ddpinitiator(t), "status", "--run-dir", runDir)
		if roundRobin && strings.Contains(st, addr1+" (down, ") && strings.Contains(st, addr2+" (up, active/optimized)") {
			break
		}
		if !roundRobin && strings.Contains(st, " at "+addr2+",") && strings.Contains(st, addr2+" (in use)") &&
			strings.Contains(st, "ALUA port groups: 1 active/optimized, 2 active/non-optimized (in use)\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status after the failover:\n%s", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The killed gateway comes back: a round-robin mount takes its path
	// up again; either way what fio wrote reads back right.
	startTarget(t, cfg1, addr1)
	if roundRobin {
		deadline := time.Now().Add(15 * time.Second)
		for st := ""; !strings.Contains(st, addr1+" (up, active/optimized)"); st = mustRun(t, ddpinitiator(t), "status", "--run-dir", runDir) {
			if time.Now().After(deadline) {
				t.Fatalf("status after the gateway came back:\n%s", st)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	check := exec.Command(bin, "--verify_only", job)
	check.Env, check.Dir = cmd.Env, dir
	if b, err := check.CombinedOutput(); err != nil || !strings.Contains(string(b), "err= 0") {
		t.Fatalf("fio --verify_only after the gateway came back: %v\n%s", err, b)
	}
	var res struct {
		Jobs []struct {
			Write struct {
				Lat struct {
					Max float64 `json:"max"`
				} `json:"clat_ns"`
			} `json:"write"`
		} `json:"jobs"`
	}
	js := out.Bytes()
	if i := bytes.IndexByte(js, '{'); i >= 0 {
		js = js[i:]
	}
	if err := json.Unmarshal(js, &res); err != nil || len(res.Jobs) == 0 {
		t.Fatalf("fio's JSON: %v\n%s", err, out.String())
	}
	pause := time.Duration(res.Jobs[0].Write.Lat.Max)
	t.Logf("the longest write through the failover took %v", pause)
	return pause
}
