package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
	"github.com/ddpstore/ddpstore/iwarp/mpa"
	"github.com/ddpstore/ddpstore/iwarp/rdmap"
)

// demoConfig is what the demo's flags choose.
type demoConfig struct {
	rev        uint8
	markers    bool
	noCRC      bool
	emss       int
	writeBytes int
	timeout    time.Duration
}

// The Responder's memory, as its ULP would have advertised it: one tagged
// buffer (VA-based TO) and untagged receive buffers posted for MSN 1..4.
const (
	respSTag   = 0x00010a01
	respBase   = 0x7f0000001000
	initSTag   = 0x00020b02 // the Initiator's RDMA Read sink
	badSTag    = 0x00dead00
	recvBufLen = 256
	recvPosted = 4
)

// demoResult is what the demo checks at the end.
type demoResult struct {
	readBack  []byte
	terminate rdmap.Error
	gotTerm   bool
}

// runDemo starts an MPA Responder on a loopback port and an Initiator that
// connects to it, then exchanges a Send, a multi-segment RDMA Write, an
// RDMA Read, and an RDMA Write to an STag the Responder never advertised,
// which the Responder answers with a Terminate. Every Startup frame and FPDU
// is printed, decoded, by the end that receives it.
func runDemo(ctx context.Context, cfg demoConfig, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	log := &printer{w: w}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	local := mpa.StartupConfig{Revision: cfg.rev, Markers: cfg.markers, NoCRC: cfg.noCRC, IRD: 4, ORD: 4}
	log.printf("MPA over TCP on %s: revision %d, Markers %v, CRC %v",
		ln.Addr(), local.Revision, cfg.markers, !cfg.noCRC)

	respDone := make(chan error, 1)
	respMem := make([]byte, 128<<10)
	go func() { respDone <- respond(ln, local, cfg.emss, respMem, log) }()

	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close(); ln.Close() })
	defer stop()

	req := local.Request([]byte("ddpstore demo"))
	frame, err := req.Append(nil)
	if err != nil {
		return err
	}
	if _, err := conn.Write(frame); err != nil {
		return err
	}
	reply, err := readStartup(conn, mpa.Reply)
	if err != nil {
		return fmt.Errorf("initiator: %w", err)
	}
	log.printf("%-9s <- %-9s %s", "initiator", "responder", describeStartup(reply))
	startup := reply.Startup()
	neg, err := mpa.Negotiate(mpa.Initiator, &local, &startup)
	if err != nil {
		return fmt.Errorf("initiator: %w", err)
	}
	l, err := newLink("initiator", conn, neg, cfg.emss, log)
	if err != nil {
		return err
	}
	log.printf("initiator: Full Operation, MULPDU %d, Markers out %v in %v, CRC %v",
		l.mulpdu, neg.TxMarkers, neg.RxMarkers, neg.CRC)

	// The Initiator's RDMA Read sink, and what it sees come back.
	sink := make([]byte, cfg.writeBytes)
	var res demoResult
	readDone := make(chan struct{})
	recvDone := make(chan error, 1)
	go func() {
		recvDone <- l.receive("responder", func(ulpdu []byte) bool {
			h, payload, err := rdmap.Parse(ulpdu)
			if err != nil {
				return false
			}
			switch rdmap.ControlOf(h).Opcode() {
			case rdmap.OpReadResponse:
				if err := ddp.ValidateTagged(h, uint32(len(payload)), ddp.TaggedBuffer{
					Valid: h.STag() == initSTag, Associated: true, Len: uint64(len(sink))}); err != nil {
					return false
				}
				copy(sink[h.TO():], payload)
				if h.Last() && res.readBack == nil {
					res.readBack = sink
					close(readDone)
				}
			case rdmap.OpTerminate:
				if t, err := rdmap.ParseTerminate(payload); err == nil {
					res.terminate, res.gotTerm = t.Err(), true
				}
				return false
			}
			return true
		})
	}()

	// The Initiator sends first (RFC 5044 7.1.2 rule 4).
	data := make([]byte, cfg.writeBytes)
	for i := range data {
		data[i] = byte(i*31 + i>>8)
	}
	steps := []struct {
		what string
		send func() error
	}{
		{"Send", func() error {
			return l.sendUntagged(rdmap.OpSend, 1, []byte("hello from the initiator"))
		}},
		{"RDMA Write", func() error { return l.sendTagged(rdmap.OpWrite, respSTag, respBase, data) }},
		{"RDMA Read Request", func() error {
			var rr [rdmap.ReadRequestLen]byte
			if _, err := (rdmap.ReadRequestFields{SinkSTag: initSTag, SinkTO: 0, Size: uint32(len(data)),
				SrcSTag: respSTag, SrcTO: respBase}).Encode(rr[:]); err != nil {
				return err
			}
			return l.sendUntagged(rdmap.OpReadRequest, 1, rr[:])
		}},
	}
	for _, s := range steps {
		if err := s.send(); err != nil {
			return fmt.Errorf("initiator: %s: %w", s.what, err)
		}
	}
	// Wait for the read to come back before provoking the Terminate.
	select {
	case <-readDone:
	case err := <-recvDone:
		return fmt.Errorf("initiator: connection ended before the RDMA Read Response: %v", err)
	case <-ctx.Done():
		return fmt.Errorf("initiator: no RDMA Read Response: %w", ctx.Err())
	}
	if err := l.sendTagged(rdmap.OpWrite, badSTag, 0, []byte("to an STag nobody advertised")); err != nil {
		return fmt.Errorf("initiator: RDMA Write: %w", err)
	}
	if err := <-recvDone; err != nil {
		return fmt.Errorf("initiator: %w", err)
	}
	if err := <-respDone; err != nil {
		return fmt.Errorf("responder: %w", err)
	}

	// Check what the wire did.
	var problems []error
	if !bytes.Equal(res.readBack, data) {
		problems = append(problems, errors.New("RDMA Read returned different octets than the RDMA Write placed"))
	}
	if !bytes.Equal(respMem[:len(data)], data) {
		problems = append(problems, errors.New("RDMA Write did not place its octets in the Responder's buffer"))
	}
	if want := rdmap.FromDDP(ddp.ErrInvalidSTag); !res.gotTerm || res.terminate != want {
		problems = append(problems, fmt.Errorf("expected a Terminate reporting %v, got %v", want, res.terminate))
	}
	log.printf("initiator sent %d FPDUs (%d octets); RDMA Read returned the %d octets the RDMA Write placed: %v; invalid STag answered with Terminate: %v",
		l.sent, l.octets, len(data), bytes.Equal(res.readBack, data), res.gotTerm)
	return errors.Join(problems...)
}

