package siw

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/iwarp/mpa"
)

// mode is one MPA configuration of both ends.
type mode struct {
	name string
	siw  map[string]string // siw module parameters
	ours mpa.StartupConfig
	// What RFC 5044/6581 and siw's code make of it.
	rev      int    // revision of the Reply
	crc      bool   // CRCs in use (unless both C bits are 0)
	rejected bool   // the Responder rejects (R bit)
	rtr      string // the RTR message, peer-to-peer: "write" or "read"
	// failsWith, when set, is why the conversation fails for a reason of
	// siw's; siwSays is what rping then prints.
	failsWith, siwSays string
	// knownBug, when set, names an engine defect that makes the scenario
	// fail: the test then skips with this reason instead of failing (and
	// says so when the defect no longer shows).
	knownBug string
}

// The siw defaults of the vmlab guest: revision 2, no CRC required, not
// strict, client-server model.
var siwDefaults = map[string]string{"mpa_version": "2", "mpa_crc_required": "0", "mpa_crc_strict": "0", "peer_to_peer": "0"}

func siwMode(over map[string]string) map[string]string {
	m := make(map[string]string, len(siwDefaults))
	for k, v := range siwDefaults {
		m[k] = v
	}
	for k, v := range over {
		m[k] = v
	}
	return m
}

// siwRev1ORD is why rping -s cannot serve a revision-1 client: siw
// reports IRD and ORD 0 in the CONNECT_REQUEST event of a Request without
// the RFC 6581 IRD/ORD word (siw_proc_mpareq sets cep->ird/ord only for an
// enhanced Request), rping accepts with what it was told (rdma_accept with
// no conn_param), so siw sets up the QP with ORD 0 and refuses the RDMA
// Read ("We negotiated not to send READ req's"). TestGuestSiwControlRev1
// shows siw does the same to its own rping -c.
const siwRev1ORD = "siw/rping: rping -s accepts a revision-1 connection with ORD 0 and cannot post its RDMA Read"

// clientModes are run with our engine as rping's client (MPA Initiator)
// against `rping -s` on siw (MPA Responder).
var clientModes = []mode{
	{name: "rev2", siw: siwMode(nil), rev: 2, crc: true},
	{name: "rev1", siw: siwMode(map[string]string{"mpa_version": "1"}), ours: mpa.StartupConfig{Revision: mpa.Rev1}, rev: 1, crc: true,
		failsWith: siwRev1ORD, siwSays: "post send error"},
	// siw as Responder copies the Request's C into its Reply and applies
	// mpa_crc_required only when the Request has C set already
	// (siw_proc_mpareq), so a C=0 Request gets a C=0 Reply: no CRCs,
	// although siw was told to require them.
	{name: "crc-required-by-siw", siw: siwMode(map[string]string{"mpa_crc_required": "1"}), ours: mpa.StartupConfig{NoCRC: true}, rev: 2, crc: false},
	{name: "crc-by-neither", siw: siwMode(nil), ours: mpa.StartupConfig{NoCRC: true}, rev: 2, crc: false},
	{name: "crc-required-by-both", siw: siwMode(map[string]string{"mpa_crc_required": "1"}), rev: 2, crc: true},
	// mpa_crc_strict without mpa_crc_required: siw refuses CRCs, and
	// rejects a Request with C=1.
	{name: "crc-refused-by-siw-strict", siw: siwMode(map[string]string{"mpa_crc_strict": "1"}), rev: 2, rejected: true},
	{name: "p2p-rtr-write", siw: siwMode(map[string]string{"peer_to_peer": "1"}), ours: mpa.StartupConfig{PeerToPeer: true, RTR: mpa.RTRWrite}, rev: 2, crc: true, rtr: "write"},
	{name: "p2p-rtr-read", siw: siwMode(map[string]string{"peer_to_peer": "1"}), ours: mpa.StartupConfig{PeerToPeer: true, RTR: mpa.RTRRead}, rev: 2, crc: true, rtr: "read"},
	// siw does not do Markers: it rejects a Request with M set.
	{name: "markers", siw: siwMode(nil), ours: mpa.StartupConfig{Markers: true}, rev: 2, rejected: true},
}

