package target_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/transport/initiator"
	"github.com/ddpstore/ddpstore/transport/login"
	"github.com/ddpstore/ddpstore/transport/lu"
	"github.com/ddpstore/ddpstore/transport/target"
	log "github.com/sirupsen/logrus"
)

const (
	noImmIQN  = "iqn.2026-11.io.ddpstore:no-immediate"
	yesImmIQN = "iqn.2026-11.io.ddpstore:immediate"
	hostIQN   = "iqn.2026-11.io.ddpstore:immediate-test-host"
)

// immRig is one server with two targets, one exported with
// NoImmediateData, on an iSER and an iSCSI/TCP listener.
type immRig struct {
	dev               *iwarp.Device
	srv               *target.Server
	iserAddr, tcpAddr string
	stores            map[string]*blockdev.Memory
	exports           []target.Export
}

func newImmRig(t *testing.T) *immRig {
	t.Helper()
	r := &immRig{dev: iwarp.NewDevice(0), stores: map[string]*blockdev.Memory{}}
	for _, name := range []string{noImmIQN, yesImmIQN} {
		st, err := blockdev.NewMemory(8 << 20)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		l, err := lu.New(1, st)
		if err != nil {
			t.Fatal(err)
		}
		tg, err := lu.NewTarget(name, map[uint16]*lu.LU{0: l})
		if err != nil {
			t.Fatal(err)
		}
		r.stores[name] = st
		r.exports = append(r.exports, target.Export{Target: tg, NoImmediateData: name == noImmIQN})
	}
	il, err := r.dev.Listen("tcp", "127.0.0.1:0", iwarp.ConnConfig{})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.iserAddr, r.tcpAddr = il.Addr().String(), tl.Addr().String()
	lg := log.New()
	lg.SetOutput(io.Discard)
	r.srv, err = target.NewServer(r.dev, target.Config{
		Exports: r.exports,
		Portals: []login.Portal{{Addr: r.iserAddr, TPGT: 1}},
		// A small FirstBurstLength, so some writes are larger than the
		// immediate data an initiator could send.
		FirstBurst: 8192,
		MaxBurst:   64 << 10,
		Log:        log.NewEntry(lg),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() { done <- r.srv.Serve(il) }()
	go func() { done <- r.srv.ServeTCP(tl) }()
	t.Cleanup(func() {
		r.srv.Close()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		}
		r.dev.Close()
	})
	return r
}

func (r *immRig) dial(t *testing.T, network, name string) *initiator.Session {
	t.Helper()
	addr := r.iserAddr
	if network == initiator.NetworkISCSITCP {
		addr = r.tcpAddr
	}
	lg := log.New()
	lg.SetOutput(io.Discard)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The initiator offers ImmediateData=Yes (its default).
	s, err := initiator.Dial(ctx, r.dev, network, addr, initiator.Config{InitiatorName: hostIQN, TargetName: name,
		Buffers: 4 << 20, Log: log.NewEntry(lg)})
	if err != nil {
		t.Fatalf("login to %s over %s: %v", name, network, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// targetSees is the ImmediateData the target's side of the session to
// name over transport ("iser" or "iscsi-tcp") negotiated. The target
// lists a session once it has sent the last Login Response, so it may
// show up a moment after the initiator's Dial returned.
func (r *immRig) targetSees(t *testing.T, transport, name string) bool {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, si := range r.srv.SessionList() {
			if si.Target == name && si.Kind == "Normal" && si.Transport == transport {
				return si.Params.ImmediateData
			}
		}
	}
	t.Fatalf("no %s session to %s in the target's list", transport, name)
	return false
}

func rw16(op byte, lba uint64, blocks uint32) []byte {
	cdb := make([]byte, 16)
	cdb[0] = op
	binary.BigEndian.PutUint64(cdb[2:], lba)
	binary.BigEndian.PutUint32(cdb[10:], blocks)
	return cdb
}

// writeAndRead writes sizes (octets, whole blocks) at successive LBAs,
// reads each back, and checks the store behind the target too.
func writeAndRead(t *testing.T, s *initiator.Session, st *blockdev.Memory, seed uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rng := rand.New(rand.NewPCG(seed, 17))
	lba := uint64(8)
	// One block, exactly FirstBurstLength, one octet-block past it (part
	// of it would be immediate data with Yes), and several bursts.
	for _, size := range []int{512, 8192, 12288, 256 << 10} {
		out, err := s.Alloc(size)
		if err != nil {
			t.Fatal(err)
		}
		in, err := s.Alloc(size)
		if err != nil {
			t.Fatal(err)
		}
		for i := range out {
			out[i] = byte(rng.Uint32())
		}
		blocks := uint32(size / blockdev.BlockSize)
		w := &initiator.Command{CDB: rw16(0x8a, lba, blocks), Dir: initiator.DataOut, Data: out}
		if err := s.Do(ctx, w); err != nil || w.Status != 0 {
			t.Fatalf("WRITE(16) of %d octets: %v, status %#x", size, err, w.Status)
		}
		rd := &initiator.Command{CDB: rw16(0x88, lba, blocks), Dir: initiator.DataIn, Data: in}
		if err := s.Do(ctx, rd); err != nil || rd.Status != 0 {
			t.Fatalf("READ(16) of %d octets: %v, status %#x", size, err, rd.Status)
		}
		if !bytes.Equal(in, out) {
			t.Fatalf("%d octets at LBA %d read back differently", size, lba)
		}
		off := int(lba) * blockdev.BlockSize
		if !bytes.Equal(st.Mapping().Bytes()[off:off+size], out) {
			t.Fatalf("%d octets at LBA %d: the store holds something else", size, lba)
		}
		s.Free(out)
		s.Free(in)
		lba += uint64(blocks)
	}
}

// TestNoImmediateData: a target exported with NoImmediateData offers
// ImmediateData=No, so a login that asks for Yes negotiates No (RFC 7143
// section 13.11: the AND of both offers) on both ends, over iSER and
// iSCSI/TCP, and every write's data then comes by RDMA Read or R2T and
// lands; the other target of the same server still negotiates Yes.
func TestNoImmediateData(t *testing.T) {
	r := newImmRig(t)
	for i, network := range []string{"tcp", initiator.NetworkISCSITCP} {
		transport := map[string]string{"tcp": "iser", initiator.NetworkISCSITCP: "iscsi-tcp"}[network]
		t.Run(network, func(t *testing.T) {
			for _, name := range []string{noImmIQN, yesImmIQN} {
				s := r.dial(t, network, name)
				want := name == yesImmIQN
				if got := s.Params().ImmediateData; got != want {
					t.Errorf("%s: the initiator negotiated ImmediateData=%v, want %v", name, got, want)
				}
				if got := r.targetSees(t, transport, name); got != want {
					t.Errorf("%s: the target negotiated ImmediateData=%v, want %v", name, got, want)
				}
				writeAndRead(t, s, r.stores[name], uint64(i))
				s.Close()
			}
		})
	}
}

// TestNoImmediateDataReload: a reload that changes a target's setting
// takes effect at the next login.
func TestNoImmediateDataReload(t *testing.T) {
	r := newImmRig(t)
	flipped := append([]target.Export(nil), r.exports...)
	for i := range flipped {
		flipped[i].NoImmediateData = !flipped[i].NoImmediateData
	}
	if err := r.srv.SetExports(flipped); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{noImmIQN, yesImmIQN} {
		s := r.dial(t, "tcp", name)
		if got, want := s.Params().ImmediateData, name == noImmIQN; got != want {
			t.Errorf("%s after the reload: ImmediateData=%v, want %v", name, got, want)
		}
		writeAndRead(t, s, r.stores[name], 9)
		s.Close()
	}
}
