package mem

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func registerFast(t testing.TB, tab *Table, pd PD, m *Mapping, off, n int, acc Access, addr Addressing) *MR {
	t.Helper()
	mr, err := tab.RegisterFast(pd, m, off, n, acc, addr)
	if err != nil {
		t.Fatalf("RegisterFast: %v", err)
	}
	return mr
}

func fastRegister(t testing.TB, tab *Table, mr *MR, off, n int, acc Access) STag {
	t.Helper()
	stag, err := tab.FastRegister(mr, off, n, acc)
	if err != nil {
		t.Fatalf("FastRegister: %v", err)
	}
	return stag
}

// check runs one Check in its own critical section.
func check(r *Reader, stag STag, pd PD, to, n uint64, need Access) ([]byte, Fault) {
	r.Enter()
	defer r.Exit()
	return r.Check(stag, pd, to, n, need)
}

// A fast-register MR: no valid STag until FastRegister; then exactly its
// window, access and key; a stale key fails; invalidation, local or
// remote, and the next registration.
func TestFastRegister(t *testing.T) {
	tab := NewTable(0)
	pd, other := NewPD(), NewPD()
	m := anon(t, 4*pageSize)
	all := LocalWrite | RemoteWrite | RemoteRead | RemoteInvalidate
	mr := registerFast(t, tab, pd, m, pageSize, 2*pageSize, all, VABased)
	defer deregister(t, tab, mr)
	r := tab.NewReader()
	defer r.Close()
	if !mr.Fast() || mr.Valid() {
		t.Fatalf("new fast MR: fast %v valid %v", mr.Fast(), mr.Valid())
	}
	if _, f := check(r, mr.STag(), pd, 0, 0, 0); f != FaultInvalidSTag {
		t.Errorf("STag before any FastRegister: %v, want invalid", f)
	}

	stag := fastRegister(t, tab, mr, 100, 1000, LocalWrite|RemoteWrite|RemoteInvalidate)
	if stag.Index() != mr.STag().Index() || stag != mr.STag() || !mr.Valid() {
		t.Fatalf("FastRegister gave %v, MR says %v (valid %v)", stag, mr.STag(), mr.Valid())
	}
	base := uint64(uintptrOf(m.Bytes()[pageSize+100:]))
	if mr.BaseTO() != base || mr.Len() != 1000 || &mr.Bytes()[0] != &m.Bytes()[pageSize+100] {
		t.Fatalf("window: base %#x len %d, want %#x 1000", mr.BaseTO(), mr.Len(), base)
	}
	checks := []struct {
		name  string
		stag  STag
		pd    PD
		to, n uint64
		need  Access
		want  Fault
	}{
		{"whole window", stag, pd, base, 1000, RemoteWrite, FaultNone},
		{"last octet", stag, pd, base + 999, 1, RemoteWrite, FaultNone},
		{"octet before", stag, pd, base - 1, 1, RemoteWrite, FaultBaseBounds},
		{"octet after", stag, pd, base + 1000, 1, RemoteWrite, FaultBaseBounds},
		{"one too many", stag, pd, base, 1001, RemoteWrite, FaultBaseBounds},
		{"TO wrap", stag, pd, ^uint64(0) - 1, 4, RemoteWrite, FaultTOWrap},
		{"read not granted", stag, pd, base, 1, RemoteRead, FaultAccess},
		{"other PD", stag, other, base, 1, RemoteWrite, FaultNotAssociated},
		{"other key", stag ^ 1, pd, base, 1, RemoteWrite, FaultInvalidSTag},
	}
	for _, c := range checks {
		b, f := check(r, c.stag, c.pd, c.to, c.n, c.need)
		if f != c.want || (f == FaultNone) != (len(b) == int(c.n)) {
			t.Errorf("%s: %v (%d octets), want %v", c.name, f, len(b), c.want)
		}
		if f == FaultNone && &b[0] != &m.Bytes()[pageSize+100+int(c.to-base)] {
			t.Errorf("%s: wrong memory", c.name)
		}
	}
	if f := tab.CheckSTag(stag, pd, RemoteWrite); f != FaultNone {
		t.Errorf("CheckSTag: %v", f)
	}
	if f := tab.CheckSTag(stag, pd, RemoteRead); f != FaultAccess {
		t.Errorf("CheckSTag for read: %v, want access", f)
	}
	if _, err := tab.FastRegister(mr, 0, 10, RemoteRead); !errors.Is(err, ErrValid) {
		t.Errorf("FastRegister of a valid STag: %v, want ErrValid", err)
	}

	// Remote invalidation, then a read-only window: the old STag is dead.
	if f := tab.RemoteInvalidate(stag, pd); f != FaultNone {
		t.Fatalf("RemoteInvalidate: %v", f)
	}
	if mr.Valid() {
		t.Error("valid after RemoteInvalidate")
	}
	stag2 := fastRegister(t, tab, mr, 0, 2*pageSize, RemoteRead)
	if stag2 == stag || stag2.Index() != stag.Index() {
		t.Fatalf("second registration %v after %v: want the same index, another key", stag2, stag)
	}
	for _, c := range []struct {
		name string
		stag STag
		to   uint64
		need Access
		want Fault
	}{
		{"stale key", stag, base, RemoteWrite, FaultInvalidSTag},
		{"stale key, read", stag, base, RemoteRead, FaultInvalidSTag},
		{"new key, read", stag2, base, RemoteRead, FaultNone},
		{"new key, write", stag2, base, RemoteWrite, FaultAccess},
	} {
		if _, f := check(r, c.stag, pd, c.to, 1, c.need); f != c.want {
			t.Errorf("%s: %v, want %v", c.name, f, c.want)
		}
	}
	if f := tab.Invalidate(stag, pd); f != FaultInvalidSTag {
		t.Errorf("invalidating the stale STag: %v, want invalid", f)
	}
	if !mr.Valid() {
		t.Fatal("a stale STag's invalidation killed the new registration")
	}
	if f := tab.RemoteInvalidate(stag2, pd); f != FaultCannotInvalidate {
		t.Errorf("remote invalidation without the right: %v", f)
	}
	if f := tab.Invalidate(stag2, other); f != FaultNotAssociated {
		t.Errorf("invalidation from another PD: %v", f)
	}
	if f := tab.Invalidate(stag2, pd); f != FaultNone {
		t.Errorf("local invalidation: %v", f)
	}
	if _, f := check(r, stag2, pd, base, 1, RemoteRead); f != FaultInvalidSTag {
		t.Errorf("after local invalidation: %v", f)
	}

	// Zero-length windows and the ends of the range.
	stag3 := fastRegister(t, tab, mr, 2*pageSize, 0, RemoteRead)
	if _, f := check(r, stag3, pd, uint64(uintptrOf(m.Bytes()[3*pageSize:])), 0, RemoteRead); f != FaultNone {
		t.Errorf("empty window at the end: %v", f)
	}
	tab.Invalidate(stag3, pd)
}

