package rbd

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// Shared is a small RADOS object in an image's pool that the gateways
// exporting one image keep common state in (SCSI persistent reservations:
// issue 19 item 5). Every gateway opens the same object; Load reads it with
// its RADOS version, Store replaces it only if it is still at the version
// its caller loaded (compare-and-write, one RADOS write op), and Watch
// tells a gateway when another one has stored.
//
// A Shared has its own connection to the cluster (client.cfg.User) and two
// I/O contexts on cfg.Pool: one for Load and Store, whose version is read
// from it right after the operation under a mutex, and one for the watch,
// the notifies and their acknowledgements.
//
// Its methods may be called from many goroutines at once, but not after
// Close, and Close not from within the function given to Watch.
type Shared struct {
	cfg     Config
	name    string // the object's name
	payload []byte // what this Shared's notifies carry: its sender id

	// mu is held shared by Load, Store and Watch for their whole life, and
	// exclusively by Close, which so waits for them before it closes the
	// I/O contexts.
	mu     sync.RWMutex
	closed bool
	c      sharedConn // librados's handles, or nothing without cgo

	// wmu guards the watch's registration: Watch, the re-registration
	// after a watch error, and Close take it.
	wmu      sync.Mutex
	watching bool
	closing  bool
	cookie   uint64 // 0 while the watch is being registered again
	changed  func()
	stop     chan struct{} // closed by Close: the watch goroutine ends
	done     chan struct{} // closed by the watch goroutine as it ends

	// qmu guards the events the watch callbacks hand to the watch
	// goroutine; wake has room for one signal.
	qmu    sync.Mutex
	events []watchEvent
	wake   chan struct{}
}

// watchEvent is a notify from another Shared, or a watch error, that the
// watch goroutine handles in arrival order.
type watchEvent struct {
	notifyID uint64 // the notify to acknowledge after changed returns
	cookie   uint64 // the watch it came through, or that failed
	err      int    // non-zero: the watch failed with this errno
}

// sharedNotifyTimeout is how long Store waits for every watcher of the
// object to acknowledge a change (the watchers' changed functions to
// return), rounded up to whole seconds (the OSD's unit). A watcher that
// has not by then is reported in Store's error; the state is written
// regardless.
var sharedNotifyTimeout = 5 * time.Second

// sharedWatchTimeout is how long the OSD keeps the watch of a gateway it
// no longer hears from (librados pings it every few seconds): a gateway that died
// is waited for by Stores elsewhere (each up to sharedNotifyTimeout) for at
// most this long. It is Ceph's default, osd_client_watch_timeout.
const sharedWatchTimeout = 30 * time.Second

// sharedRewatchPause is the pause between attempts to register a watch
// again after it failed.
const sharedRewatchPause = time.Second

// payloadPrefix starts every notify a Shared sends; a random sender id
// follows.
const payloadPrefix = "ddpstore.shared.v1 "

// OpenShared connects to the cluster cfg describes (Pool, Conf, User and
// Keyring as for Open; Image and ReadOnly are not used) and returns the
// object name in cfg.Pool, which need not exist yet. Its error is one line
// naming the pool, the object and what failed, wrapping the errno.
func OpenShared(cfg Config, name string) (*Shared, error) {
	if cfg.User == "" {
		cfg.User = "admin"
	}
	s := &Shared{cfg: cfg, name: name, wake: make(chan struct{}, 1)}
	if cfg.Pool == "" || name == "" {
		return nil, fmt.Errorf("rbd: open shared object %s: both a pool and an object must be named", s.objName())
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("rbd: open shared object %s: sender id: %w", s.objName(), err)
	}
	s.payload = []byte(payloadPrefix + hex.EncodeToString(id[:]))
	if err := s.c.open(cfg); err != nil {
		return nil, fmt.Errorf("rbd: open shared object %s: %w", s.objName(), err)
	}
	return s, nil
}

