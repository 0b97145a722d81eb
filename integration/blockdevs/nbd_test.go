package blockdevs

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/hostdev/nbd"
	log "github.com/sirupsen/logrus"
)

// TestGuestNBD runs inside the guest: the LUN as /dev/nbdN through
// hostdev/nbd in this process (geometry, O_DIRECT data checked against
// the store, discard as UNMAP, a connection dropped and replaced with
// NBD_CMD_RECONFIGURE), then through "ddpinitiator attach --nbd" as an
// operator runs it (ext4 made, written, refused detach while mounted,
// read back, detached, logged out). TestGuestProcess does the same with
// ddptarget as a process, fio and a kill of the target.
func TestGuestNBD(t *testing.T) {
	inGuest(t)
	l := newLab(t)
	t.Run("Package", func(t *testing.T) {
		s, d := l.disk(t, 16)
		start := time.Now()
		lg := log.New()
		lg.SetLevel(log.DebugLevel)
		lg.SetOutput(os.Stderr)
		dev, err := nbd.Attach(context.Background(), nbd.NewLUN(s, d), nbd.Options{Index: -1, InFlight: 16, Backend: "blockdevs-test", Log: log.NewEntry(lg)})
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
		rawVerify(t, dev.Path, l.store, 1)
		discard(t, dev.Path, l.store, 8<<20, 1<<20)
		zeroOut(t, dev.Path, l.store, 12<<20, 512<<10)

		// This end's socket fails: the kernel holds I/O, the device
		// hands it a new socketpair, and I/O goes on.
		dev.Reconnect()
		start = time.Now()
		rawVerify(t, dev.Path, l.store, 2)
		t.Logf("I/O after a dropped connection went on within %v", time.Since(start))

		if err := dev.Disconnect(10 * time.Second); err != nil {
			t.Fatalf("disconnect: %v", err)
		}
		select {
		case <-dev.Done():
		default:
			t.Fatal("the device is still served after Disconnect")
		}
		if err := dev.Err(); err != nil {
			t.Fatalf("serving ended with %v", err)
		}
	})
	t.Run("Command", func(t *testing.T) { commandRoundTrip(t, "nbd", l) })
}