func TestFastRegisterErrors(t *testing.T) {
	tab := NewTable(0)
	pd := NewPD()
	m := anon(t, 2*pageSize)
	plain := register(t, tab, pd, m, 0, 100, RemoteRead, VABased)
	mr := registerFast(t, tab, pd, m, 0, pageSize, LocalWrite|RemoteWrite, ZeroBased)
	defer deregister(t, tab, plain, mr)
	other := NewTable(0)
	for _, c := range []struct {
		name string
		tab  *Table
		mr   *MR
		off  int
		n    int
		acc  Access
		want error
	}{
		{"plain MR", tab, plain, 0, 10, RemoteRead, ErrNotFast},
		{"other table", other, mr, 0, 10, RemoteWrite | LocalWrite, ErrForeign},
		{"more access than created with", tab, mr, 0, 10, RemoteRead, ErrAccess},
		{"remote write without local write", tab, mr, 0, 10, RemoteWrite, ErrAccess},
		{"past the end", tab, mr, pageSize - 9, 10, LocalWrite, ErrRange},
		{"negative offset", tab, mr, -1, 10, LocalWrite, ErrRange},
		{"negative length", tab, mr, 0, -1, LocalWrite, ErrRange},
	} {
		if _, err := c.tab.FastRegister(c.mr, c.off, c.n, c.acc); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := tab.RegisterFast(pd, m, 0, 3*pageSize, RemoteRead, VABased); !errors.Is(err, ErrRange) {
		t.Errorf("RegisterFast past the mapping: %v", err)
	}
	if _, err := tab.RegisterFast(PD{}, m, 0, 10, RemoteRead, VABased); !errors.Is(err, ErrPD) {
		t.Errorf("RegisterFast with no PD: %v", err)
	}
	// Zero-based: TO 0 is the window's first octet.
	stag := fastRegister(t, tab, mr, 40, 10, LocalWrite|RemoteWrite)
	r := tab.NewReader()
	defer r.Close()
	if b, f := check(r, stag, pd, 0, 10, RemoteWrite); f != FaultNone || &b[0] != &m.Bytes()[40] {
		t.Errorf("zero-based window: %v", f)
	}
	if _, f := check(r, stag, pd, 1, 10, RemoteWrite); f != FaultBaseBounds {
		t.Errorf("zero-based window, one past: %v", f)
	}
}

// A deregistered fast-register MR's index comes back under another key
// than its last one.
func TestFastRegisterIndexReuse(t *testing.T) {
	tab := NewTable(1)
	pd := NewPD()
	m := anon(t, pageSize)
	for i := range 50 {
		mr := registerFast(t, tab, pd, m, 0, 100, RemoteRead, VABased)
		last := fastRegister(t, tab, mr, 0, 100, RemoteRead)
		deregister(t, tab, mr)
		if f := tab.CheckSTag(last, pd, RemoteRead); f != FaultInvalidSTag {
			t.Fatalf("round %d: deregistered STag: %v", i, f)
		}
		plain := register(t, tab, pd, m, 0, 100, RemoteRead, VABased)
		if plain.STag() == last {
			t.Fatalf("round %d: index reused under the fast MR's last key %v", i, last)
		}
		deregister(t, tab, plain)
	}
}

// FastRegister, Check and Invalidate allocate nothing.
func TestFastRegisterAllocatesNothing(t *testing.T) {
	tab := NewTable(0)
	pd := NewPD()
	m := anon(t, 16*pageSize)
	mr := registerFast(t, tab, pd, m, 0, 16*pageSize, LocalWrite|RemoteWrite|RemoteRead|RemoteInvalidate, VABased)
	defer deregister(t, tab, mr)
	r := tab.NewReader()
	defer r.Close()
	off := 0
	n := testing.AllocsPerRun(1000, func() {
		stag, err := tab.FastRegister(mr, off, 4096, LocalWrite|RemoteWrite|RemoteInvalidate)
		if err != nil {
			t.Fatal(err)
		}
		r.Enter()
		if _, f := r.Check(stag, pd, mr.BaseTO(), 4096, RemoteWrite); f != FaultNone {
			t.Fatal(f)
		}
		r.Exit()
		if f := tab.RemoteInvalidate(stag, pd); f != FaultNone {
			t.Fatal(f)
		}
		if err := tab.Quiesce(context.Background(), mr); err != nil {
			t.Fatal(err)
		}
		off = (off + 4096) % (15 * pageSize)
	})
	if n != 0 {
		t.Errorf("%v allocations per FastRegister+Check+Invalidate, want 0", n)
	}
}

// FastRegister waits for a Reader that holds the region from the earlier
// registration, and Quiesce too.
func TestFastRegisterWaitsForHolders(t *testing.T) {
	tab := NewTable(0)
	pd := NewPD()
	m := anon(t, pageSize)
	mr := registerFast(t, tab, pd, m, 0, pageSize, LocalWrite|RemoteWrite|RemoteInvalidate, VABased)
	defer deregister(t, tab, mr)
	r := tab.NewReader()
	defer r.Close()
	stag := fastRegister(t, tab, mr, 0, 100, LocalWrite|RemoteWrite)
	r.Enter()
	if _, f := r.Check(stag, pd, mr.BaseTO(), 100, RemoteWrite); f != FaultNone {
		t.Fatal(f)
	}
	tab.Invalidate(stag, pd)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := tab.Quiesce(ctx, mr); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Quiesce with a holder: %v, want a deadline", err)
	}
	done := make(chan STag)
	go func() {
		s, err := tab.FastRegister(mr, 100, 100, LocalWrite|RemoteWrite)
		if err != nil {
			t.Error(err)
		}
		done <- s
	}()
	select {
	case <-done:
		t.Fatal("FastRegister did not wait for the holder")
	case <-time.After(30 * time.Millisecond):
	}
	r.Exit()
	s := <-done
	if _, f := check(r, s, pd, mr.BaseTO(), 100, RemoteWrite); f != FaultNone {
		t.Errorf("after the wait: %v", f)
	}
}

