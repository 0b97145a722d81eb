package iwarp

import (
	"sort"
	"sync"
	"sync/atomic"

	"github.com/ddpstore/ddpstore/iwarp/rdmap"
)

// Message names the RDMAP messages a Device counts (RFC 5040 4.1).
type Message int

// The messages counted, in Counters' arrays.
const (
	MsgWrite Message = iota
	MsgReadRequest
	MsgReadResponse
	MsgSend // Send, Send with Solicited Event, with or without Invalidate
	NumMessages
)

var messageNames = [NumMessages]string{"write", "read_request", "read_response", "send"}

// String names the message in metric labels: write, read_request,
// read_response, send.
func (m Message) String() string {
	if m < 0 || m >= NumMessages {
		return "unknown"
	}
	return messageNames[m]
}

// Counters are what a Device has done since it was made, over all its
// QPs, past and present: the counters an RDMA NIC exposes (as Linux's
// rdma statistic shows a port's), read without stopping anything.
type Counters struct {
	// Sent and Received count whole messages; SentOctets and
	// ReceivedOctets their ULP payload (what DDP places: no headers,
	// Markers, padding or CRCs).
	Sent, Received             [NumMessages]uint64
	SentOctets, ReceivedOctets uint64
	// Writes counts the transmit batches written to the lower layer (each
	// one write system call or more), DirectWrites those of them that a
	// poster wrote in its own goroutine, the sender goroutine idle.
	Writes, DirectWrites uint64
	// SpinCaught counts the messages whose first octets a receiver's
	// spin found (ConnConfig.ReadSpin): it did not sleep for them.
	SpinCaught uint64
	// Inline counts the times a receiver's inline consumer took the
	// completions of what it had just received (CQ.SetInline): they were
	// handled on the receiver's goroutine, with no hand-over.
	Inline uint64
	// Terminates counts the streams ended by a Terminate, by who sent it
	// and its RFC 5040 error (layer, type, code): a local one for a
	// protocol error of the peer (an MPA CRC or framing error is an LLP
	// one, a bad STag a DDP or RDMAP one), a remote one for an error the
	// peer found in this end's stream. Sorted.
	Terminates []TerminateCount
}

// TerminateCount is how many Terminates of one kind a Device sent or
// received.
type TerminateCount struct {
	Remote bool        // the peer sent it
	Err    rdmap.Error // its layer, error type and code
	Count  uint64
}

// connStats are one stream's counts. Each field has one writer at a time
// (the receiver goroutine, or whoever holds the sender's lock), so the adds
// are uncontended; a reader (Device.Counters) may come at any time.
type connStats struct {
	sent, received             [NumMessages]atomic.Uint64
	sentOctets, receivedOctets atomic.Uint64
	writes, directWrites       atomic.Uint64
	spinCaught                 atomic.Uint64
	inline                     atomic.Uint64
}

// add adds c's counts into t.
func (c *connStats) add(t *Counters) {
	for m := range NumMessages {
		t.Sent[m] += c.sent[m].Load()
		t.Received[m] += c.received[m].Load()
	}
	t.SentOctets += c.sentOctets.Load()
	t.ReceivedOctets += c.receivedOctets.Load()
	t.Writes += c.writes.Load()
	t.DirectWrites += c.directWrites.Load()
	t.SpinCaught += c.spinCaught.Load()
	t.Inline += c.inline.Load()
}

// devStats are a Device's counts: the live streams' (read from them) plus
// those of the streams that ended (folded in by retire).
type devStats struct {
	mu      sync.Mutex
	live    map[*connStats]struct{}
	retired Counters
	terms   map[termKey]uint64
}

type termKey struct {
	remote bool
	err    rdmap.Error
}

// attach starts counting a stream's counts in the Device's.
func (d *devStats) attach(c *connStats) {
	d.mu.Lock()
	if d.live == nil {
		d.live = map[*connStats]struct{}{}
	}
	d.live[c] = struct{}{}
	d.mu.Unlock()
}

// retire folds an ended stream's counts into the Device's.
func (d *devStats) retire(c *connStats) {
	d.mu.Lock()
	if _, ok := d.live[c]; ok {
		delete(d.live, c)
		c.add(&d.retired)
	}
	d.mu.Unlock()
}

// terminate counts a Terminate.
func (d *devStats) terminate(remote bool, e rdmap.Error) {
	d.mu.Lock()
	if d.terms == nil {
		d.terms = map[termKey]uint64{}
	}
	d.terms[termKey{remote, e}]++
	d.mu.Unlock()
}

// Counters returns what the Device has counted so far.
func (d *Device) Counters() Counters {
	s := &d.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.retired
	t.Terminates = nil
	for c := range s.live {
		c.add(&t)
	}
	for k, n := range s.terms {
		t.Terminates = append(t.Terminates, TerminateCount{Remote: k.remote, Err: k.err, Count: n})
	}
	sort.Slice(t.Terminates, func(i, j int) bool {
		a, b := t.Terminates[i], t.Terminates[j]
		if a.Remote != b.Remote {
			return !a.Remote
		}
		if a.Err.Layer != b.Err.Layer {
			return a.Err.Layer < b.Err.Layer
		}
		if a.Err.Type != b.Err.Type {
			return a.Err.Type < b.Err.Type
		}
		return a.Err.Code < b.Err.Code
	})
	return t
}
