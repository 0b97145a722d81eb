package mem

import (
	"context"
	"fmt"
)

// Invalidate invalidates stag for a local Invalidate of a stream of pd (the
// verbs' Local Invalidate work request): new checks of it fail from now on.
// The MR stays registered (its index is not reused) until Deregister. It does
// not wait for critical sections that hold the region already. It is
// lock-free, so the engine may call it from a receive goroutine, inside a
// critical section or not.
func (t *Table) Invalidate(stag STag, pd PD) Fault { return t.invalidate(stag, pd, false) }

// RemoteInvalidate is Invalidate for a Send with Invalidate received on a
// stream of pd: it also fails with FaultCannotInvalidate unless the region
// was registered with RemoteInvalidate.
func (t *Table) RemoteInvalidate(stag STag, pd PD) Fault { return t.invalidate(stag, pd, true) }

func (t *Table) invalidate(stag STag, pd PD, remote bool) Fault {
	s := t.slot(stag)
	if s == nil {
		return FaultInvalidSTag
	}
	for {
		reg := s.Load()
		if reg != nil && reg.fast != nil {
			return invalidateFast(reg, stag, pd, remote)
		}
		switch {
		case reg == nil || reg.key != stag.Key():
			return FaultInvalidSTag
		case reg.pd != pd:
			return FaultNotAssociated
		case remote && reg.access&RemoteInvalidate == 0:
			return FaultCannotInvalidate
		}
		// Registrations are unique pointers, so the swap cannot hit a
		// later registration of the same index (no ABA).
		if s.CompareAndSwap(reg, nil) {
			return FaultNone
		}
	}
}

// invalidateFast invalidates a fast-register region: it clears the valid
// bit of the state word that has stag's key. Every FastRegister changes the
// generation in the word, so the swap cannot hit a later registration.
func invalidateFast(reg *region, stag STag, pd PD, remote bool) Fault {
	f := reg.fast
	for {
		w := f.state.Load()
		switch {
		case !liveKey(w, stag.Key()):
			return FaultInvalidSTag
		case reg.pd != pd:
			return FaultNotAssociated
		case remote && stateAccess(w)&RemoteInvalidate == 0:
			return FaultCannotInvalidate
		}
		if f.state.CompareAndSwap(w, w&^frValid) {
			return FaultNone
		}
	}
}

// Deregister deregisters the MRs: it makes their STags invalid at once, waits
// until no Reader holds their regions (critical sections that hold other
// regions do not delay it) and frees their indexes for reuse with new keys,
// and their Mappings for Close. After it returns nil no goroutine holds a
// slice into their memory. If ctx is done first it returns ctx's error with
// the MRs invalid but still registered; call it again to finish.
// Deregistering an MR twice does nothing. It must not be called from inside
// a critical section that holds one of the MRs: it would wait for itself.
func (t *Table) Deregister(ctx context.Context, mrs ...*MR) error {
	t.mu.Lock()
	for _, mr := range mrs {
		if mr.t != t {
			t.mu.Unlock()
			return fmt.Errorf("mem: deregister %v: %w", mr.stag, ErrForeign)
		}
	}
	regs := make([]*region, 0, len(mrs))
	for _, mr := range mrs {
		if mr.state == registered {
			t.slot(mr.stag).Store(nil) // the index is still mr's own
			mr.state = draining
		}
		if mr.state == draining {
			regs = append(regs, mr.reg)
		}
	}
	t.mu.Unlock()

	if err := t.quiesce(ctx, regs); err != nil {
		return fmt.Errorf("mem: deregister: %w", err)
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	for _, mr := range mrs {
		if mr.state == draining {
			mr.state = deregistered
			if f := mr.reg.fast; f != nil { // the next registration of the index draws another key
				idx := mr.stag.Index()
				t.dir[idx>>chunkBits].Load().keys[idx&chunkMask] = uint8(f.state.Load() & frKeyMask)
			}
			t.free = append(t.free, mr.stag.Index())
			t.live--
			mr.m.release()
		}
	}
	return nil
}
