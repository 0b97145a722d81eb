package attach

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/ddpstore/ddpstore/hostdev"
	"github.com/ddpstore/ddpstore/hostdev/mount"
	"github.com/ddpstore/ddpstore/hostdev/nbd"
	"github.com/ddpstore/ddpstore/hostdev/remote"
	"github.com/ddpstore/ddpstore/transport/initiator"
	log "github.com/sirupsen/logrus"
)

// Config is what Serve exposes and how.
type Config struct {
	Kind    *Kind
	Target  string // the session's target and portal, for the state
	Portal  string
	RunDir  string   // where the state files go
	LogFile string   // the daemon's log, for the state
	LUNs    []uint16 // the LUNs to serve; none: every one the target reports
	Slots   int      // I/Os in flight (the session's queue depth), per device too

	MaxWrite int // the largest I/O a slot holds (as mount.Config's)
	// Recover is a device (/dev/nbdN, /dev/ublkbN) of Kind whose process
	// died, to serve again: only its LUN, the one its state names.
	Recover string
}

// Buffers is the registered memory the session needs: as a mount's.
func (c *Config) Buffers() int {
	mc := mount.Config{Slots: c.Slots, MaxWrite: c.MaxWrite}
	return mc.Buffers()
}

// Serve exposes the LUNs of s as c.Kind's devices and serves them until
// each is taken down (Detach, or a value received on signals takes down
// those that nothing uses), then logs out. Once they are up it records
// each one's state under c.RunDir and reports them to ready as the Files
// of a mount.Info; a nil ready (a process in the foreground) prints their
// paths on stdout instead. An error means no device is left up.
func Serve(ctx context.Context, s *initiator.Session, c Config, stdout io.Writer, signals <-chan os.Signal, ready *mount.Reporter) error {
	k := c.Kind
	l := log.NewEntry(log.StandardLogger())
	slots, err := remote.NewSlots(s, c.Slots, c.MaxWrite+8192)
	if err != nil {
		return err
	}
	defer slots.Close()
	luns, err := remote.DiskLUNs(ctx, s)
	if err != nil {
		return err
	}
	if luns, err = mount.SelectLUNs(luns, c.LUNs, c.Target); err != nil {
		return err
	}
	if c.Recover != "" {
		st, err := ReadState(StatePath(c.RunDir, c.Recover))
		if err != nil {
			return fmt.Errorf("recovering %s: %v", c.Recover, err)
		}
		luns = []uint16{st.LUN}
	}

	// Devices are served on a context of their own: a signal asks for
	// their removal, it does not cut them off.
	serveCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type served struct {
		dev   device
		state string
	}
	var devs []served
	info := mount.Info{PID: os.Getpid(), Target: c.Target, Portal: c.Portal, Log: c.LogFile}
	takeDown := func() {
		for _, d := range devs {
			d.dev.Disconnect(10 * time.Second)
			os.Remove(d.state)
		}
	}
	for _, n := range luns {
		d, err := remote.Open(ctx, s, n, slots)
		if err != nil {
			takeDown()
			return err
		}
		var dev device
		backend := fmt.Sprintf("%s/lun%d", c.Target, n)
		if c.Recover != "" {
			dev, err = k.recover(serveCtx, c.Recover, nbd.NewLUN(s, d), c.Slots, backend, l)
		} else {
			dev, err = k.attach(serveCtx, nbd.NewLUN(s, d), c.Slots, backend, l)
		}
		if err != nil {
			takeDown()
			return fmt.Errorf("LUN %d: %v", n, err)
		}
		st := State{PID: os.Getpid(), Device: dev.Path(), Kind: k.Name, Target: c.Target, Portal: c.Portal, LUN: n,
			Size: d.Size(), BlockSize: d.BlockSize(), ReadOnly: d.ReadOnly(), Log: c.LogFile}
		path := StatePath(c.RunDir, dev.Path())
		if err := writeState(path, st); err != nil {
			log.Warnf("state of %s: %v (detach will not find it)", dev.Path(), err)
		}
		devs = append(devs, served{dev, path})
		info.Files = append(info.Files, mount.File{Name: filepath.Base(dev.Path()), Path: dev.Path(), LUN: n, Size: d.Size(), BlockSize: d.BlockSize(), ReadOnly: d.ReadOnly()})
		log.Infof("LUN %d of %s (%s, %d-octet blocks) is %s", n, c.Target, hostdev.HumanSize(d.Size()), d.BlockSize(), dev.Path())
	}
	if ready == nil {
		for _, f := range info.Files {
			fmt.Fprintln(stdout, f.Path)
		}
	}
	ready.Report(info)

	ended := s.Done()
	left := len(devs)
	done := make(chan int, len(devs))
	for i, d := range devs {
		go func() {
			<-d.dev.Done()
			done <- i
		}()
	}
	for left > 0 {
		select {
		case i := <-done:
			left--
			d := devs[i]
			os.Remove(d.state)
			if err := d.dev.Err(); err != nil {
				log.Errorf("%s: %v", d.dev.Path(), err)
			} else {
				log.Infof("%s detached", d.dev.Path())
			}
		case <-signals:
			for _, d := range devs {
				select {
				case <-d.dev.Done():
					continue
				default:
				}
				if err := inUse(d.dev.Path()); err != nil {
					log.Errorf("not detaching %s: %v; still serving", d.dev.Path(), err)
					continue
				}
				go d.dev.Disconnect(30 * time.Second)
			}
		case <-ended:
			ended = nil
			log.Errorf("the session ended: %v; I/O on the devices fails until they are detached", s.Err())
		}
	}
	lctx, lcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer lcancel()
	switch err := s.Logout(lctx); {
	case errors.Is(err, initiator.ErrReconnecting):
		log.Infof("the target is unreachable: no logout")
	case err != nil && s.Err() == nil:
		log.Warnf("logout: %v", err)
	default:
		log.Infof("logged out")
	}
	return nil
}
