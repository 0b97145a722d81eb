package lu

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

// sharedObject is an object in a cluster as blockdev/rbd.Shared shows it:
// versioned compare-and-write, and a Store that returns once every other
// watcher's callback has run.
type sharedObject struct {
	mu       sync.Mutex
	data     []byte
	version  uint64
	watchers map[*sharedHandle]func()
	stores   int
}

// sharedHandle is one gateway's handle on the object.
type sharedHandle struct{ o *sharedObject }

func (o *sharedObject) handle() *sharedHandle {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.watchers == nil {
		o.watchers = map[*sharedHandle]func(){}
	}
	return &sharedHandle{o: o}
}

func (h *sharedHandle) Load() ([]byte, uint64, error) {
	h.o.mu.Lock()
	defer h.o.mu.Unlock()
	return slices.Clone(h.o.data), h.o.version, nil
}

func (h *sharedHandle) Store(state []byte, version uint64) (uint64, bool, error) {
	o := h.o
	o.mu.Lock()
	if version != o.version {
		o.mu.Unlock()
		return 0, false, nil
	}
	o.data, o.stores = slices.Clone(state), o.stores+1
	o.version++
	v := o.version
	var others []func()
	for w, f := range o.watchers {
		if w != h {
			others = append(others, f)
		}
	}
	o.mu.Unlock()
	// Like rados_notify2: the watchers run at once, each on its own
	// goroutine, and Store waits for every acknowledgement.
	var wg sync.WaitGroup
	for _, f := range others {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	wg.Wait()
	return v, true, nil
}

func (h *sharedHandle) Watch(changed func()) error {
	h.o.mu.Lock()
	defer h.o.mu.Unlock()
	h.o.watchers[h] = changed
	return nil
}

// gateways returns n targets, each one LU over its own memory store,
// sharing one persistent reservation object.
func gateways(t *testing.T, o *sharedObject, n int) []*Target {
	var tgs []*Target
	for range n {
		tg := targetOf(t, testStoreMemory(t))
		if err := tg.LU(0).SetSharedPR(o.handle()); err != nil {
			t.Fatal(err)
		}
		tgs = append(tgs, tg)
	}
	return tgs
}

// TestPRShared: two gateways of one LU see one reservation state. What one
// initiator registers and reserves through gateway A holds for another
// through gateway B, a preemption through B fences the holder on A, and a
// gateway started later loads it all.
func TestPRShared(t *testing.T) {
	o := &sharedObject{}
	gw := gateways(t, o, 2)
	a1 := asPort(t, gw[0], "iqn.2026-11.io.x:host1", 1, 1)
	b2 := asPort(t, gw[1], "iqn.2026-11.io.x:host2", 2, 1)
	b1 := asPort(t, gw[1], "iqn.2026-11.io.x:host1", 1, 2) // host1's port through B
	a1.register(0, 0x11)
	b2.register(0, 0x22)
	if _, ks := a1.keys(); !slices.Equal(ks, []uint64{0x11, 0x22}) {
		t.Fatalf("READ KEYS through A: %x", ks)
	}
	a1.reserve(0x11, prWriteExclusive)
	if key, typ := b2.reservation(); key != 0x11 || typ != prWriteExclusive {
		t.Fatalf("READ RESERVATION through B: key %#x type %d", key, typ)
	}
	if b2.canWrite() || !b2.canRead() {
		t.Fatal("host2 through B is not held to host1's Write Exclusive reservation made through A")
	}
	if !a1.canWrite() {
		t.Fatal("the holder cannot write through A")
	}
	// The reservation belongs to the initiator port, not to the gateway:
	// host1's same port through B holds it too (ALUA's second path).
	if !b1.canWrite() {
		t.Fatal("the holder cannot write through its second path")
	}
	// host2 preempts host1 through B: host1's registration is gone on A.
	b2.ok(prOut(prOutPreempt, prWriteExclusive), prParams(0x22, 0x11, 0))
	if a1.canWrite() {
		t.Fatal("host1 still writes through A after host2 preempted it through B")
	}
	if _, ks := a1.keys(); !slices.Equal(ks, []uint64{0x22}) {
		t.Fatalf("READ KEYS through A after the preemption: %x", ks)
	}
	// A gateway that starts now sees the same.
	c := gateways(t, o, 1)[0]
	c1 := asPort(t, c, "iqn.2026-11.io.x:host1", 1, 3)
	if key, typ := c1.reservation(); key != 0x22 || typ != prWriteExclusive || c1.canWrite() {
		t.Fatalf("a new gateway sees key %#x type %d", key, typ)
	}
	// The report says the state persists (PTPL_C), and APTPL is accepted.
	if d := c1.ok(prIn(prInReportCaps), nil).DataIn; d[2]&0x01 == 0 {
		t.Fatalf("REPORT CAPABILITIES %x: PTPL_C 0 on a shared LU", d)
	}
	c1.ok(prOut(prOutRegister, 0), prParams(0, 0x33, 0x01))
}

// TestPRSharedConcurrent: registrations made at once through two
// gateways, each Store waiting for the other gateway's notification while
// that gateway is committing its own, are all kept (none lost to a stale
// version) and nothing deadlocks.
func TestPRSharedConcurrent(t *testing.T) {
	o := &sharedObject{}
	gw := gateways(t, o, 2)
	const per = 20
	var wg sync.WaitGroup
	for g := range 2 {
		for i := range per {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var task Task
				task.Port = InitiatorPort(fmt.Sprintf("iqn.2026-11.io.x:gw%d-host%d", g, i), 1)
				gw[g].Execute(&task, lun(t, 0), prOut(prOutRegister, 0), prParams(0, uint64(g*100+i+1), 0), make([]byte, 512))
				if task.Status != 0 {
					t.Errorf("REGISTER through gateway %d: status %#x sense %x", g, task.Status, task.Sense)
				}
			}()
		}
	}
	wg.Wait()
	for g := range 2 {
		gen, ks := asPort(t, gw[g], "iqn.2026-11.io.x:reader", 9, 9).keys()
		if len(ks) != 2*per || gen != 2*per {
			t.Fatalf("gateway %d: %d keys, generation %d, want %d of each", g, len(ks), gen, 2*per)
		}
	}
	if o.stores != 2*per {
		t.Fatalf("%d stores for %d registrations", o.stores, 2*per)
	}
}
