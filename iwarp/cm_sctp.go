package iwarp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/ddpstore/ddpstore/iwarp/mpa"
	"github.com/ddpstore/ddpstore/iwarp/sctp"
)

// Connection establishment over SCTP (RFC 5043 section 6): the DDP Stream
// Session Initiate, Accept and Reject carry what the MPA Request and Reply
// carry over TCP. Their Private Data opens with the RFC 6581 IRD/ORD word
// (the engine is the adaptation layer's ULP, and this is how it states its
// RDMA Read queue depths), the ULP's Private Data after it. Over the
// userspace backend the Adaptation Layer Indication goes before both (see
// package sctp), which leaves the ULP 500 octets; over kernel SCTP 508.

// sctpConn is a DDP Stream Session as the engine's lower layer: when the
// QP ends, so does the association it ran on (one per QP).
type sctpConn struct {
	*sctp.Session
	once sync.Once
}

func (c *sctpConn) Close() error {
	c.once.Do(func() {
		c.Session.Close()
		c.Association().Shutdown()
	})
	return nil
}

func (c *sctpConn) Abort() error {
	c.once.Do(func() {
		c.Session.Close()
		c.Association().Abort()
	})
	return nil
}

// ErrPrivateDataTooLong is Private Data beyond what the Session Control
// message leaves the ULP.
var ErrPrivateDataTooLong = errors.New("iwarp: Private Data too long for the DDP Stream Session")

func irdordPD(cfg *ConnConfig, maxPD int, pd []byte) ([]byte, error) {
	if len(pd) > maxPD-mpa.IRDORDLen {
		return nil, fmt.Errorf("%w: %d octets, at most %d", ErrPrivateDataTooLong, len(pd), maxPD-mpa.IRDORDLen)
	}
	b := make([]byte, mpa.IRDORDLen, mpa.IRDORDLen+len(pd))
	mpa.IRDORD{IRD: cfg.MPA.IRD, ORD: cfg.MPA.ORD}.Put(b)
	return append(b, pd...), nil
}

// sctpNegotiated sets the Read queue depths from the peer's IRD/ORD word:
// this end's ORD no more than the peer's IRD and its IRD no more than the
// peer's ORD.
func sctpNegotiated(role mpa.Role, cfg *ConnConfig, peerPD []byte) (mpa.Negotiated, []byte, error) {
	if len(peerPD) < mpa.IRDORDLen {
		return mpa.Negotiated{}, nil, fmt.Errorf("iwarp: DDP Stream Session Private Data of %d octets has no IRD/ORD word", len(peerPD))
	}
	w := mpa.ParseIRDORD(peerPD)
	return mpa.Negotiated{Role: role, IRD: min(cfg.MPA.IRD, w.ORD), ORD: min(cfg.MPA.ORD, w.IRD)},
		append([]byte(nil), peerPD[mpa.IRDORDLen:]...), nil
}

// connectSCTP is Connect over network "sctp" or "sctp-udp": an
// association of its own, and a DDP Stream Session on its stream 0.
func (q *QP) connectSCTP(ctx context.Context, network, addr string, cfg ConnConfig) ([]byte, error) {
	if s := q.State(); s != StateIdle {
		return nil, fmt.Errorf("%w: Connect in state %v", ErrQPState, s)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartupTimeout)
	defer cancel()
	a, err := sctp.Dial(ctx, network, addr, cfg.SCTP)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			a.Abort()
		}
	}()
	pd, err := irdordPD(&cfg, sctp.MaxSessionPrivateData(network), cfg.PrivateData)
	if err != nil {
		return nil, err
	}
	s, peer, err := a.Initiate(ctx, 0, pd)
	if err != nil {
		var re *sctp.RejectedError
		if errors.As(err, &re) {
			_, upd, _ := sctpNegotiated(mpa.Initiator, &cfg, re.PrivateData)
			return upd, &RejectedError{PrivateData: upd}
		}
		return nil, err
	}
	neg, upd, err := sctpNegotiated(mpa.Initiator, &cfg, peer)
	if err != nil {
		s.Close()
		return nil, err
	}
	if err := q.attachSeg(&sctpConn{Session: s}, neg); err != nil {
		s.Close()
		return upd, err
	}
	ok = true
	return upd, nil
}

