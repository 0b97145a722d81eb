package transport_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/iwarp/mem"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/iser"
)

// TestHostileInitiator sends what a broken or malicious initiator might,
// while a well-behaved session keeps working beside it: each bad PDU gets
// a Reject or its connection is dropped, and the target serves on.
func TestHostileInitiator(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{sizes: []int64{16 << 20}})
	good := r.dial(t, initiator.Config{TargetName: targetName, InitiatorName: "iqn.2026-11.io.ddpstore:good"})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var goodErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if goodErr = pattern(good, 8192, 64<<10, int64(i)); goodErr != nil {
				return
			}
		}
	}()

	rejects := []struct {
		name   string
		build  func(cmdSN uint32) []byte
		hdr    iser.HeaderFields
		reason uint8
	}{
		{"vendor opcode", func(sn uint32) []byte { return pdu(iscsi.OpVendorInit1, func(b iscsi.BHS) { b.SetITT(2) }, nil) },
			iser.HeaderFields{}, iscsi.RejectCommandNotSupported},
		{"Data-Out under iSER", func(sn uint32) []byte {
			return pdu(iscsi.OpSCSIDataOut, func(b iscsi.BHS) { b.SetITT(3) }, make([]byte, 512))
		},
			iser.HeaderFields{}, iscsi.RejectProtocolError},
		{"data segment length lies", func(sn uint32) []byte {
			p := scsiCmd(4, sn, make([]byte, 6), 0, false, false)
			iscsi.BHS(p).SetDataSegmentLength(4096)
			return p
		}, iser.HeaderFields{}, iscsi.RejectProtocolError},
		{"read without a read STag", func(sn uint32) []byte { return scsiCmd(5, sn, read16(0, 8), 4096, true, false) },
			iser.HeaderFields{}, iscsi.RejectProtocolError},
		{"PDU longer than its padded data segment", func(sn uint32) []byte {
			p := nopOut(11, sn, []byte("abc"))
			return append(p[:iscsi.BHSLen+3], 0, 0)
		}, iser.HeaderFields{}, iscsi.RejectProtocolError},
		{"immediate data beyond EDTL", func(sn uint32) []byte {
			p := scsiCmd(6, sn, write16(0, 1), 512, false, true)
			b := append(p, make([]byte, 1024)...)
			iscsi.BHS(b).SetDataSegmentLength(1024)
			return b
		}, iser.HeaderFields{}, iscsi.RejectProtocolError},
	}
	for _, c := range rejects {
		t.Run(c.name, func(t *testing.T) {
			p := newRawPeer(t, r.dev)
			res := p.connect(r.addr)
			p.sendRaw(c.hdr, c.build(res.CmdSN))
			rej, _ := iscsi.AsReject(p.expect(iscsi.OpReject))
			if rej.Reason() != c.reason {
				t.Fatalf("Reject reason %#x, want %#x", rej.Reason(), c.reason)
			}
			// The connection still serves: a TEST UNIT READY with the
			// CmdSN the Reject says is next is answered GOOD.
			p.sendRaw(iser.HeaderFields{}, scsiCmd(100, rej.ExpCmdSN(), make([]byte, 6), 0, false, false))
			resp, _ := iscsi.AsSCSIResponse(p.expect(iscsi.OpSCSIResponse))
			if resp.Status() != 0 || resp.ITT() != 100 {
				t.Fatalf("after the Reject: status %#x ITT %d", resp.Status(), resp.ITT())
			}
		})
	}

	// RFC 7143 section 4.2.2.1: "The target MUST silently ignore any
	// non-immediate command outside of this range or non-immediate
	// duplicates within the range." Neither is answered (expect fails on
	// anything but the response to the next good command), and the
	// connection serves on.
	t.Run("CmdSN outside the window or a duplicate is ignored", func(t *testing.T) {
		p := newRawPeer(t, r.dev)
		res := p.connect(r.addr)
		tur := make([]byte, 6)
		p.sendRaw(iser.HeaderFields{}, scsiCmd(1, res.CmdSN+1000, tur, 0, false, false))
		p.sendRaw(iser.HeaderFields{}, scsiCmd(2, res.CmdSN, tur, 0, false, false))
		p.sendRaw(iser.HeaderFields{}, scsiCmd(3, res.CmdSN, tur, 0, false, false)) // a duplicate now
		p.sendRaw(iser.HeaderFields{}, scsiCmd(4, res.CmdSN+1, tur, 0, false, false))
		for _, itt := range []uint32{2, 4} {
			resp, _ := iscsi.AsSCSIResponse(p.expect(iscsi.OpSCSIResponse))
			if resp.Status() != 0 || resp.ITT() != itt {
				t.Fatalf("status %#x ITT %d, want GOOD for ITT %d", resp.Status(), resp.ITT(), itt)
			}
		}
	})

	// The Send delimits the PDU: a data segment without its padding, as
	// libiscsi sends it, is taken as it is (transport/target/iser.go).
	t.Run("data segment without padding", func(t *testing.T) {
		p := newRawPeer(t, r.dev)
		res := p.connect(r.addr)
		p.sendRaw(iser.HeaderFields{}, nopOut(12, res.CmdSN, []byte("abc"))[:iscsi.BHSLen+3])
		in := p.expect(iscsi.OpNOPIn)
		if n := in.DataSegmentLength(); n != 3 || string(in[iscsi.BHSLen:iscsi.BHSLen+3]) != "abc" || in.ITT() != 12 {
			t.Fatalf("NOP-In ITT %d with %d octets %q, want ITT 12 echoing \"abc\"", in.ITT(), n, in[iscsi.BHSLen:iscsi.BHSLen+min(n, 3)])
		}
	})

	drops := []struct {
		name string
		send func(p *rawPeer, sn uint32)
	}{
		{"read into memory beyond the advertised STag", func(p *rawPeer, sn uint32) {
			mr := p.c.ExtraMR()
			p.sendRaw(iser.HeaderFields{ReadValid: true, ReadSTag: uint32(mr.STag()), ReadBaseOffset: mr.BaseTO() + uint64(mr.Len()) - 4096},
				scsiCmd(7, sn, read16(0, 128), 64<<10, true, false))
		}},
		{"write from memory beyond the advertised STag", func(p *rawPeer, sn uint32) {
			mr := p.c.ExtraMR()
			p.sendRaw(iser.HeaderFields{WriteValid: true, WriteSTag: uint32(mr.STag()), WriteBaseOffset: mr.BaseTO() + uint64(mr.Len()) - 4096},
				scsiCmd(8, sn, write16(0, 128), 64<<10, false, true))
		}},
		{"write from an STag that does not exist", func(p *rawPeer, sn uint32) {
			p.sendRaw(iser.HeaderFields{WriteValid: true, WriteSTag: uint32(mem.MakeSTag(4000, 7)), WriteBaseOffset: 0},
				scsiCmd(9, sn, write16(0, 8), 4096, false, true))
		}},
		{"iSER message with a reserved opcode", func(p *rawPeer, sn uint32) {
			b := scsiCmd(10, sn, make([]byte, 6), 0, false, false)
			p.sendRaw(iser.HeaderFields{}, b)
			// Corrupt the next one's iSER opcode by hand.
			p.slot = (p.slot + 1) % p.c.SendSlots()
			buf := p.c.SendBuf(p.slot)
			buf[0] = 0x50
			p.c.PostPDU(p.slot, iser.HeaderLen+len(b), 0)
		}},
	}
	for _, c := range drops {
		t.Run(c.name, func(t *testing.T) {
			p := newRawPeer(t, r.dev)
			res := p.connect(r.addr)
			c.send(p, res.CmdSN)
			if err := p.ended(10 * time.Second); err == nil || err.Error() == "still connected" {
				t.Fatalf("connection not dropped: %v", err)
			}
		})
	}

	t.Run("command before login", func(t *testing.T) {
		p := newRawPeer(t, r.dev)
		var pd [iser.CMHeaderLen]byte
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := p.c.QP.Connect(ctx, "tcp", r.addr, iwarp.ConnConfig{PrivateData: pd[:]}); err != nil {
			t.Fatal(err)
		}
		p.run()
		p.sendRaw(iser.HeaderFields{}, scsiCmd(1, 0, make([]byte, 6), 0, false, false))
		if err := p.ended(10 * time.Second); err == nil || err.Error() == "still connected" {
			t.Fatalf("connection not dropped: %v", err)
		}
	})

	close(stop)
	wg.Wait()
	if goodErr != nil {
		t.Fatalf("the well-behaved session failed: %v", goodErr)
	}
	if err := pattern(good, 0, 4096, 99); err != nil {
		t.Fatalf("the well-behaved session after it all: %v", err)
	}
}

// TestNopTimeout: a target drops an initiator that stops answering its
// pings.
func TestNopTimeout(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{cfg: targetCfg(100*time.Millisecond, 300*time.Millisecond)})
	p := newRawPeer(t, r.dev)
	p.connect(r.addr) // never answers a NOP-In
	if err := p.ended(10 * time.Second); err == nil || err.Error() == "still connected" {
		t.Fatalf("silent initiator not dropped: %v", err)
	}
}

// nopOut is a NOP-Out ping (ITT itt, immediate) carrying data, padded.
func nopOut(itt, cmdSN uint32, data []byte) []byte {
	return pdu(iscsi.OpNOPOut, func(b iscsi.BHS) {
		n, _ := iscsi.AsNOPOut(b)
		n.SetITT(itt)
		n.SetTTT(iscsi.ReservedITT)
		n.SetCmdSN(cmdSN)
		b.SetImmediate(true)
	}, data)
}
