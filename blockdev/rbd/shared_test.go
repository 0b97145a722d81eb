//go:build cgo

package rbd

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/internal/cephtest"
)

// TestShared runs every test of Shared against one cluster.
func TestShared(t *testing.T) {
	c := cephtest.Start(t)
	for _, tc := range []struct {
		name string
		f    func(*testing.T, *cephtest.Cluster)
	}{
		{"Missing", testSharedMissing},
		{"CreateExclusive", testSharedCreateExclusive},
		{"Versions", testSharedVersions},
		{"Large", testSharedLarge},
		{"WatchCreates", testSharedWatchCreates},
		{"NotifyOrder", testSharedNotifyOrder},
		{"OwnNotify", testSharedOwnNotify},
		{"Concurrent", testSharedConcurrent},
		{"NotifyTimeout", testsharedNotifyTimeout},
		{"Rewatch", testSharedRewatch},
		{"Removed", testSharedRemoved},
		{"Errors", testSharedErrors},
		{"Close", testSharedClose},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, c) })
	}
}

// sharedName is an object name of the test's own.
func sharedName(t *testing.T) string {
	return "ddpstore.pr." + strings.ReplaceAll(t.Name(), "/", "-")
}

// openShared opens the object name as a gateway would, closed at the end
// of the test.
func openShared(t *testing.T, c *cephtest.Cluster, name string) *Shared {
	t.Helper()
	s, err := OpenShared(Config{Pool: c.Pool(), Conf: c.Conf(), User: c.User(), Keyring: c.Keyring()}, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			t.Error(err)
		}
	})
	return s
}

func load(t *testing.T, s *Shared) ([]byte, uint64) {
	t.Helper()
	state, v, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	return state, v
}

// store stores and wants the outcome ok.
func store(t *testing.T, s *Shared, state []byte, version uint64, ok bool) uint64 {
	t.Helper()
	nv, got, err := s.Store(state, version)
	if err != nil {
		t.Fatal(err)
	}
	if got != ok {
		t.Fatalf("Store(%q, %d): ok %v, want %v", state, version, got, ok)
	}
	if ok && nv <= version {
		t.Fatalf("Store(%q, %d): new version %d", state, version, nv)
	}
	if !ok && nv != 0 {
		t.Fatalf("Store(%q, %d) refused: new version %d, want 0", state, version, nv)
	}
	return nv
}

func wantState(t *testing.T, s *Shared, state []byte, version uint64) {
	t.Helper()
	got, v := load(t, s)
	if !bytes.Equal(got, state) || v != version || (state == nil) != (got == nil) {
		t.Fatalf("Load: %q at version %d, want %q at %d", got, v, state, version)
	}
}

func testSharedMissing(t *testing.T, c *cephtest.Cluster) {
	s := openShared(t, c, sharedName(t))
	wantState(t, s, nil, 0)
}

func testSharedCreateExclusive(t *testing.T, c *cephtest.Cluster) {
	name := sharedName(t)
	a, b := openShared(t, c, name), openShared(t, c, name)
	v := store(t, a, []byte("first"), 0, true)
	wantState(t, b, []byte("first"), v)
	store(t, b, []byte("second"), 0, false)
	store(t, a, []byte("third"), 0, false)
	wantState(t, a, []byte("first"), v)
}

func testSharedVersions(t *testing.T, c *cephtest.Cluster) {
	name := sharedName(t)
	a, b := openShared(t, c, name), openShared(t, c, name)
	v1 := store(t, a, []byte("one"), 0, true)
	v2 := store(t, b, []byte("two"), v1, true)
	wantState(t, a, []byte("two"), v2)
	store(t, a, []byte("stale"), v1, false)      // older than the object's
	store(t, a, []byte("future"), v2+100, false) // newer than the object's
	wantState(t, b, []byte("two"), v2)
	v3 := store(t, a, nil, v2, true) // emptied: loads as nil, at its version
	wantState(t, b, nil, v3)
	v4 := store(t, b, []byte("four"), v3, true)
	wantState(t, a, []byte("four"), v4)
	// A removed object is "another writer got there first" too.
	c.Rados(t, "-p", c.Pool(), "rm", name)
	store(t, a, []byte("five"), v4, false)
	wantState(t, a, nil, 0)
}

// testSharedLarge stores states larger than what a load reads at first.
func testSharedLarge(t *testing.T, c *cephtest.Cluster) {
	name := sharedName(t)
	a, b := openShared(t, c, name), openShared(t, c, name)
	var v uint64
	for _, n := range []int{sharedLoadSize - 1, sharedLoadSize, sharedLoadSize + 1, 300 << 10, 10} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i*7 + n)
		}
		v = store(t, a, p, v, true)
		wantState(t, b, p, v)
	}
}