// serverModes are run with `rping -c` on siw (MPA Initiator) against our
// rping server (MPA Responder).
var serverModes = []mode{
	{name: "rev2", siw: siwMode(nil), rev: 2, crc: true},
	{name: "rev1", siw: siwMode(map[string]string{"mpa_version": "1"}), rev: 1, crc: true},
	// siw's Initiator with mpa_crc_required refuses a Reply without C
	// (siw_proc_mpareply: "reply unsupp") even though the Request's C=1
	// already makes CRCs mandatory; our Reply sets C whenever CRCs are in use.
	{name: "crc-required-by-siw", siw: siwMode(map[string]string{"mpa_crc_required": "1"}), ours: mpa.StartupConfig{NoCRC: true}, rev: 2, crc: true},
	{name: "crc-by-neither", siw: siwMode(nil), ours: mpa.StartupConfig{NoCRC: true}, rev: 2, crc: false},
	{name: "crc-required-by-both", siw: siwMode(map[string]string{"mpa_crc_required": "1"}), rev: 2, crc: true},
	{name: "p2p-rtr-write", siw: siwMode(map[string]string{"peer_to_peer": "1"}), ours: mpa.StartupConfig{RTR: mpa.RTRWrite}, rev: 2, crc: true, rtr: "write"},
	{name: "p2p-rtr-read", siw: siwMode(map[string]string{"peer_to_peer": "1"}), ours: mpa.StartupConfig{RTR: mpa.RTRRead}, rev: 2, crc: true, rtr: "read"},
	// A revision-1 Reply to siw's revision-2 Request: RFC 6581 lets the
	// Responder answer with a lower revision, but siw's Initiator drops a
	// connection with enhanced establishment whose Reply is not revision 2
	// with the enhanced bit (siw_proc_mpareply: "mpa reply error").
	{name: "rev1-reply-to-rev2", siw: siwMode(nil), ours: mpa.StartupConfig{Revision: mpa.Rev1}, rev: 1, crc: true,
		failsWith: "siw's Initiator drops a revision-2 connection whose Reply is revision 1", siwSays: "RDMA_CM_EVENT_REJECTED"},
}

const modeSize, modeCount = 4096, 3