// Readers check the current STag of fast-register MRs and place into
// what they get, now and then invalidating remotely, while each MR's owner
// invalidates and fast-registers random windows. A reader whose Check
// succeeds must be inside the window that STag was registered for (the
// owner's Go-heap record of window generations, written only while no
// reader holds the region, says so; the race detector checks the order),
// and nothing is placed outside the current window after FastRegister
// returns.
func TestConcurrentFastRegister(t *testing.T) {
	const (
		owners  = 3
		readers = 4
		size    = 16 << 10
	)
	iters, limit := 3000, 3*time.Second
	if testing.Short() {
		iters, limit = 200, 500*time.Millisecond
	}
	type pub struct {
		stag STag
		base uint64
		n    int
		gen  int32
	}
	tab := NewTable(0)
	var (
		pubs   [owners]atomic.Pointer[pub]
		mrs    [owners]*MR
		pds    [owners]PD
		gens   [owners][]int32 // window generation of each octet, Go heap
		stop   atomic.Bool
		hits   atomic.Int64
		checks atomic.Int64
	)
	all := LocalWrite | RemoteWrite | RemoteRead | RemoteInvalidate
	for o := range owners {
		pds[o] = NewPD()
		m := anon(t, size)
		mrs[o] = registerFast(t, tab, pds[o], m, 0, size, all, VABased)
		gens[o] = make([]int32, size)
		pubs[o].Store(&pub{})
	}
	var rg sync.WaitGroup
	for range readers {
		r := tab.NewReader()
		rg.Go(func() {
			defer r.Close()
			rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
			for !stop.Load() {
				r.Enter()
				for range 4 {
					o := rng.IntN(owners)
					p := pubs[o].Load()
					if p.n == 0 {
						continue
					}
					at := rng.IntN(p.n)
					n := 1 + rng.IntN(p.n-at)
					if rng.IntN(16) == 0 {
						n++ // one past the window: must fail
					}
					b, f := r.Check(p.stag, pds[o], p.base+uint64(at), uint64(n), RemoteWrite)
					checks.Add(1)
					if pubs[o].Load() != p {
						// Published again since p was read: p's STag may
						// name a newer registration, whose random key is
						// p's again (one chance in 255 two registrations
						// on, as with any 8-bit key), and its window is
						// not p's. Nothing to say about it.
						continue
					}
					if f != FaultNone {
						if f != FaultInvalidSTag && at+n <= p.n {
							t.Errorf("check inside the window of %v: %v", p.stag, f)
						}
						continue
					}
					if at+n > p.n {
						t.Errorf("check past the window of %v succeeded", p.stag)
						continue
					}
					hits.Add(1)
					lo := int(uintptrOf(b) - uintptrOf(mrs[o].Mapping().Bytes()))
					for i := lo; i < lo+len(b); i++ {
						if g := gens[o][i]; g != p.gen {
							t.Errorf("octet %d of owner %d: generation %d, want %d", i, o, g, p.gen)
							break
						}
						b[i-lo] = byte(p.gen)
					}
					if rng.IntN(32) == 0 {
						runtime.Gosched()
					}
					if rng.IntN(64) == 0 {
						tab.RemoteInvalidate(p.stag, pds[o])
					}
				}
				r.Exit()
				runtime.Gosched()
			}
		})
	}
	var wg sync.WaitGroup
	start := time.Now()
	for o := range owners {
		wg.Go(func() {
			mr, g := mrs[o], gens[o]
			rng := rand.New(rand.NewPCG(rand.Uint64(), 2))
			for i := int32(1); int(i) <= iters && time.Since(start) < limit; i++ {
				old := pubs[o].Load()
				if rng.IntN(2) == 0 {
					tab.Invalidate(old.stag, pds[o])
				} else {
					tab.RemoteInvalidate(old.stag, pds[o])
				}
				if err := tab.Quiesce(context.Background(), mr); err != nil {
					t.Error(err)
					return
				}
				// No reader holds the region now: the window's octets are
				// the owner's until the next FastRegister.
				off := rng.IntN(size - 1)
				n := 1 + rng.IntN(min(size-off, 4096))
				for j := range g {
					if j >= off && j < off+n {
						g[j] = i
					} else {
						g[j] = 0
					}
				}
				stag, err := tab.FastRegister(mr, off, n, all)
				if err != nil {
					t.Error(err)
					return
				}
				pubs[o].Store(&pub{stag, mr.BaseTO(), n, i})
				time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
			}
		})
	}
	wg.Wait()
	stop.Store(true)
	rg.Wait()
	for o := range owners {
		deregister(t, tab, mrs[o])
	}
	if tab.Registered() != 0 {
		t.Errorf("%d MRs left registered", tab.Registered())
	}
	if hits.Load() == 0 {
		t.Errorf("no check of %d hit a window: the test tested nothing", checks.Load())
	}
	t.Logf("%d checks, %d hits, %v", checks.Load(), hits.Load(), time.Since(start))
}