// Load returns the object's content and its RADOS version, read in one
// operation. A missing object is (nil, 0, nil); an empty one (as Watch
// creates) is nil with its version, which is not 0: Store must be given
// that version to replace it.
func (s *Shared) Load() (state []byte, version uint64, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, 0, s.errorf("load", os.ErrClosed)
	}
	state, version, err = s.c.load(s.name)
	switch {
	case errors.Is(err, syscall.ENOENT):
		return nil, 0, nil
	case err != nil:
		return nil, 0, s.errorf("load", err)
	}
	if len(state) == 0 {
		state = nil
	}
	return state, version, nil
}

// Store replaces the object's content with state if the object is still at
// version (0: only if it does not exist, creating it), in one RADOS write
// op, and returns its new version. ok is false, with no error, when the
// object is no longer at version (another gateway stored first, or it
// exists although version is 0): nothing was written, and the caller loads
// again and retries.
//
// After writing, Store notifies the object's watchers and waits until
// every other Shared watching it has run its changed function (see Watch),
// up to sharedNotifyTimeout (5 s). If some have not by then, Store returns the
// new version, ok true, and an error wrapping syscall.ETIMEDOUT: the state
// IS written, only not every gateway is known to have taken it in. Any
// other failure of the notify is reported the same way, ok true.
func (s *Shared) Store(state []byte, version uint64) (newVersion uint64, ok bool, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, false, s.errorf("store", os.ErrClosed)
	}
	newVersion, err = s.c.store(s.name, state, version)
	switch {
	case errors.Is(err, syscall.EEXIST) && version == 0,
		errors.Is(err, syscall.ERANGE), errors.Is(err, syscall.EOVERFLOW),
		errors.Is(err, syscall.ENOENT) && version != 0:
		// exists already; version newer; version older (the object was
		// recreated); gone.
		return 0, false, nil
	case err != nil:
		return 0, false, s.errorf(fmt.Sprintf("store at version %d", version), err)
	}
	watchers, late, err := s.c.notify(s.name, s.payload, sharedNotifyTimeout)
	if err != nil {
		what := fmt.Sprintf("stored version %d, but notifying its watchers failed", newVersion)
		if errors.Is(err, syscall.ETIMEDOUT) {
			what = fmt.Sprintf("stored version %d, but %d of its %d watchers did not acknowledge it within %v", newVersion, late, watchers, sharedNotifyTimeout)
		}
		return newVersion, true, s.errorf(what, err)
	}
	return newVersion, true, nil
}

// Watch registers a watch on the object, creating it empty first if it
// does not exist. changed is then called for every Store by another Shared
// on the object (a notify this Shared sent is acknowledged at once, without
// calling it), one call at a time, in order, on a goroutine of the
// package's, and the notify is acknowledged only when changed has
// returned: the other gateway's Store returns only after this one has
// taken the change in. changed may call Load and Store, but must not wait
// for anything a caller of Store may hold while it waits (Store waits for
// the other gateways' changed functions, up to 5 s), nor
// call Close.
//
// If the watch fails (the OSD lost it: a network partition, an OSD
// restart, the object removed), it is registered again (the object
// created empty if missing), retrying every second until it is or
// Close is called, and changed is then called once, as notifies may have
// been missed meanwhile. Watch may be called once per Shared.
func (s *Shared) Watch(changed func()) error {
	if changed == nil {
		return s.errorf("watch", errors.New("no function to call on a change"))
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return s.errorf("watch", os.ErrClosed)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.watching {
		return s.errorf("watch", errors.New("already watching"))
	}
	if err := s.c.create(s.name); err != nil && !errors.Is(err, syscall.EEXIST) {
		return s.errorf("watch: create", err)
	}
	s.changed = changed
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	cookie, err := s.c.watch(s, s.name, sharedWatchTimeout)
	if err != nil {
		return s.errorf("watch", err)
	}
	s.cookie, s.watching = cookie, true
	go s.watchLoop()
	return nil
}

// Close ends the watch, waits for a changed call in progress and for the
// Loads and Stores in flight, and disconnects from the cluster. Notifies
// not yet handed to changed are dropped (the OSD no longer waits for this
// watcher once it is unregistered). Everything is released even when it
// returns an error (the cluster refusing the unwatch). A second Close
// returns an error wrapping os.ErrClosed.
func (s *Shared) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return s.errorf("close", os.ErrClosed)
	}
	s.closed = true
	s.mu.Unlock()

	var errs []error
	s.wmu.Lock()
	s.closing = true
	watching, cookie := s.watching, s.cookie
	s.wmu.Unlock()
	if watching {
		if cookie == 0 {
			// being registered again after an error: nothing to end
		} else if err := s.c.unwatch(cookie); err != nil {
			errs = append(errs, s.errorf("close: unwatch", err))
		}
		// No callback runs after this returns, so none enqueues.
		if err := s.c.flush(); err != nil {
			errs = append(errs, s.errorf("close: flush watch callbacks", err))
		}
		close(s.stop)
		<-s.done
	}

	s.mu.Lock() // every Load, Store and Watch has returned
	defer s.mu.Unlock()
	s.c.close()
	return errors.Join(errs...)
}

