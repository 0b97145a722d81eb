package daemon

import (
	"bytes"
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
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

	t.Run("mount-gateway-dies", func(t *testing.T) {
		// Without exclusive-lock (see docs/scale-out.md): with it, the
		// surviving gateway's first write waits for the dead one's lock,
		// which Ceph breaks only when its watch times out (30 s).
		needMount(t)
		c.RBD(t, "create", "--size", "16M", "--image-feature", "layering", c.Pool()+"/failover")
		pause := mountGatewayDies(t, t.TempDir(), lunOf("failover"))
		if pause > 20*time.Second {
			t.Errorf("the failover paused writes for %v: more than the NOP timeout and a login explain", pause)
		}
	})
}