// testSharedWatchCreates: Watch creates a missing object empty; Store at 0
// then fails, and the version Load gives replaces it.
func testSharedWatchCreates(t *testing.T, c *cephtest.Cluster) {
	name := sharedName(t)
	a, b := openShared(t, c, name), openShared(t, c, name)
	if err := a.Watch(func() {}); err != nil {
		t.Fatal(err)
	}
	state, v := load(t, b)
	if state != nil || v == 0 {
		t.Fatalf("Load after Watch: %q at version %d, want nil at a version", state, v)
	}
	store(t, b, []byte("x"), 0, false)
	v = store(t, b, []byte("x"), v, true)
	// A second Shared's Watch finds it there, content kept.
	if err := b.Watch(func() {}); err != nil {
		t.Fatal(err)
	}
	wantState(t, a, []byte("x"), v)
	if err := b.Watch(func() {}); err == nil || !strings.Contains(err.Error(), "already watching") {
		t.Errorf("second Watch: %v", err)
	}
}

// testSharedNotifyOrder: gateway A watches; B's Store returns only after
// A's changed has returned, and A read B's state in it.
func testSharedNotifyOrder(t *testing.T, c *cephtest.Cluster) {
	name := sharedName(t)
	a, b := openShared(t, c, name), openShared(t, c, name)
	var (
		mu    sync.Mutex
		seen  [][]byte
		calls atomic.Int32
	)
	err := a.Watch(func() {
		// Slow enough that a Store not waiting for it would return first.
		time.Sleep(300 * time.Millisecond)
		state, _, err := a.Load()
		if err != nil {
			t.Error(err)
		}
		mu.Lock()
		seen = append(seen, state)
		mu.Unlock()
		calls.Add(1)
	})
	if err != nil {
		t.Fatal(err)
	}
	_, v := load(t, b)
	for i := range 3 {
		p := []byte("state " + strconv.Itoa(i))
		begin := time.Now()
		v = store(t, b, p, v, true)
		if n := calls.Load(); n != int32(i+1) {
			t.Fatalf("Store %d returned after %v with A's changed called %d times, want %d", i, time.Since(begin), n, i+1)
		}
		mu.Lock()
		last := seen[len(seen)-1]
		mu.Unlock()
		if !bytes.Equal(last, p) {
			t.Fatalf("A's changed loaded %q, want %q", last, p)
		}
	}
}

