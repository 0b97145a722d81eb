package sctp

import (
	"errors"
	"fmt"
)

// Role is an end's part in a DDP Stream Session (section 6.2).
type Role uint8

const (
	Active  Role = iota // sends the Session Initiate
	Passive             // answers it
)

func (r Role) String() string {
	if r == Active {
		return "active"
	}
	return "passive"
}

// State is a DDP Stream Session's state, as one end sees it.
type State uint8

const (
	StateIdle         State = iota // nothing sent or received yet
	StateInitSent                  // active: Initiate sent, waiting for the answer
	StateInitReceived              // passive: Initiate received, waiting for the ULP
	StateEstablished               // accepted: DDP Segments flow both ways
	StateClosed                    // rejected, or both directions ended, or terminated
)

func (s State) String() string {
	switch s {
	case StateIdle:
		return "idle"
	case StateInitSent:
		return "initiate-sent"
	case StateInitReceived:
		return "initiate-received"
	case StateEstablished:
		return "established"
	case StateClosed:
		return "closed"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Input is what the core is told: a chunk received (taken in DDP-SSN order,
// section 6.1) or a call of the local interface.
type Input uint8

const (
	RecvInitiate Input = iota
	RecvAccept
	RecvReject
	RecvTerminate
	RecvSegment
	CallInitiate
	CallAccept
	CallReject
	CallTerminate
	CallSegment
)

var inputNames = [...]string{"receive Initiate", "receive Accept", "receive Reject", "receive Terminate",
	"receive DDP Segment", "Initiate", "Accept", "Reject", "Terminate", "send DDP Segment"}

func (i Input) String() string {
	if int(i) < len(inputNames) {
		return inputNames[i]
	}
	return fmt.Sprintf("Input(%d)", uint8(i))
}

// RecvInput maps a received Session Control function to its Input.
func RecvInput(f Function) Input {
	switch f {
	case FuncInitiate:
		return RecvInitiate
	case FuncAccept:
		return RecvAccept
	case FuncReject:
		return RecvReject
	}
	return RecvTerminate
}

// Event is what the core reports to the ULP.
type Event uint8

const (
	EvNone        Event = iota
	EvInitiated         // passive: a session is requested (Private Data for the ULP)
	EvAccepted          // active: the peer accepted (6.2)
	EvRejected          // active: the peer's ULP rejected (6.3)
	EvNotAccepted       // active: the peer answered with Terminate (6.4)
	EvSegment           // a DDP Segment to deliver
	EvPeerClosed        // the peer's last chunk: its Terminate (6.2)
	EvClosed            // both ends have ended the session
	EvIllegal           // the peer broke section 6: the session is terminated
)

var eventNames = [...]string{"none", "initiated", "accepted", "rejected", "not accepted", "segment",
	"peer closed", "closed", "illegal sequence"}

func (e Event) String() string {
	if int(e) < len(eventNames) {
		return eventNames[e]
	}
	return fmt.Sprintf("Event(%d)", uint8(e))
}

// Output is what an Input makes the core do: send a Session Control
// message (Send, 0 for none) and report an event.
type Output struct {
	Send  Function
	Event Event
	Err   error // EvIllegal: what the peer did; a refused call: why
}

// ErrIllegalSequence is a received chunk that makes the session conform to
// none of the legal patterns of section 6 (6.1: "the DDP Stream Session
// MUST be terminated").
var ErrIllegalSequence = errors.New("sctp: illegal DDP Stream Session sequence")

// ErrCallState is a local call the session's state does not allow.
var ErrCallState = errors.New("sctp: call not allowed in this session state")

// Core is the DDP Stream Session state machine of section 6 for one end, as
// a pure function of its inputs. The legal sequences, each end's chunks
// taken in DDP-SSN order:
//
//	accepted (6.2):  active  Initiate, Segment*, [Terminate]
//	                 passive Accept,   Segment*, [Terminate]
//	rejected (6.3):  active  Initiate;  passive Reject
//	not accepted (6.4): active Initiate; passive Terminate
//
// with at least one Terminate in an accepted session. The active side may
// send DDP Segments before the Accept arrives once the Initiate cannot be
// overtaken (6.6); this end's sender waits for the Accept, but as the
// passive end it takes such segments and holds them for the ULP.
type Core struct {
	role     Role
	state    State
	sentTerm bool // this end's Terminate is sent: nothing follows it
	recvTerm bool // the peer's Terminate arrived: nothing may follow it
}

// NewCore returns the state machine of one end of a new session.
func NewCore(r Role) Core { return Core{role: r} }

// State returns the session's state.
func (c *Core) State() State { return c.state }

// Role returns this end's role.
func (c *Core) Role() Role { return c.role }

// SentTerminate reports whether this end has sent its Terminate.
func (c *Core) SentTerminate() bool { return c.sentTerm }

// PeerTerminated reports whether the peer's Terminate arrived.
func (c *Core) PeerTerminated() bool { return c.recvTerm }

// Step applies one input.
func (c *Core) Step(in Input) Output {
	if in >= CallInitiate {
		return c.call(in)
	}
	return c.recv(in)
}

func (c *Core) illegal(in Input) Output {
	o := Output{Event: EvIllegal, Err: fmt.Errorf("%w: %v in state %v (%v)", ErrIllegalSequence, in, c.state, c.role)}
	if !c.sentTerm {
		o.Send = FuncTerminate
		c.sentTerm = true
	}
	c.state = StateClosed
	return o
}

func (c *Core) recv(in Input) Output {
	if c.recvTerm {
		return c.illegal(in) // the peer's Terminate was its final chunk
	}
	switch c.state {
	case StateIdle:
		if c.role == Passive && in == RecvInitiate {
			c.state = StateInitReceived
			return Output{Event: EvInitiated}
		}
	case StateInitSent:
		switch in {
		case RecvAccept:
			c.state = StateEstablished
			return Output{Event: EvAccepted}
		case RecvReject:
			c.state = StateClosed
			return Output{Event: EvRejected}
		case RecvTerminate:
			c.recvTerm = true
			c.state = StateClosed
			return Output{Event: EvNotAccepted}
		}
	case StateInitReceived:
		switch in {
		case RecvSegment: // sent once the Initiate was safe (6.6)
			return Output{Event: EvSegment}
		case RecvTerminate: // the active end gave up before an answer
			c.recvTerm = true
			return Output{Event: EvPeerClosed}
		}
	case StateEstablished:
		switch in {
		case RecvSegment:
			return Output{Event: EvSegment}
		case RecvTerminate:
			c.recvTerm = true
			if c.sentTerm {
				c.state = StateClosed
				return Output{Event: EvClosed}
			}
			return Output{Event: EvPeerClosed}
		}
	}
	return c.illegal(in)
}

func (c *Core) call(in Input) Output {
	refuse := func() Output {
		return Output{Err: fmt.Errorf("%w: %v in state %v (%v)", ErrCallState, in, c.state, c.role)}
	}
	switch in {
	case CallInitiate:
		if c.role != Active || c.state != StateIdle {
			return refuse()
		}
		c.state = StateInitSent
		return Output{Send: FuncInitiate}
	case CallAccept, CallReject:
		if c.role != Passive || c.state != StateInitReceived || c.recvTerm {
			return refuse()
		}
		if in == CallReject {
			c.state = StateClosed
			return Output{Send: FuncReject, Event: EvClosed}
		}
		c.state = StateEstablished
		return Output{Send: FuncAccept}
	case CallSegment:
		if c.state != StateEstablished || c.sentTerm {
			return refuse()
		}
		return Output{}
	case CallTerminate:
		if c.sentTerm {
			return Output{} // once is enough
		}
		switch c.state {
		case StateIdle:
			c.state = StateClosed
			return Output{Event: EvClosed} // nothing was sent: nothing to end
		case StateInitSent, StateInitReceived:
			// Passive: the non-ULP rejection of 6.4. Active: giving up.
			c.sentTerm = true
			c.state = StateClosed
			return Output{Send: FuncTerminate, Event: EvClosed}
		case StateEstablished:
			c.sentTerm = true
			if c.recvTerm {
				c.state = StateClosed
				return Output{Send: FuncTerminate, Event: EvClosed}
			}
			return Output{Send: FuncTerminate}
		}
		return Output{}
	}
	return refuse()
}
