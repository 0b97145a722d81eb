package sctp

import (
	"errors"
	"fmt"
	"testing"
)

type step struct {
	in    Input
	send  Function
	ev    Event
	state State
	err   error
}

// TestCoreSequences walks every legal sequence of section 6 and, from each
// state, every input that breaks them.
func TestCoreSequences(t *testing.T) {
	tests := []struct {
		name  string
		role  Role
		steps []step
	}{
		{"6.2 accepted, active closes first", Active, []step{
			{CallInitiate, FuncInitiate, EvNone, StateInitSent, nil},
			{RecvAccept, 0, EvAccepted, StateEstablished, nil},
			{CallSegment, 0, EvNone, StateEstablished, nil},
			{RecvSegment, 0, EvSegment, StateEstablished, nil},
			{CallTerminate, FuncTerminate, EvNone, StateEstablished, nil},
			{CallTerminate, 0, EvNone, StateEstablished, nil},  // once
			{RecvSegment, 0, EvSegment, StateEstablished, nil}, // the peer's last ones
			{RecvTerminate, 0, EvClosed, StateClosed, nil},
		}},
		{"6.2 accepted, peer closes first", Passive, []step{
			{RecvInitiate, 0, EvInitiated, StateInitReceived, nil},
			{CallAccept, FuncAccept, EvNone, StateEstablished, nil},
			{RecvSegment, 0, EvSegment, StateEstablished, nil},
			{RecvTerminate, 0, EvPeerClosed, StateEstablished, nil},
			{CallSegment, 0, EvNone, StateEstablished, nil}, // ours may still go
			{CallTerminate, FuncTerminate, EvClosed, StateClosed, nil},
		}},
		{"6.2 segments from the active end before the answer are held", Passive, []step{
			{RecvInitiate, 0, EvInitiated, StateInitReceived, nil},
			{RecvSegment, 0, EvSegment, StateInitReceived, nil},
			{CallAccept, FuncAccept, EvNone, StateEstablished, nil},
		}},
		{"6.3 rejected, passive", Passive, []step{
			{RecvInitiate, 0, EvInitiated, StateInitReceived, nil},
			{CallReject, FuncReject, EvClosed, StateClosed, nil},
		}},
		{"6.3 rejected, active", Active, []step{
			{CallInitiate, FuncInitiate, EvNone, StateInitSent, nil},
			{RecvReject, 0, EvRejected, StateClosed, nil},
		}},
		{"6.4 non-ULP rejected, passive", Passive, []step{
			{RecvInitiate, 0, EvInitiated, StateInitReceived, nil},
			{CallTerminate, FuncTerminate, EvClosed, StateClosed, nil},
		}},
		{"6.4 non-ULP rejected, active", Active, []step{
			{CallInitiate, FuncInitiate, EvNone, StateInitSent, nil},
			{RecvTerminate, 0, EvNotAccepted, StateClosed, nil},
		}},
		{"active gives up before the answer", Active, []step{
			{CallInitiate, FuncInitiate, EvNone, StateInitSent, nil},
			{CallTerminate, FuncTerminate, EvClosed, StateClosed, nil},
		}},
		{"the active end gives up before the ULP decides", Passive, []step{
			{RecvInitiate, 0, EvInitiated, StateInitReceived, nil},
			{RecvTerminate, 0, EvPeerClosed, StateInitReceived, nil},
			{CallAccept, 0, EvNone, StateInitReceived, ErrCallState},
			{CallTerminate, FuncTerminate, EvClosed, StateClosed, nil},
		}},
		{"local misuse is refused, not sent", Active, []step{
			{CallAccept, 0, EvNone, StateIdle, ErrCallState},
			{CallSegment, 0, EvNone, StateIdle, ErrCallState},
			{CallInitiate, FuncInitiate, EvNone, StateInitSent, nil},
			{CallInitiate, 0, EvNone, StateInitSent, ErrCallState},
			{CallSegment, 0, EvNone, StateInitSent, ErrCallState},
			{RecvAccept, 0, EvAccepted, StateEstablished, nil},
			{CallTerminate, FuncTerminate, EvNone, StateEstablished, nil},
			{CallSegment, 0, EvNone, StateEstablished, ErrCallState},
		}},
		{"a Terminate after an illegal chunk is not sent twice", Active, []step{
			{CallInitiate, FuncInitiate, EvNone, StateInitSent, nil},
			{RecvSegment, FuncTerminate, EvIllegal, StateClosed, ErrIllegalSequence},
			{RecvSegment, 0, EvIllegal, StateClosed, ErrIllegalSequence},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCore(tt.role)
			for i, s := range tt.steps {
				o := c.Step(s.in)
				if o.Send != s.send || o.Event != s.ev || c.State() != s.state || !errors.Is(o.Err, s.err) {
					t.Fatalf("step %d %v: send %v event %v state %v err %v; want %v %v %v %v",
						i, s.in, o.Send, o.Event, c.State(), o.Err, s.send, s.ev, s.state, s.err)
				}
			}
		})
	}
}