// Deregistering fast-register MRs while Readers check and place through
// their current STags: once Deregister returns no Reader holds the memory,
// which is then unmapped (a Reader inside it would fault); the index comes
// back for the next MR with a key other than the last one.
func TestFastRegisterDeregisterUnderReaders(t *testing.T) {
	rounds := 40
	if testing.Short() {
		rounds = 10
	}
	tab := NewTable(0)
	pd := NewPD()
	type pub struct {
		stag STag
		base uint64
		live *atomic.Bool
	}
	var cur atomic.Pointer[pub]
	cur.Store(&pub{live: new(atomic.Bool)})
	var stop atomic.Bool
	var hits atomic.Int64
	var rg sync.WaitGroup
	for range 3 {
		r := tab.NewReader()
		rg.Go(func() {
			defer r.Close()
			for !stop.Load() {
				p := cur.Load()
				r.Enter()
				if b, f := r.Check(p.stag, pd, p.base, 64, RemoteWrite); f == FaultNone {
					if !p.live.Load() {
						t.Error("a Check succeeded on a deregistered MR")
					}
					for i := range b {
						b[i]++ // faults if unmapped under us
					}
					runtime.Gosched()
					if !p.live.Load() {
						t.Error("an MR was deregistered under a Reader that held it")
					}
					hits.Add(1)
				}
				r.Exit()
			}
		})
	}
	all := LocalWrite | RemoteWrite | RemoteInvalidate
	for i := 0; i < rounds; i++ {
		m, err := Anonymous(pageSize)
		if err != nil {
			t.Fatal(err)
		}
		mr := registerFast(t, tab, pd, m, 0, pageSize, all, VABased)
		live := new(atomic.Bool)
		live.Store(true)
		for j := 0; j < 3; j++ {
			stag := fastRegister(t, tab, mr, 64*j, 64, all)
			cur.Store(&pub{stag: stag, base: mr.BaseTO(), live: live})
			time.Sleep(20 * time.Microsecond)
			if j < 2 {
				tab.Invalidate(stag, pd)
			}
		}
		// Deregister with the last STag still valid and published.
		if err := tab.Deregister(context.Background(), mr); err != nil {
			t.Fatal(err)
		}
		live.Store(false)
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	rg.Wait()
	if hits.Load() == 0 {
		t.Error("no Check hit a registration: the test tested nothing")
	}
	if tab.Registered() != 0 {
		t.Errorf("%d MRs left registered", tab.Registered())
	}
}