// notified is the watch callback's: a notify this Shared sent is
// acknowledged at once, any other is queued for changed.
func (s *Shared) notified(notifyID, cookie uint64, payload []byte) {
	if bytes.Equal(payload, s.payload) {
		s.c.ack(s.name, notifyID, cookie) // an error only delays the notifier
		return
	}
	s.enqueue(watchEvent{notifyID: notifyID, cookie: cookie})
}

// watchFailed is the watch error callback's: the watch goroutine registers
// the watch again.
func (s *Shared) watchFailed(cookie uint64, errno int) {
	if errno == 0 {
		errno = int(syscall.ENOTCONN)
	}
	s.enqueue(watchEvent{cookie: cookie, err: errno})
}

func (s *Shared) enqueue(ev watchEvent) {
	s.qmu.Lock()
	s.events = append(s.events, ev)
	s.qmu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// next waits for the next event; false once Close has begun.
func (s *Shared) next() (watchEvent, bool) {
	for {
		s.qmu.Lock()
		if len(s.events) > 0 {
			ev := s.events[0]
			s.events[0] = watchEvent{}
			s.events = s.events[1:]
			s.qmu.Unlock()
			select {
			case <-s.stop:
				return watchEvent{}, false
			default:
				return ev, true
			}
		}
		s.qmu.Unlock()
		select {
		case <-s.stop:
			return watchEvent{}, false
		case <-s.wake:
		}
	}
}

// watchLoop calls changed for each notify from another Shared and then
// acknowledges it, and registers the watch again after an error.
func (s *Shared) watchLoop() {
	defer close(s.done)
	for {
		ev, ok := s.next()
		if !ok {
			return
		}
		if ev.err != 0 {
			if s.rewatch(ev.cookie) {
				s.changed()
			}
			continue
		}
		s.changed()
		s.c.ack(s.name, ev.notifyID, ev.cookie) // an error only delays the notifier
	}
}

// rewatch replaces the failed watch cookie with a new one, retrying until
// it succeeds or Close begins. It reports whether it registered one (false
// for an error of a watch already replaced).
func (s *Shared) rewatch(cookie uint64) bool {
	s.wmu.Lock()
	if s.closing || s.cookie != cookie {
		s.wmu.Unlock()
		return false
	}
	s.c.unwatch(cookie) // the failed watch's resources; its error is moot
	s.cookie = 0
	s.wmu.Unlock()
	for {
		s.wmu.Lock()
		if s.closing {
			s.wmu.Unlock()
			return false
		}
		err := s.c.create(s.name) // if it was removed, as Watch does
		var c uint64
		if err == nil || errors.Is(err, syscall.EEXIST) {
			c, err = s.c.watch(s, s.name, sharedWatchTimeout)
		}
		if err == nil {
			s.cookie = c
			s.wmu.Unlock()
			return true
		}
		s.wmu.Unlock()
		select {
		case <-s.stop:
			return false
		case <-time.After(sharedRewatchPause):
		}
	}
}

func (s *Shared) objName() string { return s.cfg.Pool + "/" + s.name }

func (s *Shared) errorf(what string, err error) error {
	return fmt.Errorf("rbd: shared object %s: %s: %w", s.objName(), what, err)
}