// TestCoreIllegal drives a session to each state and feeds it every received
// chunk the legal patterns do not allow there: each terminates the session
// (a Terminate is sent, unless one was already) and reports EvIllegal.
func TestCoreIllegal(t *testing.T) {
	type setup struct {
		name string
		role Role
		path []Input
		sent bool // this end's Terminate is already out
	}
	setups := []setup{
		{"active idle", Active, nil, false},
		{"passive idle", Passive, nil, false},
		{"active initiate-sent", Active, []Input{CallInitiate}, false},
		{"passive initiate-received", Passive, []Input{RecvInitiate}, false},
		{"active established", Active, []Input{CallInitiate, RecvAccept}, false},
		{"passive established", Passive, []Input{RecvInitiate, CallAccept}, false},
		{"established, ours sent", Active, []Input{CallInitiate, RecvAccept, CallTerminate}, true},
		{"established, the peer's received", Passive, []Input{RecvInitiate, CallAccept, RecvTerminate}, false},
		{"active rejected", Active, []Input{CallInitiate, RecvReject}, false},
		{"passive rejected", Passive, []Input{RecvInitiate, CallReject}, false},
		{"both closed", Active, []Input{CallInitiate, RecvAccept, CallTerminate, RecvTerminate}, true},
	}
	legal := map[string][]Input{
		"passive idle":                     {RecvInitiate},
		"active initiate-sent":             {RecvAccept, RecvReject, RecvTerminate},
		"passive initiate-received":        {RecvSegment, RecvTerminate},
		"active established":               {RecvSegment, RecvTerminate},
		"passive established":              {RecvSegment, RecvTerminate},
		"established, ours sent":           {RecvSegment, RecvTerminate},
		"established, the peer's received": {},
	}
	for _, s := range setups {
		for in := RecvInitiate; in <= RecvSegment; in++ {
			isLegal := false
			for _, l := range legal[s.name] {
				isLegal = isLegal || l == in
			}
			if isLegal {
				continue
			}
			t.Run(fmt.Sprintf("%s/%v", s.name, in), func(t *testing.T) {
				c := NewCore(s.role)
				for _, p := range s.path {
					if o := c.Step(p); o.Err != nil || o.Event == EvIllegal {
						t.Fatalf("setup %v: %+v", p, o)
					}
				}
				o := c.Step(in)
				want := FuncTerminate
				if s.sent {
					want = 0
				}
				if o.Event != EvIllegal || !errors.Is(o.Err, ErrIllegalSequence) || o.Send != want || c.State() != StateClosed {
					t.Fatalf("%+v state %v; want EvIllegal, send %v, closed", o, c.State(), want)
				}
				if !c.SentTerminate() {
					t.Fatal("no Terminate recorded as sent")
				}
			})
		}
	}
}
