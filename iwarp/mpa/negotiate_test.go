package mpa

import (
	"errors"
	"fmt"
	"testing"
)

// startupHandshake runs MPA startup between two configurations through the
// wire: Initiator's Request, Responder's Negotiate and Reply, Initiator's
// Negotiate. A Responder error ends the handshake with its rejecting Reply.
func startupHandshake(t *testing.T, ini, res StartupConfig) (ni, nr Negotiated, errI, errR error) {
	t.Helper()
	req := ini.Request([]byte("hello"))
	reqWire, err := req.Append(nil)
	if err != nil {
		t.Fatalf("Request %+v: %v", req, err)
	}
	rs, err := ParseStartup(reqWire, Request, MaxPrivateData)
	if err != nil {
		t.Fatalf("Responder parsing Request: %v", err)
	}
	if string(rs.PrivateData()) != "hello" {
		t.Fatalf("Responder's ULP sees Private Data %q", rs.PrivateData())
	}
	rf := rs.Startup()
	nr, errR = Negotiate(Responder, &res, &rf)
	rep := nr.Reply(errR != nil, []byte("welcome"))
	repWire, err := rep.Append(nil)
	if err != nil {
		t.Fatalf("Reply %+v: %v", rep, err)
	}
	ps, err := ParseStartup(repWire, Reply, MaxPrivateData)
	if err != nil {
		t.Fatalf("Initiator parsing Reply: %v", err)
	}
	if string(ps.PrivateData()) != "welcome" {
		t.Fatalf("Initiator's ULP sees Private Data %q", ps.PrivateData())
	}
	pf := ps.Startup()
	ni, errI = Negotiate(Initiator, &ini, &pf)
	return ni, nr, errI, errR
}

