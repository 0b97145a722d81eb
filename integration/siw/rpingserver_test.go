package siw

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/iwarp"
)

// listen listens for rping -c on port with cfg.
func (e *endpoint) listen(port int, cfg iwarp.ConnConfig) *iwarp.Listener {
	e.t.Helper()
	l, err := e.dev.Listen("tcp", fmt.Sprintf("%s:%d", guestAddr, port), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { l.Close() })
	return l
}

// accept takes the next MPA Request from l and accepts it with the
// endpoint's QP. A receive is posted first: rping's client Sends as soon as
// it is connected.
func (e *endpoint) accept(ctx context.Context, l *iwarp.Listener) error {
	if err := e.postRecv(); err != nil {
		return err
	}
	req, err := l.Accept(ctx)
	if err != nil {
		return fmt.Errorf("accept: %w (startup errors: %v)", err, l.StartupErrors())
	}
	if err := req.Accept(e.qp, nil); err != nil {
		return fmt.Errorf("accepting the MPA Request: %w", err)
	}
	return nil
}

// errClientGone is the end of rping's conversation: the client closed
// while the server waited for its next advertisement.
var errClientGone = errors.New("rping client closed the connection")

// rpingServe runs rping's server side over an accepted endpoint until the
// client goes away, and returns how many pings it served. The first receive
// must be posted already (accept does). f may alter where the RDMA Read and
// the RDMA Write go.
func (e *endpoint) rpingServe(ctx context.Context, f faults) (int, error) {
	buf := e.a
	for pings := 0; ; pings++ {
		addr, stag, size, err := e.recvInfo(ctx, "source advertisement")
		if err != nil {
			var wce *wcError
			if errors.As(err, &wce) && wce.wc.Status == iwarp.StatusFlushed && wce.qpErr == nil {
				return pings, errClientGone // a graceful close between pings
			}
			return pings, err
		}
		if size > buf.Len() {
			return pings, fmt.Errorf("ping %d: client advertises %d octets, the buffer has %d", pings, size, buf.Len())
		}
		clear(buf.Bytes())
		src := apply(f.read, e, advert{addr, stag, size})
		if err := e.qp.PostSend(&iwarp.SendWR{ID: 2, Op: iwarp.OpRead, SGL: []iwarp.SGE{iwarp.SGEOf(buf, 0, src.size)},
			RemoteSTag: src.stag, RemoteTO: src.addr}); err != nil {
			return pings, err
		}
		if _, err := e.wait(ctx, e.scq, "RDMA Read of the client's source"); err != nil {
			return pings, fmt.Errorf("ping %d: %w", pings, err)
		}
		if err := e.postRecv(); err != nil {
			return pings, err
		}
		if err := e.sendInfo(ctx, buf.BaseTO(), buf.STag(), buf.Len()); err != nil { // go ahead
			return pings, fmt.Errorf("ping %d: %w", pings, err)
		}
		addr, stag, size, err = e.recvInfo(ctx, "sink advertisement")
		if err != nil {
			return pings, fmt.Errorf("ping %d: %w", pings, err)
		}
		// Echo strlen(data)+1 octets, as rping's server does.
		n := bytes.IndexByte(buf.Bytes(), 0) + 1
		if n == 0 || n > size {
			return pings, fmt.Errorf("ping %d: no C string of at most %d octets in the data read", pings, size)
		}
		dst := apply(f.write, e, advert{addr, stag, n})
		if err := e.qp.PostSend(&iwarp.SendWR{ID: 3, Op: iwarp.OpWrite, SGL: []iwarp.SGE{iwarp.SGEOf(buf, 0, dst.size)},
			RemoteSTag: dst.stag, RemoteTO: dst.addr}); err != nil {
			return pings, err
		}
		if _, err := e.wait(ctx, e.scq, "RDMA Write to the client's sink"); err != nil {
			return pings, fmt.Errorf("ping %d: %w", pings, err)
		}
		if err := e.postRecv(); err != nil {
			return pings, err
		}
		if err := e.sendInfo(ctx, buf.BaseTO(), buf.STag(), buf.Len()); err != nil { // go ahead
			return pings, fmt.Errorf("ping %d: %w", pings, err)
		}
	}
}

// serveRpingClient accepts one rping -c on l and serves it; it checks that
// count pings were served, that the client closed gracefully and that rping
// validated its data (exit status 0).
func serveRpingClient(ctx context.Context, e *endpoint, l *iwarp.Listener, cli *proc, count int) error {
	if err := e.accept(ctx, l); err != nil {
		return err
	}
	pings, err := e.rpingServe(ctx, faults{})
	if !errors.Is(err, errClientGone) {
		return fmt.Errorf("after %d pings: %w", pings, err)
	}
	if pings != count {
		return fmt.Errorf("served %d pings, want %d", pings, count)
	}
	select {
	case <-e.qp.Done():
	case <-ctx.Done():
		return errors.New("the QP did not finish after the client closed")
	}
	if err := e.qp.Err(); err != nil {
		return fmt.Errorf("QP error after the client closed: %w", err)
	}
	if err := cli.wait(10 * time.Second); err != nil {
		return fmt.Errorf("rping -c: %w", err)
	}
	return nil
}

// TestGuestRpingServerAgainstSiwClient runs `rping -c -V` on siw against
// our rping server, for several sizes and counts.
func TestGuestRpingServerAgainstSiwClient(t *testing.T) {
	inGuest(t)
	siwParams(t, siwDefaults)
	for i, tc := range []struct{ size, count int }{
		{64, 10},
		{4096, 5},
		{65535, 3}, // rping's largest -S
	} {
		t.Run(fmt.Sprintf("size%d-count%d", tc.size, tc.count), func(t *testing.T) {
			port := 7300 + i
			name := fmt.Sprintf("server-size%d", tc.size)
			c := startCapture(t, captureMeta{Name: name, Port: port, Role: "server", Rev: 2, CRC: boolp(true), FullOperation: true})
			ctx := scenarioCtx(t, 30*time.Second)
			e := newEndpoint(t, 65536)
			l := e.listen(port, iwarp.ConnConfig{})
			cli := startRpingClient(t, port, tc.size, tc.count)
			if err := serveRpingClient(ctx, e, l, cli, tc.count); err != nil {
				t.Fatal(err)
			}
			c.outcome("rping -c -V: %d pings of %d octets validated, exit 0", tc.count, tc.size)
		})
	}
}
