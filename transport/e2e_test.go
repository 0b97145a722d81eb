package transport_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/login"
	"github.com/ddpstore/ddpstore/transport/target"
)

// TestReadWrite writes patterns of 512 octets to 8 MiB and reads them
// back, with immediate data (the default) and without.
func TestReadWrite(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{sizes: []int64{32 << 20}})
	for _, imm := range []bool{true, false} {
		t.Run(fmt.Sprintf("immediate=%v", imm), func(t *testing.T) {
			cfg := initiator.Config{TargetName: targetName}
			if !imm {
				cfg.NoImmediateData = true
			}
			s := r.dial(t, cfg)
			if got := s.Params().ImmediateData; got != imm {
				t.Fatalf("negotiated ImmediateData=%v", got)
			}
			lba := uint64(0)
			for _, size := range []int{512, 4096, 8192, 8704, 65536, 65536 + 512, 1 << 20, 8 << 20} {
				wbuf, err := s.Alloc(size)
				if err != nil {
					t.Fatal(err)
				}
				rbuf, err := s.Alloc(size)
				if err != nil {
					t.Fatal(err)
				}
				rand.New(rand.NewSource(int64(size))).Read(wbuf)
				blocks := uint32(size / 512)
				do(t, s, &initiator.Command{CDB: write16(lba, blocks), Dir: initiator.DataOut, Data: wbuf})
				do(t, s, &initiator.Command{CDB: read16(lba, blocks), Dir: initiator.DataIn, Data: rbuf})
				if !bytes.Equal(rbuf, wbuf) {
					t.Fatalf("%d octets at LBA %d: read back differs", size, lba)
				}
				if st := r.luns[0].Store().Mapping().Bytes()[lba*512 : lba*512+uint64(size)]; !bytes.Equal(st, wbuf) {
					t.Fatalf("%d octets at LBA %d: the store differs from what was written", size, lba)
				}
				s.Free(wbuf)
				s.Free(rbuf)
				lba += uint64(blocks)
			}
		})
	}
}

// TestSCSICommands runs the commands a host sends when it finds a LUN.
func TestSCSICommands(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{sizes: []int64{8 << 20, 1 << 20}})
	s := r.dial(t, initiator.Config{TargetName: targetName})
	buf, _ := s.Alloc(4096)

	// INQUIRY: a disk.
	inq := &initiator.Command{CDB: []byte{0x12, 0, 0, 0, 96, 0}, Dir: initiator.DataIn, Data: buf[:96]}
	do(t, s, inq)
	if buf[0]&0x1f != 0 {
		t.Fatalf("INQUIRY: peripheral device type %#x", buf[0]&0x1f)
	}
	// READ CAPACITY(16) of LUN 1: 2048 blocks of 512.
	rc := &initiator.Command{LUN: 1, CDB: []byte{0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0}, Dir: initiator.DataIn, Data: buf[:32]}
	do(t, s, rc)
	if last, bl := binary.BigEndian.Uint64(buf), binary.BigEndian.Uint32(buf[8:]); last != 2047 || bl != 512 {
		t.Fatalf("READ CAPACITY(16): last LBA %d, block %d", last, bl)
	}
	// REPORT LUNS: 0 and 1.
	rl := &initiator.Command{CDB: []byte{0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}, Dir: initiator.DataIn, Data: buf[:256]}
	do(t, s, rl)
	if n := binary.BigEndian.Uint32(buf); n != 16 {
		t.Fatalf("REPORT LUNS: list length %d, want 16", n)
	}
	// TEST UNIT READY, no data.
	do(t, s, &initiator.Command{CDB: make([]byte, 6)})
	// A read past the end: CHECK CONDITION, ILLEGAL REQUEST, LBA OUT OF RANGE.
	bad := &initiator.Command{LUN: 1, CDB: read16(2047, 2), Dir: initiator.DataIn, Data: buf[:1024]}
	if err := s.Do(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	if bad.Status != 0x02 || len(bad.Sense) < 14 || bad.Sense[2]&0xf != 0x05 || bad.Sense[12] != 0x21 {
		t.Fatalf("read past end: status %#x sense %x", bad.Status, bad.Sense)
	}
	// A command to a LUN that is not there.
	nl := &initiator.Command{LUN: 9, CDB: make([]byte, 6)}
	if err := s.Do(context.Background(), nl); err != nil {
		t.Fatal(err)
	}
	if nl.Status != 0x02 || len(nl.Sense) < 14 || nl.Sense[12] != 0x25 {
		t.Fatalf("absent LUN: status %#x sense %x", nl.Status, nl.Sense)
	}
	// Reading less than the CDB asks: overflow residual.
	short := &initiator.Command{CDB: read16(0, 8), Dir: initiator.DataIn, Data: buf[:2048]}
	do(t, s, short)
	if !short.Overflow || short.Residual != 2048 {
		t.Fatalf("short read: overflow %v residual %d, want overflow of 2048", short.Overflow, short.Residual)
	}
}

