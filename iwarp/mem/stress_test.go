package mem

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// published is what a writer shows readers of its current registration.
type published struct {
	stag STag
	base uint64
}

// shadow is a writer's Go-heap twin of its region's live flag: plain reads
// and writes, so that the race detector reports any read that the grace
// period does not order before the writer's next write.
type shadow struct {
	gen int // -1 while deregistered
	_   [56]byte
}

// Region memory layout in the stress test: the owner's number plus one, and
// a live flag, both read atomically by readers.
func owner(b []byte) *uint32 { return (*uint32)(unsafe.Pointer(&b[0])) }
func live(b []byte) *uint32  { return (*uint32)(unsafe.Pointer(&b[4])) }

// Readers check, touch and hold regions while writers register, invalidate
// (locally and remotely), deregister and munmap them, one region or two at a
// time. A reader that finds a
// region dead or unmapped inside its critical section breaks the contract:
// the live flag, the shadow (under -race) and SIGSEGV on unmapped memory all
// catch it.
func TestConcurrentRegistration(t *testing.T) {
	const (
		writers = 4
		readers = 6
	)
	iters, limit := 1000, 3*time.Second
	if testing.Short() {
		iters, limit = 50, 500*time.Millisecond
	}
	tab := NewTable(0)
	var (
		pubs    [writers]atomic.Pointer[published]
		shadows [writers]shadow
		pds     [writers]PD
		stop    atomic.Bool
		checks  atomic.Int64
		hits    atomic.Int64
		regs    atomic.Int64
	)
	for w := range pds {
		pds[w] = NewPD() // distinct PDs: a stale STag never reaches another writer's region unnoticed
		pubs[w].Store(&published{})
	}

	var rg sync.WaitGroup
	for range readers {
		r := tab.NewReader()
		rg.Go(func() {
			defer r.Close()
			rng := rand.New(rand.NewPCG(rand.Uint64(), 0))
			for !stop.Load() {
				r.Enter()
				for range 8 {
					w := rng.IntN(writers)
					pub := pubs[w].Load()
					b, f := r.Check(pub.stag, pds[w], pub.base, 64, RemoteWrite)
					checks.Add(1)
					switch {
					case f == FaultInvalidSTag:
						continue
					case f != FaultNone:
						if pubs[w].Load() == pub { // only a stale STag may fail otherwise
							t.Errorf("Check of the current %v: %v", pub.stag, f)
						}
						continue
					}
					hits.Add(1)
					o := atomic.LoadUint32(owner(b)) - 1
					if o != uint32(w) || atomic.LoadUint32(live(b)) != 1 || shadows[o].gen < 0 {
						t.Errorf("reader inside its section got dead memory of writer %d (owner %d)", w, o)
					}
					for i := 8; i < len(b); i++ {
						b[i]++ // placement
					}
					if rng.IntN(4) == 0 {
						runtime.Gosched() // hold the section a while
					}
					if rng.IntN(64) == 0 { // a Send with Invalidate, from the receive path
						tab.RemoteInvalidate(pub.stag, pds[w])
					}
					if atomic.LoadUint32(live(b)) != 1 || shadows[o].gen < 0 {
						t.Errorf("region of writer %d died inside a reader's section", w)
					}
				}
				r.Exit()
				runtime.Gosched() // as a receive goroutine waits for the network
			}
		})
	}

	var wg sync.WaitGroup
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			for i := 0; i < iters && time.Since(start) < limit; i++ {
				m, err := Anonymous(pageSize)
				if err != nil {
					t.Error(err)
					return
				}
				b := m.Bytes()
				atomic.StoreUint32(owner(b), uint32(w)+1)
				atomic.StoreUint32(live(b), 1)
				shadows[w].gen = i
				addr := Addressing(i % 2)
				acc := LocalWrite | RemoteWrite | RemoteInvalidate
				mr, err := tab.Register(pds[w], m, 0, 64, acc, addr)
				if err != nil {
					t.Error(err)
					return
				}
				mrs, pub := []*MR{mr}, mr
				if i%3 == 0 { // a second region over the same bytes, deregistered with the first
					mr2, err := tab.Register(pds[w], m, 0, 64, acc, 1-addr)
					if err != nil {
						t.Error(err)
						return
					}
					mrs, pub = append(mrs, mr2), mr2
				}
				pubs[w].Store(&published{pub.STag(), pub.BaseTO()})
				regs.Add(int64(len(mrs)))
				time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
				switch i % 4 {
				case 0:
					tab.Invalidate(pub.STag(), pds[w])
				case 1:
					tab.RemoteInvalidate(pub.STag(), pds[w])
				}
				pubs[w].Store(&published{}) // retract first: an index freed below may come back under a stale key
				if err := tab.Deregister(context.Background(), mrs...); err != nil {
					t.Error(err)
					return
				}
				// Freed: any reader still inside now would see this.
				atomic.StoreUint32(live(b), 0)
				shadows[w].gen = -1
				if err := m.Close(); err != nil { // munmap
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	stop.Store(true)
	rg.Wait()
	if tab.Registered() != 0 {
		t.Errorf("%d MRs left registered", tab.Registered())
	}
	if hits.Load() == 0 {
		t.Errorf("no check of %d found a live region: the test tested nothing", checks.Load())
	}
	t.Logf("%d registrations, %d checks, %d hits, %v", regs.Load(), checks.Load(), hits.Load(), time.Since(start))
}
