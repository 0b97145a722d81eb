package blockdevs

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/hostdev/nbd"
	"github.com/ddpstore/ddpstore/hostdev/ublk"
	log "github.com/sirupsen/logrus"
)

// TestGuestUblk runs inside the guest: the LUN as /dev/ublkbN through
// hostdev/ublk in this process (geometry, O_DIRECT data checked against
// the store, discard as UNMAP, stop and delete), then through
// "ddpinitiator attach --ublk" as an operator runs it (ext4 made,
// written, refused detach while mounted, read back, detached, logged
// out). TestGuestProcess does the same with ddptarget as a process, fio
// and a kill of the target.
func TestGuestUblk(t *testing.T) {
	inGuest(t)
	l := newLab(t)
	t.Run("Package", func(t *testing.T) {
		s, d := l.disk(t, 16)
		lg := log.New()
		lg.SetLevel(log.DebugLevel)
		lg.SetOutput(os.Stderr)
		start := time.Now()
		dev, err := ublk.Attach(context.Background(), nbd.NewLUN(s, d), ublk.Options{QueueDepth: 16, Log: log.NewEntry(lg)})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s attached in %v", dev.Path, time.Since(start))
		defer func() {
			select {
			case <-dev.Done():
			default:
				dev.Disconnect(10 * time.Second)
			}
		}()
		checkGeometry(t, dev.Path, d.Size(), d.BlockSize())
		rawVerify(t, dev.Path, l.store, 3)
		discard(t, dev.Path, l.store, 8<<20, 1<<20)
		zeroOut(t, dev.Path, l.store, 12<<20, 512<<10)
		start = time.Now()
		if err := dev.Disconnect(10 * time.Second); err != nil {
			t.Fatalf("disconnect: %v", err)
		}
		t.Logf("%s stopped and deleted in %v", dev.Path, time.Since(start))
		if _, err := os.Stat(dev.Path); err == nil {
			t.Errorf("%s is still there after Disconnect", dev.Path)
		}
	})
	t.Run("Command", func(t *testing.T) { commandRoundTrip(t, "ublk", l) })
}
