package transport_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/iwarp/mem"
	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/iser"
	"github.com/ddpstore/ddpstore/transport/iserconn"
	"github.com/ddpstore/ddpstore/transport/login"
)

// rawPeer is an iSER endpoint driven by hand, PDU by PDU: the hostile
// initiator of the tests, or a silent target.
type rawPeer struct {
	t     testing.TB
	c     *iserconn.Conn
	rx    chan []byte
	reads chan *iwarp.WC
	slot  int
	stop  chan bool
	done  chan error
	once  sync.Once
	// running: Loop was started, so close waits for it.
	running bool
}

// rawHandler copies every received PDU to the peer's channel.
type rawHandler struct{ p *rawPeer }

func (h rawHandler) PDU(msg []byte) error {
	select {
	case h.p.rx <- append([]byte(nil), msg...):
	default:
	}
	return nil
}
func (h rawHandler) SendDone(int, iwarp.Status) {}
func (h rawHandler) Completed(_ uint64, wc *iwarp.WC) {
	w := *wc
	select {
	case h.p.reads <- &w:
	default:
	}
}
func (h rawHandler) Idle() error { return nil }

func newRawPeer(t testing.TB, dev *iwarp.Device) *rawPeer {
	c, err := iserconn.New(dev, iserconn.Config{RecvSlots: 64, RecvData: 8192, SendSlots: 64, SendData: 8192 + 1024,
		Extra: 1 << 20, ExtraAccess: mem.LocalWrite | mem.RemoteRead | mem.RemoteWrite})
	if err != nil {
		t.Fatal(err)
	}
	p := &rawPeer{t: t, c: c, rx: make(chan []byte, 256), reads: make(chan *iwarp.WC, 64), stop: make(chan bool), done: make(chan error, 1)}
	t.Cleanup(p.close)
	return p
}

// run starts polling completions.
func (p *rawPeer) run() {
	p.running = true
	go func() { p.done <- p.c.Loop(context.Background(), rawHandler{p}, p.stop, nil) }()
}

func (p *rawPeer) close() {
	p.once.Do(func() {
		close(p.stop)
		if p.running {
			<-p.done
		}
		p.c.Close()
	})
}

// connect dials a target and logs in as initiatorName, telling the target
// not to use Send with Invalidate.
func (p *rawPeer) connect(addr string) login.Result {
	p.dial(addr, false)
	return p.login()
}

// dial connects without logging in; sendInv says whether the target may
// invalidate this end's STags.
func (p *rawPeer) dial(addr string, sendInv bool) {
	var pd [iser.CMHeaderLen]byte
	iser.CMFields{SendInvNotSupported: !sendInv}.Encode(pd[:])
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := p.c.QP.Connect(ctx, "tcp", addr, iwarp.ConnConfig{PrivateData: pd[:]}); err != nil {
		p.t.Fatal(err)
	}
	p.run()
}

// login runs the login phase on a dialled connection.
func (p *rawPeer) login() login.Result { return p.loginWith(nil) }

// loginWith runs the login phase with an Offer that edit may change, and
// the key=value pairs extra added to the first Login Request.
func (p *rawPeer) loginWith(edit func(*login.Params), extra ...string) login.Result {
	offer := login.Defaults()
	offer.RDMAExtensions = true
	if edit != nil {
		edit(&offer)
	}
	li := login.NewInitiator(&login.InitiatorConfig{InitiatorName: initiatorName, TargetName: targetName,
		SessionType: "Normal", Offer: offer, ISID: 0x800000000001})
	out := li.Start(nil)
	if len(extra) > 0 {
		b := iscsi.BHS(out)
		data := append([]byte(nil), out[iscsi.BHSLen:iscsi.BHSLen+int(b.DataSegmentLength())]...)
		for _, kv := range extra {
			data = append(append(data, kv...), 0)
		}
		out = append(out[:0:0], out[:iscsi.BHSLen]...)
		iscsi.BHS(out).SetDataSegmentLength(uint32(len(data)))
		out = append(out, data...)
		out = append(out, make([]byte, iscsi.BHS(out).PDULen()-len(out))...)
	}
	for {
		p.sendRaw(iser.HeaderFields{}, out)
		resp := p.recv()
		var done bool
		var err error
		if out, done, err = li.Step(nil, resp[iser.HeaderLen:]); err != nil {
			p.t.Fatal(err)
		}
		if done {
			return li.Result()
		}
	}
}

// sendRaw sends an iSER header and the octets pdu as they are.
func (p *rawPeer) sendRaw(h iser.HeaderFields, pdu []byte) {
	p.t.Helper()
	p.slot = (p.slot + 1) % p.c.SendSlots()
	buf := p.c.SendBuf(p.slot)
	h.Encode(buf)
	n := copy(buf[iser.HeaderLen:], pdu)
	if err := p.c.PostPDU(p.slot, iser.HeaderLen+n, 0); err != nil {
		p.t.Fatal(err)
	}
}

// recv returns the next received message (iSER header included).
func (p *rawPeer) recv() []byte {
	p.t.Helper()
	select {
	case m := <-p.rx:
		return m
	case err := <-p.done:
		p.done <- err
		p.t.Fatalf("connection ended waiting for a PDU: %v", err)
	case <-time.After(5 * time.Second):
		p.t.Fatal("no PDU from the peer within 5 s")
	}
	return nil
}

// ended waits for the connection to end and returns why.
func (p *rawPeer) ended(d time.Duration) error {
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(d):
		return errors.New("still connected")
	}
}

// pdu builds a BHS of opcode op with fill and a data segment.
func pdu(op iscsi.Opcode, fill func(b iscsi.BHS), data []byte) []byte {
	buf := make([]byte, iscsi.BHSLen+len(data)+3)
	b, _ := iscsi.Init(buf, op)
	b.SetFinal(true)
	if fill != nil {
		fill(b)
	}
	b.SetDataSegmentLength(uint32(len(data)))
	copy(buf[iscsi.BHSLen:], data)
	return buf[:b.PDULen()]
}

func scsiCmd(itt, cmdSN uint32, cdb []byte, edtl uint32, read, write bool) []byte {
	return pdu(iscsi.OpSCSICommand, func(b iscsi.BHS) {
		c, _ := iscsi.AsSCSICommand(b)
		c.SetITT(itt)
		c.SetCmdSN(cmdSN)
		c.SetCDB(cdb)
		c.SetExpectedDataTransferLength(edtl)
		c.SetRead(read)
		c.SetWrite(write)
		c.SetAttr(1)
	}, nil)
}

// expect reads PDUs until one of opcode op arrives and returns its BHS.
func (p *rawPeer) expect(op iscsi.Opcode) iscsi.BHS {
	p.t.Helper()
	for i := 0; i < 16; i++ {
		m := p.recv()
		_, body, err := iser.ParseHeader(m)
		if err != nil {
			p.t.Fatal(err)
		}
		b, err := iscsi.Parse(body)
		if err != nil {
			p.t.Fatal(err)
		}
		if b.Opcode() == op {
			return b
		}
		if b.Opcode() != iscsi.OpNOPIn {
			p.t.Fatalf("got %v, want %v", b.Opcode(), op)
		}
	}
	p.t.Fatalf("no %v", op)
	return nil
}

func (p *rawPeer) String() string { return fmt.Sprintf("rawPeer(%v)", p.c.QP.State()) }