// TestNop pings both ways: the initiator's NOP-Out is echoed, and a
// target that pings an idle initiator gets its answer.
func TestNop(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{cfg: targetCfg(50*time.Millisecond, 2*time.Second)})
	s := r.dial(t, initiator.Config{TargetName: targetName, NopInterval: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Nop(ctx, []byte("ping data")); err != nil {
		t.Fatal(err)
	}
	// The target pings every 50 ms of silence; the session must survive
	// a few seconds of them.
	time.Sleep(2500 * time.Millisecond)
	if err := s.Err(); err != nil {
		t.Fatalf("session ended while idle: %v", err)
	}
	if err := s.Nop(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

func targetCfg(nop, timeout time.Duration) (c target.Config) {
	c.NopInterval, c.NopTimeout = nop, timeout
	return c
}

// TestDiscovery runs a SendTargets discovery session.
func TestDiscovery(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{})
	s := r.dial(t, initiator.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ts, err := s.SendTargets(ctx, "All")
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 || ts[0].Name != targetName || len(ts[0].Portals) != 1 || ts[0].Portals[0].Addr != r.addr {
		t.Fatalf("SendTargets: %+v", ts)
	}
	// A discovery session carries no SCSI commands.
	err = s.Do(ctx, &initiator.Command{CDB: make([]byte, 6)})
	var rej *initiator.RejectError
	if !errors.As(err, &rej) {
		t.Fatalf("SCSI command in a discovery session: %v, want a Reject", err)
	}
}

// TestLogin checks who gets in: allow lists and CHAP, one-way and mutual.
func TestLogin(t *testing.T) {
	checkGoroutines(t)
	chap := &login.CHAP{User: "host1", Secret: "secret-of-host1"}
	mutual := &login.CHAP{User: "host1", Secret: "secret-of-host1", MutualUser: "disk1", MutualSecret: "secret-of-disk1"}
	cases := []struct {
		name   string
		opts   rigOpts
		cfg    initiator.Config
		detail int // -1: success; otherwise the login status (class<<8|detail)
	}{
		{"open", rigOpts{}, initiator.Config{TargetName: targetName}, -1},
		{"unknown target", rigOpts{}, initiator.Config{TargetName: "iqn.2026-11.io.ddpstore:nope"}, 0x0203},
		{"not on the allow list", rigOpts{initiators: []string{"iqn.2026-11.io.ddpstore:other"}}, initiator.Config{TargetName: targetName}, 0x0202},
		{"on the allow list", rigOpts{initiators: []string{initiatorName}}, initiator.Config{TargetName: targetName}, -1},
		{"chap", rigOpts{chap: chap}, initiator.Config{TargetName: targetName, CHAP: chap}, -1},
		{"chap wrong secret", rigOpts{chap: chap}, initiator.Config{TargetName: targetName, CHAP: &login.CHAP{User: "host1", Secret: "not-the-secret!"}}, 0x0201},
		{"chap missing", rigOpts{chap: chap}, initiator.Config{TargetName: targetName}, 0x0201},
		{"mutual chap", rigOpts{chap: mutual}, initiator.Config{TargetName: targetName, CHAP: mutual}, -1},
		{"discovery chap", rigOpts{discovery: chap}, initiator.Config{CHAP: chap}, -1},
		{"discovery chap wrong", rigOpts{discovery: chap}, initiator.Config{CHAP: &login.CHAP{User: "x", Secret: "yyyyyyyyyyyy"}}, 0x0201},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, c.opts)
			s, err := r.tryDial(c.cfg)
			if c.detail < 0 {
				if err != nil {
					t.Fatal(err)
				}
				s.Close()
				return
			}
			if err == nil {
				s.Close()
				t.Fatalf("login succeeded, want status %#04x", c.detail)
			}
			var se *login.StatusError
			if !errors.As(err, &se) || int(se.Class)<<8|int(se.Detail) != c.detail {
				t.Fatalf("login: %v, want status %#04x", err, c.detail)
			}
		})
	}
	// A wrong mutual secret on the target's side: the initiator refuses it.
	r := newRig(t, rigOpts{chap: mutual})
	bad := *mutual
	bad.MutualSecret = "not-the-target-secret"
	if s, err := r.tryDial(initiator.Config{TargetName: targetName, CHAP: &bad}); err == nil {
		s.Close()
		t.Fatal("initiator accepted a target that failed mutual CHAP")
	}
}