// testSharedOwnNotify: a Shared's own Store does not call its changed, and
// is not held up by it.
func testSharedOwnNotify(t *testing.T, c *cephtest.Cluster) {
	name := sharedName(t)
	a, b := openShared(t, c, name), openShared(t, c, name)
	var ca, cb atomic.Int32
	if err := a.Watch(func() { ca.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := b.Watch(func() { cb.Add(1) }); err != nil {
		t.Fatal(err)
	}
	_, v := load(t, a)
	v = store(t, a, []byte("a"), v, true)
	v = store(t, a, []byte("aa"), v, true)
	if ca.Load() != 0 || cb.Load() != 2 {
		t.Fatalf("after A's 2 Stores: A's changed called %d times, B's %d; want 0 and 2", ca.Load(), cb.Load())
	}
	store(t, b, []byte("b"), v, true)
	if ca.Load() != 1 || cb.Load() != 2 {
		t.Fatalf("after B's Store: A's changed called %d times, B's %d; want 1 and 2", ca.Load(), cb.Load())
	}
}

// testSharedConcurrent: two gateways increment one counter 50 times each
// by load, modify, store until ok; no increment is lost, and each gateway's
// changed ran for every Store of the other's.
func testSharedConcurrent(t *testing.T, c *cephtest.Cluster) {
	name := sharedName(t)
	const per = 50
	gws := []*Shared{openShared(t, c, name), openShared(t, c, name)}
	changed := make([]atomic.Int32, len(gws))
	for i, s := range gws {
		if err := s.Watch(func() { changed[i].Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	retries := make([]int, len(gws))
	for i, s := range gws {
		wg.Go(func() {
			for range per {
				for {
					state, v, err := s.Load()
					if err != nil {
						t.Error(err)
						return
					}
					n := 0
					if state != nil {
						if n, err = strconv.Atoi(string(state)); err != nil {
							t.Error(err)
							return
						}
					}
					_, ok, err := s.Store([]byte(strconv.Itoa(n+1)), v)
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						break
					}
					retries[i]++
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	state, _ := load(t, gws[0])
	if string(state) != strconv.Itoa(2*per) {
		t.Fatalf("counter %q after 2x%d increments, want %d", state, per, 2*per)
	}
	for i := range gws {
		// Every Store of the other returned after this one's changed did;
		// a watch error would add a call.
		if n := changed[i].Load(); n < per {
			t.Errorf("gateway %d's changed called %d times for the other's %d Stores", i, n, per)
		}
	}
	t.Logf("retries: %v; changed calls: %d, %d", retries, changed[0].Load(), changed[1].Load())
}

// testsharedNotifyTimeout: a watcher that does not take a change in within
// sharedNotifyTimeout makes Store report it, with the state written.
func testsharedNotifyTimeout(t *testing.T, c *cephtest.Cluster) {
	name := sharedName(t)
	a, b := openShared(t, c, name), openShared(t, c, name)
	saved := sharedNotifyTimeout
	sharedNotifyTimeout = time.Second
	defer func() { sharedNotifyTimeout = saved }()
	release := make(chan struct{})
	var calls atomic.Int32
	if err := a.Watch(func() {
		if calls.Add(1) == 1 {
			<-release
		}
	}); err != nil {
		t.Fatal(err)
	}
	_, v := load(t, b)
	begin := time.Now()
	nv, ok, err := b.Store([]byte("late"), v)
	took := time.Since(begin)
	close(release)
	want := fmt.Sprintf("rbd: shared object %s/%s: stored version %d, but 1 of its 1 watchers did not acknowledge it within 1s: ", c.Pool(), name, nv)
	if !ok || nv <= v || !errors.Is(err, syscall.ETIMEDOUT) || err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Store with a stuck watcher: %d, %v, %v; want ok, a new version and %q...", nv, ok, err, want)
	}
	// The OSD times a notify out in whole seconds, after a tick.
	if took < 900*time.Millisecond || took > 10*time.Second {
		t.Errorf("Store returned after %v, with a notify timeout of 1s", took)
	}
	t.Log(err)
	wantState(t, a, []byte("late"), nv)
	// The watcher, unstuck, takes the next change in as before.
	store(t, b, []byte("next"), nv, true)
	if n := calls.Load(); n != 2 {
		t.Fatalf("A's changed called %d times, want 2", n)
	}
}

// testSharedRewatch: after a watch error (here the error callback's
// function called as librados would), the watch is registered again,
// changed is called once for what may have been missed, and notifies
// arrive through the new watch.
func testSharedRewatch(t *testing.T, c *cephtest.Cluster) {
	name := sharedName(t)
	a, b := openShared(t, c, name), openShared(t, c, name)
	var calls atomic.Int32
	if err := a.Watch(func() { calls.Add(1) }); err != nil {
		t.Fatal(err)
	}
	a.wmu.Lock()
	old := a.cookie
	a.wmu.Unlock()
	a.watchFailed(old, int(syscall.ENOTCONN))
	a.watchFailed(old+1, int(syscall.ENOTCONN)) // not A's watch: ignored
	deadline := time.Now().Add(30 * time.Second)
	for calls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	a.wmu.Lock()
	now := a.cookie
	a.wmu.Unlock()
	// librados's cookie is its watch's address, which the new watch may
	// well reuse: the cluster's list of watchers tells them apart.
	if calls.Load() != 1 || now == 0 {
		t.Fatalf("after a watch error: changed called %d times, cookie %#x (was %#x)", calls.Load(), now, old)
	}
	_, v := load(t, b)
	store(t, b, []byte("after"), v, true)
	if n := calls.Load(); n != 2 {
		t.Fatalf("B's Store after the new watch: A's changed called %d times in all, want 2", n)
	}
	// The cluster sees one watcher: the old watch is gone.
	if out := c.Rados(t, "-p", c.Pool(), "listwatchers", name); strings.Count(out, "watcher=") != 1 {
		t.Fatalf("rados listwatchers: %q, want one watcher", out)
	}
}

// testSharedRemoved: removing a watched object ends its watch in the OSD;
// librados reports it through the error callback, and the watch is
// registered again on the object created anew.
func testSharedRemoved(t *testing.T, c *cephtest.Cluster) {
	name := sharedName(t)
	a, b := openShared(t, c, name), openShared(t, c, name)
	var calls atomic.Int32
	if err := a.Watch(func() { calls.Add(1) }); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	c.Rados(t, "-p", c.Pool(), "rm", name)
	// librados pings a watch every few seconds; the ping after the
	// removal fails.
	for calls.Load() == 0 && time.Since(begin) < time.Minute {
		time.Sleep(50 * time.Millisecond)
	}
	if calls.Load() != 1 {
		t.Fatalf("changed called %d times in %v after the object's removal, want 1", calls.Load(), time.Since(begin))
	}
	t.Logf("watch registered again %v after the removal", time.Since(begin).Round(time.Millisecond))
	state, v := load(t, b)
	if state != nil || v == 0 {
		t.Fatalf("Load: %q at version %d, want the object created empty", state, v)
	}
	store(t, b, []byte("back"), v, true)
	if n := calls.Load(); n != 2 {
		t.Fatalf("B's Store on the new object: A's changed called %d times in all, want 2", n)
	}
}

func testSharedErrors(t *testing.T, c *cephtest.Cluster) {
	cfg := Config{Pool: "nopool", Conf: c.Conf()}
	s, err := OpenShared(cfg, "obj")
	want := "rbd: open shared object nopool/obj: pool nopool: no such file or directory"
	if s != nil || !errors.Is(err, syscall.ENOENT) || err.Error() != want {
		t.Errorf("OpenShared on a missing pool: %v, %v; want %q", s, err, want)
	}
	cfg.Pool = c.Pool()
	if _, err := OpenShared(cfg, ""); err == nil || err.Error() != "rbd: open shared object rbd/: both a pool and an object must be named" {
		t.Errorf("OpenShared without a name: %v", err)
	}
	cfg.User = "nobody"
	if _, err := OpenShared(cfg, "obj"); err == nil || !strings.HasPrefix(err.Error(), "rbd: open shared object rbd/obj: connect as client.nobody: ") || strings.Contains(err.Error(), "\n") {
		t.Errorf("OpenShared as an unknown user: %v", err)
	}
	a := openShared(t, c, sharedName(t))
	if err := a.Watch(nil); err == nil {
		t.Error("Watch(nil) accepted")
	}
}

// testSharedClose: Close ends the watch, waits for a changed in progress,
// and leaves no goroutine, thread or descriptor behind; after it every
// method fails.
func testSharedClose(t *testing.T, c *cephtest.Cluster) {
	name := sharedName(t)
	cfg := Config{Pool: c.Pool(), Conf: c.Conf()}
	writer := openShared(t, c, name)
	cycle := func() {
		s, err := OpenShared(cfg, name)
		if err != nil {
			t.Fatal(err)
		}
		var calls atomic.Int32
		if err := s.Watch(func() { calls.Add(1) }); err != nil {
			t.Fatal(err)
		}
		_, v := load(t, writer)
		v = store(t, writer, []byte("x"), v, true)
		_, v = load(t, s)
		store(t, s, []byte("y"), v, true)
		if calls.Load() != 1 {
			t.Fatalf("changed called %d times, want 1", calls.Load())
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cycle() // librados's process-wide state is set up once
	fds, threads, goroutines := countFDs(t), countThreads(t), runtime.NumGoroutine()
	for range 3 {
		cycle()
	}
	if n := countFDs(t); n != fds {
		t.Errorf("%d file descriptors after 3 cycles, %d before", n, fds)
	}
	if n := countThreads(t); n > threads+3 {
		t.Errorf("%d threads after 3 cycles, %d before", n, threads)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		t.Errorf("%d goroutines after 3 cycles, %d before", n, goroutines)
	}
	if out := c.Rados(t, "-p", c.Pool(), "listwatchers", name); strings.Contains(out, "watcher=") {
		t.Errorf("watchers left after Close: %q", out)
	}

	// Close waits for a changed in progress, and that changed's Load
	// fails as closed; the Store that caused it sees the watcher gone.
	s, err := OpenShared(cfg, name)
	if err != nil {
		t.Fatal(err)
	}
	entered, loaded := make(chan struct{}), make(chan error, 1)
	var once sync.Once
	if err := s.Watch(func() {
		once.Do(func() {
			close(entered)
			time.Sleep(300 * time.Millisecond)
			_, _, err := s.Load()
			loaded <- err
		})
	}); err != nil {
		t.Fatal(err)
	}
	stored := make(chan error, 1)
	go func() {
		_, v, err := writer.Load()
		if err == nil {
			_, _, err = writer.Store([]byte("z"), v)
		}
		stored <- err
	}()
	<-entered
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-loaded:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("Load in changed during Close: %v, want os.ErrClosed", err)
		}
	default:
		t.Fatal("Close returned before the changed in progress")
	}
	if err := <-stored; err != nil {
		t.Errorf("Store while the watcher closed: %v", err)
	}
	want := fmt.Sprintf("rbd: shared object %s/%s: load: file already closed", c.Pool(), name)
	if _, _, err := s.Load(); !errors.Is(err, os.ErrClosed) || err.Error() != want {
		t.Errorf("Load after Close: %v, want %q", err, want)
	}
	if _, ok, err := s.Store(nil, 1); ok || !errors.Is(err, os.ErrClosed) {
		t.Errorf("Store after Close: %v %v", ok, err)
	}
	if err := s.Watch(func() {}); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Watch after Close: %v", err)
	}
	if err := s.Close(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}