// TestGuestMPAModesClient runs our rping client against rping -s in every
// client mode.
func TestGuestMPAModesClient(t *testing.T) {
	inGuest(t)
	for i, m := range clientModes {
		t.Run(m.name, func(t *testing.T) {
			port := 7400 + i
			siwParams(t, m.siw)
			c := startCapture(t, captureMeta{Name: "client-" + m.name, Port: port, Role: "client", Rev: m.rev,
				CRC: crcMeta(m), Rejected: m.rejected, FullOperation: !m.rejected, RTR: m.rtr})
			srv := startRpingServer(t, port, modeSize, modeCount)
			ctx := scenarioCtx(t, 30*time.Second)
			e := newEndpoint(t, modeSize)
			err := e.connect(ctx, port, iwarp.ConnConfig{MPA: m.ours})
			if m.rejected {
				var rej *iwarp.RejectedError
				if !errors.As(err, &rej) || !errors.Is(err, mpa.ErrRejected) {
					t.Fatalf("Connect: %v, want an *iwarp.RejectedError", err)
				}
				srv.kill() // rping -s waits for the next connection
				c.outcome("Connect returned %q (%T); siw's Reply has R set", err, err)
				return
			}
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			err = e.rpingClient(ctx, modeCount, faults{})
			if m.failsWith != "" {
				if err == nil {
					t.Fatalf("our client completed its pings, but expected: %s", m.failsWith)
				}
				srvErr := srv.wait(10 * time.Second)
				if !strings.Contains(srv.out.String(), m.siwSays) {
					t.Errorf("rping -s does not say %q", m.siwSays)
				}
				e.qp.Close()
				c.outcome("%s: our client: %v; rping -s: %v, said %q", m.failsWith, err, srvErr, lastLines(srv.out.String(), 3))
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := e.disconnect(ctx); err != nil {
				t.Errorf("disconnect: %v", err)
			}
			if err := srv.wait(10 * time.Second); err != nil {
				t.Errorf("rping -s: %v", err)
			}
			c.outcome("%d pings of %d octets validated by our client; rping -s exit 0", modeCount, modeSize)
		})
	}
}

// TestGuestMPAModesServer runs rping -c against our rping server in every
// server mode.
func TestGuestMPAModesServer(t *testing.T) {
	inGuest(t)
	for i, m := range serverModes {
		t.Run(m.name, func(t *testing.T) {
			port := 7500 + i
			siwParams(t, m.siw)
			c := startCapture(t, captureMeta{Name: "server-" + m.name, Port: port, Role: "server", Rev: m.rev,
				CRC: crcMeta(m), FullOperation: m.failsWith == "" && m.knownBug == "", RTR: m.rtr})
			ctx := scenarioCtx(t, 30*time.Second)
			e := newEndpoint(t, modeSize)
			l := e.listen(port, iwarp.ConnConfig{MPA: m.ours})
			cli := startRpingClient(t, port, modeSize, modeCount)
			stuck, err := serveUntilClientExits(ctx, e, l, cli, modeCount)
			cliErr := cli.wait(time.Second)
			switch {
			case m.knownBug != "" && err != nil:
				c.outcome("known engine bug: our server: %v%s; rping -c: %v, said %q", err, stuck, cliErr, lastLines(cli.out.String(), 3))
				t.Skipf("KNOWN ENGINE BUG: %s\nobserved: %v%s", m.knownBug, err, stuck)
			case m.knownBug != "":
				c.meta.FullOperation = true
				c.outcome("%d pings validated by rping -c -V (exit 0)", modeCount)
				t.Logf("the known bug no longer shows: %s", m.knownBug)
			case m.failsWith != "" && err == nil:
				t.Fatalf("served rping -c, but expected: %s", m.failsWith)
			case m.failsWith != "":
				if cliErr == nil {
					t.Errorf("rping -c exited 0")
				}
				if !strings.Contains(cli.out.String(), m.siwSays) {
					t.Errorf("rping -c does not say %q", m.siwSays)
				}
				c.outcome("%s: our server: %v%s; rping -c: %v, said %q", m.failsWith, err, stuck, cliErr, lastLines(cli.out.String(), 3))
			case err != nil:
				t.Fatal(err)
			default:
				c.outcome("%d pings of %d octets validated by rping -c -V (exit 0)", modeCount, modeSize)
			}
		})
	}
}

// serveUntilClientExits serves rping -c, and when the client exits while
// our side still waits, gives the QP a few seconds to notice and then
// closes it. stuck says so when that was needed (see
// TestGuestResponderPeerClosesBeforeFirstFPDU).
func serveUntilClientExits(ctx context.Context, e *endpoint, l *iwarp.Listener, cli *proc, count int) (stuck string, err error) {
	res := make(chan error, 1)
	go func() { res <- serveRpingClient(ctx, e, l, cli, count) }()
	select {
	case err = <-res:
		return "", err
	case <-cli.done:
	}
	select {
	case err = <-res:
		return "", err
	case <-time.After(5 * time.Second):
	}
	stuck = fmt.Sprintf(" [our QP still %v with Err %v 5 s after rping -c exited; closed]", e.qp.State(), e.qp.Err())
	l.Close()
	e.qp.Close()
	return stuck, <-res
}

// TestGuestSiwControlRev1 is the control for the client-rev1 mode: siw's
// own rping -c against rping -s with MPA revision 1 fails the same way
// (rping -s: "post send error"), so it is siw's, not ours.
func TestGuestSiwControlRev1(t *testing.T) {
	inGuest(t)
	const port = 7450
	siwParams(t, siwMode(map[string]string{"mpa_version": "1"}))
	c := startCapture(t, captureMeta{Name: "control-siw-vs-siw-rev1", Port: port, Role: "none", Rev: 1, FullOperation: true})
	srv := startRpingServer(t, port, modeSize, modeCount)
	cli := startRpingClient(t, port, modeSize, modeCount)
	cliErr := cli.wait(15 * time.Second)
	srvErr := srv.wait(5 * time.Second)
	if !strings.Contains(srv.out.String(), "post send error") {
		t.Errorf("rping -s does not say \"post send error\"; siw may serve revision 1 now")
	}
	c.outcome("siw vs siw, revision 1: rping -c: %v, said %q; rping -s: %v, said %q",
		cliErr, lastLines(cli.out.String(), 3), srvErr, lastLines(srv.out.String(), 3))
}

// TestGuestResponderPeerClosesBeforeFirstFPDU: a Responder QP whose
// Initiator closes the connection (FIN) after the MPA Reply and before
// sending any FPDU finishes gracefully: its sender, still waiting for the
// first FPDU (RFC 5044 7.1.2 rule 4), answers the FIN with its own, Done
// closes and posted receives are flushed. siw's rping -c closes this way
// whenever it dislikes the MPA Reply (here: a revision-1 Reply to its
// revision-2 Request).
func TestGuestResponderPeerClosesBeforeFirstFPDU(t *testing.T) {
	inGuest(t)
	const port = 7451
	siwParams(t, siwDefaults)
	ctx := scenarioCtx(t, 30*time.Second)
	e := newEndpoint(t, modeSize)
	l := e.listen(port, iwarp.ConnConfig{MPA: mpa.StartupConfig{Revision: mpa.Rev1}})
	cli := startRpingClient(t, port, modeSize, 1)
	if err := e.accept(ctx, l); err != nil {
		t.Fatal(err)
	}
	cli.wait(10 * time.Second)
	select {
	case <-e.qp.Done():
		var wcs [1]iwarp.WC
		if e.rcq.Poll(wcs[:]) != 1 || wcs[0].Status != iwarp.StatusFlushed {
			t.Errorf("the posted receive was not flushed: %+v", wcs[0])
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("QP still %v (Err %v) 5 s after the peer closed", e.qp.State(), e.qp.Err())
	}
}

func crcMeta(m mode) *bool {
	if m.rejected {
		return nil
	}
	return boolp(m.crc)
}