// readStartup reads one MPA Startup frame from conn.
func readStartup(conn net.Conn, expect mpa.StartupKind) (mpa.StartupFrame, error) {
	buf := make([]byte, mpa.MaxStartupFrame)
	if _, err := io.ReadFull(conn, buf[:mpa.StartupHeaderLen]); err != nil {
		return nil, err
	}
	pd, err := mpa.ParseStartupHeader(buf, expect, mpa.MaxPrivateData)
	if err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(conn, buf[mpa.StartupHeaderLen:mpa.StartupHeaderLen+pd]); err != nil {
		return nil, err
	}
	return mpa.ParseStartup(buf[:mpa.StartupHeaderLen+pd], expect, mpa.MaxPrivateData)
}

// respond is the Responder: it accepts one connection, answers the MPA
// Request, then places what arrives, validating every DDP Segment first
// (RFC 5041 7.1), serves the RDMA Read, and answers the first invalid
// segment with a Terminate, after which it places nothing more and closes.
func respond(ln net.Listener, local mpa.StartupConfig, emss int, mem []byte, log *printer) error {
	conn, err := ln.Accept()
	if err != nil {
		return err
	}
	defer conn.Close()
	req, err := readStartup(conn, mpa.Request)
	if err != nil {
		return err
	}
	log.printf("%-9s <- %-9s %s", "responder", "initiator", describeStartup(req))
	startup := req.Startup()
	neg, err := mpa.Negotiate(mpa.Responder, &local, &startup)
	if err != nil {
		return err
	}
	reply := neg.Reply(false, []byte("welcome"))
	frame, err := reply.Append(nil)
	if err != nil {
		return err
	}
	if _, err := conn.Write(frame); err != nil {
		return err
	}
	l, err := newLink("responder", conn, neg, emss, log)
	if err != nil {
		return err
	}
	var failure error
	recvMSN := uint32(1)
	err = l.receive("initiator", func(ulpdu []byte) bool {
		h, payload, err := rdmap.Parse(ulpdu)
		if err == nil {
			err = place(l, h, payload, mem, &recvMSN)
		}
		if err != nil {
			var hdr ddp.Header
			if len(ulpdu) >= ddp.TaggedHeaderLen {
				hdr, _, _ = ddp.Parse(ulpdu)
			}
			term := rdmap.NewTerminate(rdmap.ErrorOf(err), hdr, uint16(len(ulpdu)), nil)
			var b [rdmap.MaxTerminateLen]byte
			n, eerr := term.Encode(b[:])
			if eerr == nil {
				eerr = l.sendUntagged(rdmap.OpTerminate, 1, b[:n])
			}
			failure = eerr
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	return failure
}

// place validates one received DDP Segment and places or serves it.
func place(l *link, h ddp.Header, payload, mem []byte, recvMSN *uint32) error {
	switch rdmap.ControlOf(h).Opcode() {
	case rdmap.OpWrite:
		if err := ddp.ValidateTagged(h, uint32(len(payload)), ddp.TaggedBuffer{
			Valid: h.STag() == respSTag, Associated: true, Base: respBase, Len: uint64(len(mem))}); err != nil {
			return err
		}
		copy(mem[h.TO()-respBase:], payload)
	case rdmap.OpReadRequest:
		rr, err := rdmap.ParseReadRequest(payload)
		if err != nil {
			return err
		}
		if err := rdmap.ValidateReadRequest(rr, rdmap.SourceBuffer{Valid: rr.SrcSTag() == respSTag,
			Associated: true, RemoteRead: true, Base: respBase, Len: uint64(len(mem))}); err != nil {
			return err
		}
		off := rr.SrcTO() - respBase
		return l.sendTagged(rdmap.OpReadResponse, rr.SinkSTag(), rr.SinkTO(), mem[off:off+uint64(rr.Size())])
	default: // the Sends (rdmap.Parse has checked the opcode fits its queue)
		if err := ddp.ValidateUntagged(h, uint32(len(payload)), ddp.UntaggedQueue{Valid: true, Posted: true,
			FirstMSN: *recvMSN, LastMSN: recvPosted, BufLen: recvBufLen}); err != nil {
			return err
		}
		if h.Last() {
			*recvMSN++
		}
	}
	return nil
}