// attachSeg puts the QP in Full Operation over a DDP Stream Session.
func (q *QP) attachSeg(s segSession, neg mpa.Negotiated) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.conn != nil || q.State() != StateIdle || q.closing {
		return fmt.Errorf("%w: QP is %v", ErrQPState, q.State())
	}
	c := newConn(q, newSegLLP(s), neg)
	q.conn = c
	q.state.Store(uint32(StateRTS))
	c.start()
	return nil
}

// listenSCTP is Listen over network "sctp" or "sctp-udp".
func (d *Device) listenSCTP(network, addr string, cfg ConnConfig) (*Listener, error) {
	sl, err := sctp.Listen(network, addr, cfg.SCTP)
	if err != nil {
		return nil, err
	}
	l := &Listener{dev: d, sl: sl, cfg: cfg.withDefaults(), reqs: make(chan *ConnRequest),
		done: make(chan struct{}), pending: make(map[*net.TCPConn]struct{})}
	if err := d.addListener(l); err != nil {
		sl.Close()
		return nil, err
	}
	l.wg.Add(1)
	go l.acceptSCTP()
	return l, nil
}

// acceptSCTP takes associations, and the sessions initiated on each.
func (l *Listener) acceptSCTP() {
	defer l.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-l.done
		cancel()
	}()
	for {
		a, err := l.sl.Accept(ctx)
		if err != nil {
			return
		}
		l.wg.Add(1)
		go l.sessions(ctx, a)
	}
}

// sessions offers each session the peer initiates on a to Accept. The
// first is the one a QP runs on; the association ends with it.
func (l *Listener) sessions(ctx context.Context, a *sctp.Association) {
	defer l.wg.Done()
	s, err := a.AcceptSession(ctx)
	if err != nil {
		a.Abort()
		return
	}
	req := &ConnRequest{l: l, sess: s, RemoteAddr: a.RemoteAddr()}
	if len(s.PrivateData()) < mpa.IRDORDLen {
		l.mu.Lock()
		if len(l.errs) < 64 {
			l.errs = append(l.errs, fmt.Errorf("iwarp: Session Initiate from %s without the IRD/ORD word", a.RemoteAddr()))
		}
		l.mu.Unlock()
		s.Close()
		a.Shutdown()
		return
	}
	req.peer.PrivateData = append([]byte(nil), s.PrivateData()[mpa.IRDORDLen:]...)
	select {
	case l.reqs <- req:
	case <-l.done:
		s.Close()
		a.Abort()
	}
}

func (r *ConnRequest) acceptSCTP(qp *QP, pd []byte) error {
	cfg := r.l.cfg
	s := r.sess
	neg, _, err := sctpNegotiated(mpa.Responder, &cfg, s.PrivateData())
	if err != nil {
		r.rejectSCTP(nil)
		return err
	}
	if st := qp.State(); st != StateIdle {
		r.rejectSCTP(nil)
		return fmt.Errorf("%w: Accept with a QP in state %v", ErrQPState, st)
	}
	b, err := irdordPD(&ConnConfig{MPA: mpa.StartupConfig{IRD: neg.IRD, ORD: neg.ORD}}, s.MaxPrivateData(), pd)
	if err != nil {
		r.rejectSCTP(nil)
		return err
	}
	if err := s.Accept(b); err != nil {
		s.Close()
		s.Association().Abort()
		return err
	}
	if err := qp.attachSeg(&sctpConn{Session: s}, neg); err != nil {
		s.Close()
		s.Association().Abort()
		return err
	}
	return nil
}

func (r *ConnRequest) rejectSCTP(pd []byte) error {
	s := r.sess
	b, err := irdordPD(&r.l.cfg, s.MaxPrivateData(), pd)
	if err != nil {
		b, _ = irdordPD(&r.l.cfg, s.MaxPrivateData(), nil)
	}
	rerr := s.Reject(b)
	s.Association().Shutdown()
	if err != nil {
		return err
	}
	return rerr
}
