package iwarp

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/iwarp/mpa"
	"github.com/ddpstore/ddpstore/iwarp/sctp"
)

// testNet is the network the shared helpers (listen, connectVia, pair)
// connect over; the SCTP tests below run the MPA/TCP tests again with it
// set to an SCTP backend. Tests of this package do not run in parallel.
var testNet = "tcp"

// overNetwork runs tests with testNet set to network.
func overNetwork(t *testing.T, network string, tests map[string]func(*testing.T)) {
	testNet = network
	defer func() { testNet = "tcp" }()
	for name, f := range tests {
		t.Run(name, f)
	}
}

// TestSCTPUDP runs every RDMAP operation (Send and its variants, RDMA
// Write, RDMA Read, Terminate with each error the peer can cause) over
// userspace SCTP on UDP loopback, through the same tests as MPA/TCP.
func TestSCTPUDP(t *testing.T) { testSCTPNetwork(t, sctp.NetworkUDP) }

// TestSCTPKernel is TestSCTPUDP over kernel SCTP on loopback. It runs
// inside the vmlab guest (integration/sctp), whose kernel has SCTP; on a
// kernel without it, it skips.
func TestSCTPKernel(t *testing.T) {
	needKernelSCTP(t)
	testSCTPNetwork(t, sctp.NetworkKernel)
}

// needKernelSCTP skips without kernel SCTP, but fails inside the vmlab
// guest, which has it.
func needKernelSCTP(tb testing.TB) {
	tb.Helper()
	if sctp.KernelAvailable() {
		return
	}
	if os.Getenv("VMLAB_GUEST") == "1" {
		tb.Fatal("no kernel SCTP inside the vmlab guest (is sctp.ko loaded?)")
	}
	tb.Skip("this kernel has no SCTP: run inside the vmlab guest (integration/sctp)")
}

func testSCTPNetwork(t *testing.T, network string) {
	g, fds := runtime.NumGoroutine(), openFDs(t)
	overNetwork(t, network, sctpTests)
	// Every association, socket and goroutine is gone after Close.
	for i := 0; i < 500 && (runtime.NumGoroutine() > g || openFDs(t) > fds); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if n, f := runtime.NumGoroutine(), openFDs(t); n > g || f > fds {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines (%d before), %d fds (%d before)\n%s", n, g, f, fds, buf[:runtime.Stack(buf, true)])
	}
}

func openFDs(t *testing.T) int {
	d, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(d)
}

var sctpTests = map[string]func(*testing.T){
	"Operations":         TestOperations,
	"TerminateCodes":     TestTerminateCodes,
	"SendWithInvalidate": TestSendWithInvalidate,
	"SCTPSizes":          testSCTPSizes,
	"SCTPGraceful":       testSCTPGraceful,
}

// testSCTPSizes moves 0, 1, MULPDU-1, MULPDU and MULPDU+1 octets (one
// segment either side of the LLP's maximum) with every operation.
func testSCTPSizes(t *testing.T) {
	ini, resp := connect(t, ConnConfig{}, ConnConfig{})
	m := ini.qp.conn.l.maxULPDU()
	for _, n := range []int{0, 1, m - 18 - 1, m - 18, m - 18 + 1, m, m + 1, 3*m + 7} {
		t.Run(fmt.Sprint(n), func(t *testing.T) { exchange(t, ini, resp, n) })
	}
}

// testSCTPGraceful: Disconnect ends both QPs with a nil Err, after the
// work posted before it completed.
func testSCTPGraceful(t *testing.T) {
	ini, resp := connect(t, ConnConfig{}, ConnConfig{})
	ping(t, ini, resp, 1)
	if err := ini.qp.PostSend(&SendWR{ID: 2, Op: OpWrite, SGL: []SGE{ini.sge(0, 1<<20)}, RemoteSTag: resp.mr.STag(), RemoteTO: resp.mr.BaseTO()}); err != nil {
		t.Fatal(err)
	}
	ini.qp.Disconnect()
	ini.expect(ini.scq, 2, WCWrite, StatusSuccess, 1<<20)
	waitDone(t, "initiator", ini.qp)
	waitDone(t, "responder", resp.qp)
	if ini.qp.Err() != nil || resp.qp.Err() != nil {
		t.Fatalf("graceful close: %v / %v", ini.qp.Err(), resp.qp.Err())
	}
}

// netPipe as testNet makes pair connect over an in-memory association
// pair that delivers chunks out of order.
const netPipe = "pipe-swapped"

// pipePair connects two ends over an in-memory association pair that
// reorders chunks.
func pipePair(t testing.TB, size int) (ini, resp *end) {
	ini, resp = newSizedEnd(t, "initiator", nil, size), newSizedEnd(t, "responder", nil, size)
	a, b := sctp.Pipe(sctp.PipeConfig{Swap: true})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ch := make(chan error, 1)
	cfg := ConnConfig{}.withDefaults()
	go func() {
		s, err := b.AcceptSession(ctx)
		if err == nil {
			var neg mpa.Negotiated
			neg, _, err = sctpNegotiated(mpa.Responder, &cfg, s.PrivateData())
			if err == nil {
				pd, _ := irdordPD(&cfg, s.MaxPrivateData(), nil)
				if err = s.Accept(pd); err == nil {
					err = resp.qp.attachSeg(&sctpConn{Session: s}, neg)
				}
			}
		}
		ch <- err
	}()
	pd, _ := irdordPD(&cfg, sctp.MaxPrivateData, nil)
	s, peer, err := a.Initiate(ctx, 0, pd)
	if err != nil {
		t.Fatal(err)
	}
	neg, _, err := sctpNegotiated(mpa.Initiator, &cfg, peer)
	if err != nil {
		t.Fatal(err)
	}
	if err := ini.qp.attachSeg(&sctpConn{Session: s}, neg); err != nil {
		t.Fatal(err)
	}
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
	return ini, resp
}

// TestSCTPReordered runs every operation, and the Terminates, over an
// association that delivers chunks out of order: the adaptation layer puts
// them back in DDP-SSN order before DDP sees them (RFC 5043 section 10).
func TestSCTPReordered(t *testing.T) {
	overNetwork(t, netPipe, sctpTests)
}

// benchWriteSCTP runs benchWrite's sizes over network, named
// "<size><suffix>" (internal/benchratio compares them with
// BenchmarkTCPLoopback by size).
func benchWriteSCTP(b *testing.B, network, suffix string) {
	testNet = network
	defer func() { testNet = "tcp" }()
	for _, sz := range benchSizes {
		b.Run(sz.name+suffix, func(b *testing.B) {
			ini, resp := benchPair(b, false)
			wr := &SendWR{Op: OpWrite, SGL: []SGE{ini.sge(0, sz.n)}, RemoteSTag: resp.mr.STag(), RemoteTO: resp.mr.BaseTO()}
			b.SetBytes(int64(sz.n))
			b.ReportAllocs()
			b.ResetTimer()
			runWindow(b, ini, wr)
			rd := &SendWR{Op: OpRead, SGL: []SGE{ini.sge(0, 1)}, RemoteSTag: resp.mr.STag(), RemoteTO: resp.mr.BaseTO()}
			if err := ini.qp.PostSend(rd); err != nil {
				b.Fatal(err)
			}
			ini.drain(1)
		})
	}
}
