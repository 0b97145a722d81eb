package remote

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/ddpstore/ddpstore/transport/initiator"
)

// Slots are fixed-size registered buffers of one session, each with the
// Command that uses it, taken one per I/O: the number of slots bounds the
// I/Os in flight, and nothing is allocated per I/O.
type Slots struct {
	s     *initiator.Session
	slots []Slot
	free  chan *Slot
	size  int
}

// Slot is one buffer and its command. After Disk.Read, Bytes is the data read.
type Slot struct {
	idx  int
	buf  []byte
	data []byte
	cmd  initiator.Command
	cdb  [16]byte
	p    *Slots
}

// NewSlots takes n buffers of size octets from the session's registered
// region.
func NewSlots(s *initiator.Session, n, size int) (*Slots, error) {
	if n < 1 || size < 4096 {
		return nil, fmt.Errorf("remote: %d slots of %d octets", n, size)
	}
	p := &Slots{s: s, slots: make([]Slot, n), free: make(chan *Slot, n), size: size}
	for i := range p.slots {
		b, err := s.Alloc(size)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("remote: buffer slot %d of %d (%d octets each): %w", i+1, n, size, err)
		}
		p.slots[i] = Slot{idx: i, buf: b, p: p}
		p.free <- &p.slots[i]
	}
	return p, nil
}

// Len is the number of slots; Size the octets in each.
func (p *Slots) Len() int  { return len(p.slots) }
func (p *Slots) Size() int { return p.size }

// Close returns the buffers to the session. No slot may be in use.
func (p *Slots) Close() {
	for i := range p.slots {
		if p.slots[i].buf != nil {
			p.s.Free(p.slots[i].buf)
			p.slots[i].buf = nil
		}
	}
}

// Holds reports whether b lies inside one slot's registered buffer: data
// there was placed by the target, not copied.
func (p *Slots) Holds(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	for i := range p.slots {
		buf := p.slots[i].buf
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
		if start >= lo && start+uintptr(len(b)) <= lo+uintptr(len(buf)) {
			return true
		}
	}
	return false
}

// TryTake hands a free slot, if there is one, to the caller, who reads
// into and writes from it (Disk.ReadInto, Disk.WriteFrom) and gives it
// back with Release.
func (p *Slots) TryTake() (*Slot, bool) {
	select {
	case sl := <-p.free:
		return sl, true
	default:
		return nil, false
	}
}

// get waits for a free slot.
func (p *Slots) get(ctx context.Context) (*Slot, error) {
	select {
	case sl := <-p.free:
		return sl, nil
	default:
	}
	select {
	case sl := <-p.free:
		return sl, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Index is the slot's number, 0..Len-1, for callers that keep per-slot state.
func (sl *Slot) Index() int { return sl.idx }

// Buffer is the slot's whole registered buffer.
func (sl *Slot) Buffer() []byte { return sl.buf }

// holds reports whether b lies inside the slot's buffer.
func (sl *Slot) holds(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(sl.buf)))
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return start >= lo && start+uintptr(len(b)) <= lo+uintptr(len(sl.buf))
}

// Bytes is the data of the last Read, in the registered buffer the target
// placed it in.
func (sl *Slot) Bytes() []byte { return sl.data }

// Release gives the slot back; its Bytes must not be used after.
func (sl *Slot) Release() {
	sl.data = nil
	sl.p.free <- sl
}
