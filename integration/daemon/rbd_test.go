package daemon

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/blockdev/rbd"
	"github.com/ddpstore/ddpstore/internal/cephtest"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/scsi"
)

// TestRBD runs ddptarget in front of a real single-node Ceph cluster:
//   - an RBD LUN serves verified I/O of every size, and what was written is
//     in the image (read back with librbd, not through the target);
//   - two gateways export one image as one LUN with two paths (ALUA): what
//     one writes the other reads;
//   - a mount of the two gateways keeps fio verify going while the gateway
//     in use is killed with -9.
func TestRBD(t *testing.T) {
	c := cephtest.Start(t)
	lunOf := func(image string) string {
		return fmt.Sprintf("{id: 0, rbd: {pool: %s, image: %s, conf: %s, user: %s}}", c.Pool(), image, c.Conf(), c.User())
	}

	t.Run("verified-io", func(t *testing.T) {
		c.CreateImage(t, "disk1", 64<<20)
		dir := t.TempDir()
		addr := freePort(t)
		startTarget(t, gatewayConfigLUN(t, dir, addr, lunOf("disk1"), ""), addr)
		s := dial(t, addr, gatewayTarget)
		rng := rand.New(rand.NewSource(1))
		type written struct {
			lba  uint64
			data []byte
		}
		var all []written
		lba := uint64(0)
		for _, size := range []int{512, 4096, 65536 + 512, 1 << 20, 4 << 20} {
			w, err := s.Alloc(size)
			if err != nil {
				t.Fatal(err)
			}
			r, err := s.Alloc(size)
			if err != nil {
				t.Fatal(err)
			}
			rng.Read(w)
			blocks := uint32(size / 512)
			do(t, s, &initiator.Command{CDB: rw16(scsi.Write16, lba, blocks), Dir: initiator.DataOut, Data: w})
			do(t, s, &initiator.Command{CDB: rw16(scsi.Read16, lba, blocks), Dir: initiator.DataIn, Data: r})
			if !bytes.Equal(r, w) {
				t.Fatalf("%d octets at LBA %d: read back differs", size, lba)
			}
			all = append(all, written{lba, bytes.Clone(w)})
			s.Free(w)
			s.Free(r)
			lba += uint64(blocks) + 8
		}
		do(t, s, &initiator.Command{CDB: []byte{scsi.SynchronizeCache10, 0, 0, 0, 0, 0, 0, 0, 0, 0}})
		im, err := rbd.Open(rbd.Config{Pool: c.Pool(), Image: "disk1", Conf: c.Conf(), User: c.User(), ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer im.Close()
		for _, w := range all {
			got := make([]byte, len(w.data))
			if err := im.ReadAt(got, int64(w.lba*512)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, w.data) {
				t.Fatalf("the image does not hold the %d octets written at LBA %d", len(w.data), w.lba)
			}
		}
	})

	t.Run("missing-image", func(t *testing.T) {
		dir := t.TempDir()
		cfg := gatewayConfigLUN(t, dir, freePort(t), lunOf("nosuch"), "")
		out, code := run(ddptarget(t), "--config", cfg)
		if code == 0 || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.Contains(out, "rbd/nosuch") || !strings.Contains(strings.ToLower(out), "no such file or directory") {
			t.Fatalf("a missing image: exit %d, want one line naming rbd/nosuch:\n%s", code, out)
		}
	})

	t.Run("two-gateways", func(t *testing.T) {
		c.CreateImage(t, "shared", 16<<20)
		dir := t.TempDir()
		groups := "    alua: {group: %d, groups: [{id: 1, state: active-optimized}, {id: 2, state: active-non-optimized}]}"
		addr1, addr2 := freePort(t), freePort(t)
		startTarget(t, gatewayConfigLUN(t, filepath.Join(dir, "gw1"), addr1, lunOf("shared"), fmt.Sprintf(groups, 1)), addr1)
		startTarget(t, gatewayConfigLUN(t, filepath.Join(dir, "gw2"), addr2, lunOf("shared"), fmt.Sprintf(groups, 2)), addr2)
		s1, s2 := dial(t, addr1, gatewayTarget), dial(t, addr2, gatewayTarget)
		if g1, g2 := rtpg(t, s1), rtpg(t, s2); len(g1) != 2 || fmt.Sprint(g1) != fmt.Sprint(g2) {
			t.Fatalf("the gateways report different port groups: %v and %v", g1, g2)
		}
		if p1, p2 := relativePort(t, s1), relativePort(t, s2); p1 == p2 {
			t.Fatalf("both gateways are relative port %d", p1)
		}
		for i, pair := range [][2]*initiator.Session{{s1, s2}, {s2, s1}} {
			w, _ := pair[0].Alloc(64 << 10)
			r, _ := pair[1].Alloc(64 << 10)
			rand.New(rand.NewSource(int64(i))).Read(w)
			lba := uint64(i * 1024)
			do(t, pair[0], &initiator.Command{CDB: rw16(scsi.Write16, lba, 128), Dir: initiator.DataOut, Data: w})
			do(t, pair[1], &initiator.Command{CDB: rw16(scsi.Read16, lba, 128), Dir: initiator.DataIn, Data: r})
			if !bytes.Equal(r, w) {
				t.Fatalf("gateway %d does not read what gateway %d wrote", 2-i, i+1)
			}
		}
	})

	t.Run("reservations-across-gateways", func(t *testing.T) {
		c.CreateImage(t, "fenced", 16<<20)
		dir := t.TempDir()
		addr1, addr2 := freePort(t), freePort(t)
		cfg1 := gatewayConfigLUN(t, filepath.Join(dir, "gw1"), addr1, lunOf("fenced"), "")
		cfg2 := gatewayConfigLUN(t, filepath.Join(dir, "gw2"), addr2, lunOf("fenced"), "")
		gw1, gw2 := startTarget(t, cfg1, addr1), startTarget(t, cfg2, addr2)
		a := dialAs(t, addr1, gatewayTarget, "iqn.2026-11.io.ddpstore:node-a")
		b := dialAs(t, addr2, gatewayTarget, "iqn.2026-11.io.ddpstore:node-b")
		prout := func(s *initiator.Session, sa, typ byte, key, sakey uint64) *initiator.Command {
			p, _ := s.Alloc(4096)
			p = p[:24]
			clear(p)
			binary.BigEndian.PutUint64(p, key)
			binary.BigEndian.PutUint64(p[8:], sakey)
			cmd := &initiator.Command{CDB: []byte{0x5f, sa, typ, 0, 0, 0, 0, 0, 24, 0}, Dir: initiator.DataOut, Data: p}
			if err := s.Do(context.Background(), cmd); err != nil {
				t.Fatal(err)
			}
			return cmd
		}
		canWrite := func(s *initiator.Session) bool {
			buf, _ := s.Alloc(4096)
			w := &initiator.Command{CDB: rw16(scsi.Write16, 0, 8), Dir: initiator.DataOut, Data: buf}
			if err := s.Do(context.Background(), w); err != nil {
				t.Fatal(err)
			}
			return w.Status == 0
		}
		// node-a registers and reserves Write Exclusive through gateway 1.
		if st := prout(a, 0x00, 0, 0, 0xa1).Status; st != 0 {
			t.Fatalf("REGISTER through gateway 1: status %#x", st)
		}
		if st := prout(a, 0x01, 0x01, 0xa1, 0).Status; st != 0 {
			t.Fatalf("RESERVE through gateway 1: status %#x", st)
		}
		// node-b, through gateway 2, is held to it at once.
		if canWrite(b) {
			t.Fatal("node-b writes through gateway 2 under node-a's reservation made through gateway 1")
		}
		if !canWrite(a) {
			t.Fatal("the holder cannot write")
		}
		// node-b registers and preempts node-a through gateway 2: node-a
		// is fenced on gateway 1.
		prout(b, 0x00, 0, 0, 0xb2)
		if st := prout(b, 0x04, 0x01, 0xb2, 0xa1).Status; st != 0 {
			t.Fatalf("PREEMPT through gateway 2: status %#x", st)
		}
		if canWrite(a) {
			t.Fatal("node-a still writes through gateway 1 after node-b preempted it through gateway 2")
		}
		if !canWrite(b) {
			t.Fatal("the new holder cannot write through gateway 2")
		}
		// Both gateways restart: the state is in the cluster.
		a.Close()
		b.Close()
		gw1.stop(t, syscall.SIGTERM)
		gw2.stop(t, syscall.SIGTERM)
		startTarget(t, cfg1, addr1)
		a2 := dialAs(t, addr1, gatewayTarget, "iqn.2026-11.io.ddpstore:node-a")
		if canWrite(a2) {
			t.Fatal("node-a writes after both gateways restarted: the reservation was lost")
		}
		buf, _ := a2.Alloc(4096)
		do(t, a2, &initiator.Command{CDB: []byte{0x5e, 0x01, 0, 0, 0, 0, 0, 0, 64, 0}, Dir: initiator.DataIn, Data: buf[:64]}) // READ RESERVATION
		if binary.BigEndian.Uint64(buf[8:]) != 0xb2 || buf[21] != 0x01 {
			t.Fatalf("READ RESERVATION after the restarts: %x", buf[:24])
		}
		if objs := c.Objects(t, c.Pool()); !slices.Contains(objs, "ddpstore.pr.fenced") {
			t.Fatalf("no reservation object in the pool: %v", objs)
		}
	})

	t.Run("mount-gateway-dies", func(t *testing.T) {
		// Without exclusive-lock (see docs/scale-out.md): with it, the
		// surviving gateway's first write waits for the dead one's lock,
		// which Ceph breaks only when its watch times out (30 s).
		needMount(t)
		c.RBD(t, "create", "--size", "16M", "--image-feature", "layering", c.Pool()+"/failover")
		pause := mountGatewayDies(t, t.TempDir(), lunOf("failover"), false)
		if pause > 20*time.Second {
			t.Errorf("the failover paused writes for %v: more than the NOP timeout and a login explain", pause)
		}
	})
}