// TestTaskManagement runs each supported function.
func TestTaskManagement(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{})
	s := r.dial(t, initiator.Config{TargetName: targetName})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, c := range []struct {
		fn   uint8
		lun  uint16
		want uint8
	}{
		{iscsi.TMFAbortTask, 0, iscsi.TMFNoTask},
		{iscsi.TMFAbortTaskSet, 0, iscsi.TMFComplete},
		{iscsi.TMFLUNReset, 0, iscsi.TMFComplete},
		{iscsi.TMFLUNReset, 5, iscsi.TMFNoLUN},
		{iscsi.TMFTargetWarmReset, 0, iscsi.TMFComplete},
		{iscsi.TMFTargetColdReset, 0, iscsi.TMFNotSupported},
	} {
		got, err := s.TaskMgmt(ctx, c.fn, c.lun, 0x1234)
		if err != nil || got != c.want {
			t.Errorf("function %d on LUN %d: response %d, %v; want %d", c.fn, c.lun, got, err, c.want)
		}
	}
	// The session still works.
	do(t, s, &initiator.Command{CDB: make([]byte, 6)})
}

// TestManyInitiators runs 8 sessions with 64 commands in flight each,
// every one writing its own pattern and reading it back.
func TestManyInitiators(t *testing.T) {
	checkGoroutines(t)
	const sessions, inflight, size = 8, 64, 16 << 10
	r := newRig(t, rigOpts{sizes: []int64{sessions * inflight * size}})
	var wg sync.WaitGroup
	errs := make(chan error, sessions*inflight)
	for i := 0; i < sessions; i++ {
		s := r.dial(t, initiator.Config{TargetName: targetName, QueueDepth: inflight, Buffers: 4 << 20,
			InitiatorName: fmt.Sprintf("iqn.2026-11.io.ddpstore:host%d", i)})
		for j := 0; j < inflight; j++ {
			wg.Add(1)
			go func(i, j int) {
				defer wg.Done()
				errs <- pattern(s, uint64((i*inflight+j)*size/512), size, int64(i*1000+j))
			}(i, j)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// pattern writes size octets of a seeded pattern at lba, reads them back
// and compares, several times.
func pattern(s *initiator.Session, lba uint64, size int, seed int64) error {
	w, err := s.Alloc(size)
	if err != nil {
		return err
	}
	defer s.Free(w)
	rb, err := s.Alloc(size)
	if err != nil {
		return err
	}
	defer s.Free(rb)
	rng := rand.New(rand.NewSource(seed))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for k := 0; k < 4; k++ {
		rng.Read(w)
		wc := &initiator.Command{CDB: write16(lba, uint32(size/512)), Dir: initiator.DataOut, Data: w}
		if err := s.Do(ctx, wc); err != nil || wc.Status != 0 {
			return fmt.Errorf("write at %d: %v status %#x", lba, err, wc.Status)
		}
		rc := &initiator.Command{CDB: read16(lba, uint32(size/512)), Dir: initiator.DataIn, Data: rb}
		if err := s.Do(ctx, rc); err != nil || rc.Status != 0 {
			return fmt.Errorf("read at %d: %v status %#x", lba, err, rc.Status)
		}
		if !bytes.Equal(w, rb) {
			return fmt.Errorf("LBA %d: read back differs from what was written", lba)
		}
	}
	return nil
}

// TestDataPathAllocatesNothing: a READ and a WRITE through initiator,
// target and RNIC allocate nothing in steady state (all three share this
// process, so AllocsPerRun counts them all): each command's fast
// registration of its own STag, the target's Send with Invalidate of it
// and the initiator's check of that included, and with no immediate data
// (every write octet by RDMA Read through the write STag) too.
func TestDataPathAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	r := newRig(t, rigOpts{sizes: []int64{8 << 20}})
	for _, noImm := range []bool{false, true} {
		s := r.dial(t, initiator.Config{TargetName: targetName, NopInterval: -1, NoImmediateData: noImm})
		dataPathAllocs(t, s, fmt.Sprintf("immediate data %v: ", !noImm))
	}
}

func dataPathAllocs(t *testing.T, s *initiator.Session, what string) {
	for _, size := range []int{4096, 256 << 10, 1 << 20} {
		buf, err := s.Alloc(size)
		if err != nil {
			t.Fatal(err)
		}
		rd := &initiator.Command{CDB: read16(64, uint32(size/512)), Dir: initiator.DataIn, Data: buf}
		wr := &initiator.Command{CDB: write16(64, uint32(size/512)), Dir: initiator.DataOut, Data: buf}
		ctx := context.Background()
		run := func() {
			if err := s.Do(ctx, wr); err != nil || wr.Status != 0 {
				t.Fatalf("WRITE: %v, status %#x", err, wr.Status)
			}
			if err := s.Do(ctx, rd); err != nil || rd.Status != 0 {
				t.Fatalf("READ: %v, status %#x", err, rd.Status)
			}
		}
		for i := 0; i < 50; i++ {
			run() // warm up: pages faulted, pools grown
		}
		if n := testing.AllocsPerRun(200, run); n > 0 {
			t.Errorf("%s%d-octet WRITE+READ: %v allocations per run, want 0", what, size, n)
		}
		s.Free(buf)
	}
}
