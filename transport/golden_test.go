package transport_test

import (
	"context"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/iscsi"
	"github.com/ddpstore/ddpstore/transport/iser"
	"github.com/ddpstore/ddpstore/transport/login"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestGolden")

// golden compares got with testdata/golden/name.hex (a hex dump, 16
// octets a line), or writes it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".hex")
	var sb strings.Builder
	for i := 0; i < len(got); i += 16 {
		sb.WriteString(hex.EncodeToString(got[i:min(i+16, len(got))]))
		sb.WriteByte('\n')
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != sb.String() {
		t.Errorf("%s: the wire changed.\ngot:\n%s\nwant:\n%s", name, sb.String(), want)
	}
}

// TestGolden pins the exact octets of a session's first Login Request and
// of a SCSI command Send from our initiator, and of a SCSI Response from
// our target, so that the wire cannot drift unnoticed.
func TestGolden(t *testing.T) {
	checkGoroutines(t)
	t.Run("initiator", func(t *testing.T) {
		// A recording target: login answered by the login package, every
		// message kept.
		dev := iwarp.NewDevice(0)
		defer dev.Close()
		ln, err := dev.Listen("tcp", "127.0.0.1:0", iwarp.ConnConfig{})
		if err != nil {
			t.Fatal(err)
		}
		p := newRawPeer(t, dev)
		accepted := make(chan error, 1)
		go func() {
			req, err := ln.Accept(context.Background())
			if err == nil {
				var pd [iser.CMHeaderLen]byte
				err = req.Accept(p.c.QP, pd[:])
			}
			accepted <- err
		}()
		sessDone := make(chan *initiator.Session, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := initiator.Dial(ctx, dev, "tcp", ln.Addr().String(), initiator.Config{
				InitiatorName: initiatorName, TargetName: targetName, ISID: 0x80_1234_5678_9a,
				NopInterval: -1, Log: quietLog(), Buffers: 1 << 20})
			if err != nil {
				t.Error(err)
			}
			sessDone <- s
		}()
		if err := <-accepted; err != nil {
			t.Fatal(err)
		}
		p.run()
		lt := login.NewTarget(&login.TargetConfig{
			Lookup: func(string) *login.TargetPolicy { return &login.TargetPolicy{Name: targetName} },
			Offer:  login.Defaults(), NewTSIH: func() uint16 { return 7 }})
		first := true
		for {
			m := p.recv()
			if first {
				golden(t, "login-request", m)
				first = false
			}
			out, done, err := lt.Step(nil, m[iser.HeaderLen:])
			if err != nil {
				t.Fatal(err)
			}
			p.sendRaw(iser.HeaderFields{}, out)
			if done {
				break
			}
		}
		s := <-sessDone
		if s == nil {
			t.FailNow()
		}
		defer func() { s.Close(); ln.Close() }()
		buf, _ := s.Alloc(512)
		for i := range buf {
			buf[i] = byte(i)
		}
		res := make(chan error, 1)
		go func() {
			res <- s.Do(context.Background(), &initiator.Command{CDB: write16(8, 1), Dir: initiator.DataOut, Data: buf})
		}()
		m := p.recv()
		golden(t, "scsi-command-send", m)
		// Answer GOOD so the command completes.
		cmd, _ := iscsi.Parse(m[iser.HeaderLen:])
		p.sendRaw(iser.HeaderFields{}, pdu(iscsi.OpSCSIResponse, func(b iscsi.BHS) {
			b.SetITT(cmd.ITT())
			b.SetWord(24, lt.Result().StatSN)
			b.SetWord(28, cmd.Word(24)+1)
			b.SetWord(32, cmd.Word(24)+64)
		}, nil))
		if err := <-res; err != nil {
			t.Fatal(err)
		}
		// Logout is answered by nobody: let Close give up quickly.
		p.close()
	})
	t.Run("target", func(t *testing.T) {
		r := newRig(t, rigOpts{sizes: []int64{1 << 20}})
		p := newRawPeer(t, r.dev)
		res := p.connect(r.addr)
		// READ(16) past the end of the LU: CHECK CONDITION with sense.
		p.sendRaw(iser.HeaderFields{ReadValid: true, ReadSTag: 0x01020304, ReadBaseOffset: 0x1000},
			scsiCmd(0x2a, res.CmdSN, read16(2047, 2), 1024, true, false))
		m := p.recv()
		golden(t, "scsi-response", m)
	})
}