// TestNegotiateMarkersAndCRC covers every combination of M and C on each
// side, in both roles.
func TestNegotiateMarkersAndCRC(t *testing.T) {
	for bits := 0; bits < 16; bits++ {
		iM, iC, rM, rC := bits&1 != 0, bits&2 != 0, bits&4 != 0, bits&8 != 0
		name := fmt.Sprintf("Initiator M%d C%d, Responder M%d C%d", b2i(iM), b2i(iC), b2i(rM), b2i(rC))
		t.Run(name, func(t *testing.T) {
			ini := StartupConfig{Markers: iM, NoCRC: !iC}
			res := StartupConfig{Markers: rM, NoCRC: !rC}

			// The Request carries the Initiator's own M and C; the Reply
			// the Responder's M, and C set when CRCs are in use either way.
			req := ini.Request(nil)
			if req.M != iM || req.C != iC {
				t.Fatalf("Request M %v C %v", req.M, req.C)
			}
			ni, nr, errI, errR := startupHandshake(t, ini, res)
			if errI != nil || errR != nil {
				t.Fatalf("errors %v, %v", errI, errR)
			}
			if rep := nr.Reply(false, nil); rep.M != rM || rep.C != (rC || iC) {
				t.Fatalf("Reply M %v C %v", rep.M, rep.C)
			}
			// Each end's transmit Markers follow the peer's M bit.
			if ni.TxMarkers != rM || ni.RxMarkers != iM {
				t.Errorf("Initiator Tx %v Rx %v Markers", ni.TxMarkers, ni.RxMarkers)
			}
			if nr.TxMarkers != iM || nr.RxMarkers != rM {
				t.Errorf("Responder Tx %v Rx %v Markers", nr.TxMarkers, nr.RxMarkers)
			}
			// CRC is off only when both have C = 0 (RFC 5044 4.4).
			wantCRC := iC || rC
			if ni.CRC != wantCRC || nr.CRC != wantCRC {
				t.Errorf("CRC Initiator %v Responder %v, want %v", ni.CRC, nr.CRC, wantCRC)
			}
			if ni.Role != Initiator || nr.Role != Responder {
				t.Errorf("roles %v %v", ni.Role, nr.Role)
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestNegotiateRevision(t *testing.T) {
	tests := []struct {
		ini, res uint8 // configured revisions (0 is 2)
		want     uint8
	}{
		{Rev1, Rev1, Rev1},
		{Rev1, Rev2, Rev1}, // a revision-2 Responder answers revision 1
		{Rev2, Rev1, Rev1}, // a revision-1 Responder: the Initiator falls back
		{Rev2, Rev2, Rev2},
		{0, 0, Rev2},
		{Rev1, 0, Rev1},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("Initiator rev %d, Responder rev %d", tc.ini, tc.res), func(t *testing.T) {
			ini := StartupConfig{Revision: tc.ini, IRD: 8, ORD: 4, PeerToPeer: true}
			res := StartupConfig{Revision: tc.res, IRD: 2, ORD: 16}
			if req := ini.Request(nil); req.Enhanced != (req.Rev == Rev2) || req.PDLength() != 4*b2i(req.Rev == Rev2) {
				t.Fatalf("Request %+v", req)
			}
			ni, nr, errI, errR := startupHandshake(t, ini, res)
			if errI != nil || errR != nil {
				t.Fatalf("errors %v, %v", errI, errR)
			}
			if ni.Rev != tc.want || nr.Rev != tc.want {
				t.Fatalf("Rev Initiator %d Responder %d, want %d", ni.Rev, nr.Rev, tc.want)
			}
			rep := nr.Reply(false, nil)
			if rep.Rev != tc.want || rep.Enhanced != (tc.want == Rev2) {
				t.Fatalf("Reply Rev %d Enhanced %v", rep.Rev, rep.Enhanced)
			}
			if tc.want == Rev1 {
				// No IRD/ORD negotiation: each keeps its configuration.
				if ni.IRD != 8 || ni.ORD != 4 || nr.IRD != 2 || nr.ORD != 16 || ni.PeerToPeer || ni.RTR != 0 {
					t.Fatalf("revision 1 negotiated %+v / %+v", ni, nr)
				}
			} else if ni.ORD != 2 || nr.ORD != 8 || !ni.PeerToPeer || ni.RTR != RTRWrite {
				t.Fatalf("revision 2 negotiated %+v / %+v", ni, nr)
			}
		})
	}

	// A Reply of a higher revision than the Request is invalid.
	rep := Startup{Kind: Reply, Rev: Rev2, Enhanced: true}
	n, err := Negotiate(Initiator, &StartupConfig{Revision: Rev1}, &rep)
	if !errors.Is(err, ErrRevisionMismatch) || CodeOf(err) != CodeStartup || n.Rev != Rev2 {
		t.Fatalf("rev 2 Reply to rev 1 Request: %+v, %v", n, err)
	}
	// A revision the package does not speak.
	for _, role := range []Role{Initiator, Responder} {
		f := Startup{Kind: Reply, Rev: 3}
		if role == Responder {
			f.Kind = Request
		}
		if _, err := Negotiate(role, &StartupConfig{}, &f); !errors.Is(err, ErrStartupRevision) {
			t.Errorf("%v with Rev 3: %v", role, err)
		}
		if _, err := Negotiate(role, &StartupConfig{Revision: 5}, &f); err == nil || CodeOf(err) != 0 {
			t.Errorf("%v configured with Rev 5: %v", role, err)
		}
	}
}

// TestNegotiateIRDORD: each end's ORD is limited by the peer's IRD, and the
// Initiator's IRD is what the Responder's ORD needs.
func TestNegotiateIRDORD(t *testing.T) {
	const U = IRDORDUnspecified
	tests := []struct {
		name                   string
		iIRD, iORD, rIRD, rORD uint16 // configured
		repIRD, repORD         uint16 // in the Reply (the Responder's)
		iniIRD, iniORD         uint16 // the Initiator's
		err                    error
	}{
		{"equal", 16, 16, 16, 16, 16, 16, 16, 16, nil},
		{"Responder smaller", 16, 16, 4, 2, 4, 2, 2, 4, nil},
		{"Initiator smaller", 2, 4, 16, 16, 4, 2, 2, 4, nil},
		{"crossed", 8, 32, 64, 1, 32, 1, 1, 32, nil},
		{"no reads at all", 0, 0, 16, 16, 0, 0, 0, 0, nil},
		{"Responder takes no reads", 16, 16, 0, 16, 0, 16, 16, 0, nil},
		{"siw caps at 128", 1024, 1024, 128, 128, 128, 128, 128, 128, nil},
		{"Initiator unspecified", U, U, 8, 8, 8, 8, 8, 8, nil},
		{"Responder unspecified", 8, 8, U, U, 8, 8, 8, 8, nil},
		{"both unspecified", U, U, U, U, U, U, U, U, nil},
		{"above 14 bits is unspecified", 0xffff, 0x8000, 8, 8, 8, 8, 8, 8, nil},
		{"max", 0x3ffe, 0x3ffe, 0x3ffe, 0x3ffe, 0x3ffe, 0x3ffe, 0x3ffe, 0x3ffe, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ini := StartupConfig{IRD: tc.iIRD, ORD: tc.iORD}
			res := StartupConfig{IRD: tc.rIRD, ORD: tc.rORD}
			ni, nr, errI, errR := startupHandshake(t, ini, res)
			if errR != nil || !errors.Is(errI, tc.err) {
				t.Fatalf("errors %v, %v", errI, errR)
			}
			rep := nr.Reply(false, nil)
			if rep.IRDORD.IRD != tc.repIRD || rep.IRDORD.ORD != tc.repORD || nr.IRD != tc.repIRD || nr.ORD != tc.repORD {
				t.Errorf("Responder IRD %d ORD %d, Reply %d/%d; want %d/%d", nr.IRD, nr.ORD, rep.IRDORD.IRD, rep.IRDORD.ORD, tc.repIRD, tc.repORD)
			}
			if ni.IRD != tc.iniIRD || ni.ORD != tc.iniORD {
				t.Errorf("Initiator IRD %d ORD %d, want %d/%d", ni.IRD, ni.ORD, tc.iniIRD, tc.iniORD)
			}
			// Whatever was configured, no end may issue more reads than the
			// peer accepts.
			if ni.ORD != U && nr.IRD != U && ni.ORD > nr.IRD {
				t.Errorf("Initiator ORD %d > Responder IRD %d", ni.ORD, nr.IRD)
			}
			if nr.ORD != U && ni.IRD != U && nr.ORD > ni.IRD {
				t.Errorf("Responder ORD %d > Initiator IRD %d", nr.ORD, ni.IRD)
			}
		})
	}
}

func TestNegotiateInsufficientIRD(t *testing.T) {
	// A Responder that ignores the Initiator's IRD (ORD 64 > IRD 16).
	rep := Startup{Kind: Reply, Rev: Rev2, Enhanced: true, IRDORD: IRDORD{IRD: 8, ORD: 64}}
	n, err := Negotiate(Initiator, &StartupConfig{IRD: 16, ORD: 16}, &rep)
	if !errors.Is(err, ErrInsufficientIRD) || CodeOf(err) != CodeInsufficientIRD {
		t.Fatalf("err = %v (code %v)", err, CodeOf(err))
	}
	if n.IRD != 64 || n.ORD != 8 {
		t.Errorf("reported IRD %d ORD %d, want the peer's 64/8", n.IRD, n.ORD)
	}
	// An unspecified ORD in the Reply is not a demand.
	rep.IRDORD.ORD = IRDORDUnspecified
	if n, err := Negotiate(Initiator, &StartupConfig{IRD: 16, ORD: 16}, &rep); err != nil || n.IRD != 16 || n.ORD != 8 {
		t.Errorf("unspecified ORD: %+v, %v", n, err)
	}
}

func TestNegotiateRTR(t *testing.T) {
	tests := []struct {
		name     string
		offer    RTR // Initiator's StartupConfig.RTR
		accept   RTR // Responder's StartupConfig.RTR
		resIRD   uint16
		noP2P    bool // the Initiator does not ask for peer-to-peer
		want     RTR
		noMatch  bool
		wantPeer bool
	}{
		{"default both: Write", 0, 0, 4, false, RTRWrite, false, true},
		{"all offered, all accepted: Write", AllRTR, AllRTR, 4, false, RTRWrite, false, true},
		{"Read and Send offered: Read", RTRRead | RTRSend, AllRTR, 4, false, RTRRead, false, true},
		{"Read needs an IRD: Send", RTRRead | RTRSend, AllRTR, 0, false, RTRSend, false, true},
		{"only Read, no IRD", RTRRead, AllRTR, 0, false, 0, true, true},
		{"only Send offered, default accept", RTRSend, 0, 4, false, 0, true, true},
		{"only Send both", RTRSend, RTRSend, 4, false, RTRSend, false, true},
		{"Write vs Read", RTRWrite, RTRRead, 4, false, 0, true, true},
		{"client-server", AllRTR, AllRTR, 4, true, 0, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ini := StartupConfig{IRD: 4, ORD: 4, PeerToPeer: !tc.noP2P, RTR: tc.offer}
			res := StartupConfig{IRD: tc.resIRD, ORD: 4, RTR: tc.accept}
			req := ini.Request(nil)
			if req.IRDORD.PeerToPeer != !tc.noP2P {
				t.Fatalf("Request flag A %v", req.IRDORD.PeerToPeer)
			}
			ni, nr, errI, errR := startupHandshake(t, ini, res)
			if tc.noMatch {
				if !errors.Is(errR, ErrNoMatchingRTR) || CodeOf(errR) != CodeNoMatchingRTR {
					t.Fatalf("Responder error %v", errR)
				}
				// Its Reply rejects, and the Initiator sees the rejection.
				if !errors.Is(errI, ErrRejected) || CodeOf(errI) != 0 {
					t.Fatalf("Initiator error %v", errI)
				}
				return
			}
			if errI != nil || errR != nil {
				t.Fatalf("errors %v, %v", errI, errR)
			}
			rep := nr.Reply(false, nil)
			if rep.IRDORD.RTR != tc.want || rep.IRDORD.PeerToPeer != tc.wantPeer {
				t.Fatalf("Reply A %v RTR %v, want %v %v", rep.IRDORD.PeerToPeer, rep.IRDORD.RTR, tc.wantPeer, tc.want)
			}
			if nr.RTR != tc.want || ni.RTR != tc.want || nr.PeerToPeer != tc.wantPeer || ni.PeerToPeer != tc.wantPeer {
				t.Fatalf("Initiator %v/%v, Responder %v/%v", ni.PeerToPeer, ni.RTR, nr.PeerToPeer, nr.RTR)
			}
		})
	}

	ini := &StartupConfig{IRD: 4, ORD: 4, PeerToPeer: true, RTR: RTRWrite | RTRRead}
	reply := func(w IRDORD) *Startup {
		return &Startup{Kind: Reply, Rev: Rev2, Enhanced: true, IRDORD: w}
	}
	// The Responder chose a type the Initiator did not offer (siw proposes a
	// Write when offered none it supports).
	if _, err := Negotiate(Initiator, &StartupConfig{IRD: 4, ORD: 4, PeerToPeer: true, RTR: RTRSend},
		reply(IRDORD{IRD: 4, ORD: 4, PeerToPeer: true, RTR: RTRWrite})); !errors.Is(err, ErrNoMatchingRTR) {
		t.Errorf("unoffered RTR: %v", err)
	}
	// No RTR type at all under flag A.
	if _, err := Negotiate(Initiator, ini, reply(IRDORD{IRD: 4, ORD: 4, PeerToPeer: true})); !errors.Is(err, ErrNoMatchingRTR) {
		t.Errorf("no RTR: %v", err)
	}
	// Several types in the Reply: the preferred one the Initiator offered.
	if n, err := Negotiate(Initiator, ini, reply(IRDORD{IRD: 4, ORD: 4, PeerToPeer: true, RTR: AllRTR})); err != nil || n.RTR != RTRWrite {
		t.Errorf("several RTR: %v, %v", n.RTR, err)
	}
	// The Responder declines peer-to-peer: client-server model.
	if n, err := Negotiate(Initiator, ini, reply(IRDORD{IRD: 4, ORD: 4, RTR: RTRWrite})); err != nil || n.PeerToPeer || n.RTR != 0 {
		t.Errorf("declined: %+v, %v", n, err)
	}
	// Flag A in a Reply to a client-server Request is ignored.
	if n, err := Negotiate(Initiator, &StartupConfig{IRD: 4, ORD: 4}, reply(IRDORD{IRD: 4, ORD: 4, PeerToPeer: true, RTR: RTRRead})); err != nil || n.PeerToPeer || n.RTR != 0 {
		t.Errorf("unasked A: %+v, %v", n, err)
	}
}

func TestNegotiateRejected(t *testing.T) {
	for _, rev := range []uint8{Rev1, Rev2} {
		rep := Startup{Kind: Reply, R: true, Rev: rev, Enhanced: rev == Rev2, PrivateData: []byte("go away")}
		n, err := Negotiate(Initiator, &StartupConfig{}, &rep)
		if !errors.Is(err, ErrRejected) || CodeOf(err) != 0 || n.Rev != rev {
			t.Errorf("rev %d: %+v, %v", rev, n, err)
		}
	}
	// R in a Request is not checked.
	req := Startup{Kind: Request, R: true, Rev: Rev1}
	if _, err := Negotiate(Responder, &StartupConfig{}, &req); err != nil {
		t.Errorf("R in Request: %v", err)
	}
}

func TestNegotiateMarkersRefused(t *testing.T) {
	siwLike := StartupConfig{RefuseMarkers: true, IRD: 128, ORD: 128}
	// As Responder: refuse, and answer with a rejecting Reply.
	ni, nr, errI, errR := startupHandshake(t, StartupConfig{Markers: true}, siwLike)
	if !errors.Is(errR, ErrMarkersRefused) || CodeOf(errR) != 0 {
		t.Fatalf("Responder: %v", errR)
	}
	if rep := nr.Reply(true, nil); !rep.R || rep.Rev != Rev2 {
		t.Fatalf("rejecting Reply %+v", rep)
	}
	if !errors.Is(errI, ErrRejected) {
		t.Fatalf("Initiator: %+v, %v", ni, errI)
	}
	// As Initiator: the Responder's Reply asks for Markers.
	_, _, errI, errR = startupHandshake(t, siwLike, StartupConfig{Markers: true})
	if errR != nil || !errors.Is(errI, ErrMarkersRefused) {
		t.Fatalf("Initiator: %v, Responder %v", errI, errR)
	}
	// Markers this end only receives are fine.
	if _, _, errI, errR = startupHandshake(t, StartupConfig{Markers: true, RefuseMarkers: true}, StartupConfig{}); errI != nil || errR != nil {
		t.Fatalf("receive-only Markers: %v, %v", errI, errR)
	}
}

func TestNegotiateWrongKind(t *testing.T) {
	req := Startup{Kind: Request, Rev: Rev1}
	rep := Startup{Kind: Reply, Rev: Rev1}
	if _, err := Negotiate(Initiator, &StartupConfig{}, &req); !errors.Is(err, ErrInitiatorInitiator) {
		t.Errorf("Initiator given a Request: %v", err)
	}
	if _, err := Negotiate(Responder, &StartupConfig{}, &rep); !errors.Is(err, ErrUnexpectedReply) {
		t.Errorf("Responder given a Reply: %v", err)
	}
	if _, err := Negotiate(Responder, &StartupConfig{}, &Startup{Rev: Rev1}); !errors.Is(err, ErrStartupKey) {
		t.Errorf("no Kind: %v", err)
	}
	if _, err := Negotiate(Role(0), &StartupConfig{}, &rep); err == nil {
		t.Error("Role 0 accepted")
	}
	for r, want := range map[Role]string{Initiator: "Initiator", Responder: "Responder", 7: "Role(7)"} {
		if r.String() != want {
			t.Errorf("%d: %q", r, r.String())
		}
	}
}

// TestNegotiateSiw checks the frames exchanged with a peer that behaves as
// Linux siw does by default: revision 2 with the enhanced bit, IRD/ORD
// capped at 128, no CRC requested, Markers refused, client-server model.
func TestNegotiateSiw(t *testing.T) {
	// siw as Initiator: its Request, as siw builds it.
	siwReq := startupFrameBytes(KeyRequest, FlagEnhanced, 2, 4+3, []byte{0, 128, 0, 128, 'a', 'b', 'c'})
	s, err := ParseStartup(siwReq, Request, MaxPrivateData)
	if err != nil {
		t.Fatal(err)
	}
	req := s.Startup()
	local := StartupConfig{IRD: 16, ORD: 1024}
	n, err := Negotiate(Responder, &local, &req)
	if err != nil || !n.CRC || n.TxMarkers || n.Rev != Rev2 || n.IRD != 16 || n.ORD != 128 {
		t.Fatalf("%+v, %v", n, err)
	}
	rep := n.Reply(false, nil)
	b, err := rep.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	// siw resets the connection unless the Reply is revision 2 with 0x10,
	// and its ORD must not exceed siw's IRD (128).
	if b[17] != 2 || b[16]&FlagEnhanced == 0 || b[16]&FlagM != 0 || ParseIRDORD(b[20:]).ORD > 128 {
		t.Fatalf("Reply % x", b)
	}
}
