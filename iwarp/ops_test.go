package iwarp

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"
)

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*7) + seed
	}
}

func TestOperations(t *testing.T) {
	ini, resp := connect(t, ConnConfig{}, ConnConfig{})
	for _, n := range []int{0, 1, 4095, 4096, 65536 + 1, 1 << 20, 16 << 20} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			for _, dir := range []struct {
				name     string
				src, dst *end
			}{{"initiator->responder", ini, resp}, {"responder->initiator", resp, ini}} {
				src, dst := dir.src, dir.dst
				// Send
				fill(src.buf[:n], 1)
				if err := dst.qp.PostRecv(&RecvWR{ID: 7, SGL: []SGE{dst.sge(0, n+10)}}); err != nil {
					t.Fatal(err)
				}
				if err := src.qp.PostSend(&SendWR{ID: 1, Op: OpSend, SGL: []SGE{src.sge(0, n)}}); err != nil {
					t.Fatal(err)
				}
				src.expect(src.scq, 1, WCSend, StatusSuccess, uint32(n))
				dst.expect(dst.rcq, 7, WCRecv, StatusSuccess, uint32(n))
				if !bytes.Equal(dst.buf[:n], src.buf[:n]) {
					t.Fatalf("%s: Send of %d octets: data differs", dir.name, n)
				}
				// RDMA Write
				fill(src.buf[:n], 2)
				if err := src.qp.PostSend(&SendWR{ID: 2, Op: OpWrite, SGL: []SGE{src.sge(0, n)},
					RemoteSTag: dst.mr.STag(), RemoteTO: dst.mr.BaseTO() + 16}); err != nil {
					t.Fatal(err)
				}
				src.expect(src.scq, 2, WCWrite, StatusSuccess, uint32(n))
				// RDMA Read it back into another part of src's buffer.
				if err := src.qp.PostSend(&SendWR{ID: 3, Op: OpRead, SGL: []SGE{src.sge(testBuf/2, n)},
					RemoteSTag: dst.mr.STag(), RemoteTO: dst.mr.BaseTO() + 16}); err != nil {
					t.Fatal(err)
				}
				src.expect(src.scq, 3, WCRead, StatusSuccess, uint32(n))
				if !bytes.Equal(dst.buf[16:16+n], src.buf[:n]) {
					t.Fatalf("%s: RDMA Write of %d octets: data differs", dir.name, n)
				}
				if !bytes.Equal(src.buf[testBuf/2:testBuf/2+n], src.buf[:n]) {
					t.Fatalf("%s: RDMA Read of %d octets: data differs", dir.name, n)
				}
			}
		})
	}
}

// exchange runs a Send, an RDMA Write and an RDMA Read of n octets in both
// directions and checks every octet.
func exchange(t *testing.T, ini, resp *end, n int) {
	t.Helper()
	for _, dir := range [][2]*end{{ini, resp}, {resp, ini}} {
		src, dst := dir[0], dir[1]
		fill(src.buf[:n], byte(n))
		if err := dst.qp.PostRecv(&RecvWR{ID: 7, SGL: []SGE{dst.sge(0, n)}}); err != nil {
			t.Fatalf("%v (%v; peer: %v)", err, dst.qp.Err(), src.qp.Err())
		}
		if err := src.qp.PostSend(&SendWR{ID: 1, Op: OpSend, SGL: []SGE{src.sge(0, n)}}); err != nil {
			t.Fatal(err)
		}
		if err := src.qp.PostSend(&SendWR{ID: 2, Op: OpWrite, SGL: []SGE{src.sge(0, n)},
			RemoteSTag: dst.mr.STag(), RemoteTO: dst.mr.BaseTO() + 1<<20 + 3}); err != nil {
			t.Fatal(err)
		}
		if err := src.qp.PostSend(&SendWR{ID: 3, Op: OpRead, SGL: []SGE{src.sge(2<<20, n)},
			RemoteSTag: dst.mr.STag(), RemoteTO: dst.mr.BaseTO() + 1<<20 + 3}); err != nil {
			t.Fatal(err)
		}
		src.expect(src.scq, 1, WCSend, StatusSuccess, uint32(n))
		src.expect(src.scq, 2, WCWrite, StatusSuccess, uint32(n))
		src.expect(src.scq, 3, WCRead, StatusSuccess, uint32(n))
		dst.expect(dst.rcq, 7, WCRecv, StatusSuccess, uint32(n))
		if !bytes.Equal(dst.buf[:n], src.buf[:n]) || !bytes.Equal(dst.buf[1<<20+3:1<<20+3+n], src.buf[:n]) ||
			!bytes.Equal(src.buf[2<<20:2<<20+n], src.buf[:n]) {
			t.Fatalf("%d octets: data differs", n)
		}
	}
}

// Every combination of Markers per direction and CRC preference, over both
// MPA revisions, with a small EMSS so that messages span many FPDUs and
// Markers fall everywhere.
func TestMPAModes(t *testing.T) {
	for _, rev := range [][2]uint8{{1, 1}, {2, 2}, {1, 2}, {2, 1}} {
		for mode := range 16 {
			mi, mr, ci, cr := mode&1 != 0, mode&2 != 0, mode&4 != 0, mode&8 != 0
			name := fmt.Sprintf("rev%d-%d/markers-i%v-r%v/nocrc-i%v-r%v", rev[0], rev[1], mi, mr, ci, cr)
			t.Run(name, func(t *testing.T) {
				icfg := ConnConfig{EMSS: 1460}
				icfg.MPA.Revision, icfg.MPA.Markers, icfg.MPA.NoCRC = rev[0], mi, ci
				rcfg := ConnConfig{EMSS: 1448}
				rcfg.MPA.Revision, rcfg.MPA.Markers, rcfg.MPA.NoCRC = rev[1], mr, cr
				ini, resp := connect(t, icfg, rcfg)
				if got, want := ini.qp.conn.neg.CRC, !(ci && cr); got != want || resp.qp.conn.neg.CRC != want {
					t.Fatalf("CRC in use %v, want %v", got, want)
				}
				if ini.qp.conn.neg.TxMarkers != mr || resp.qp.conn.neg.TxMarkers != mi {
					t.Fatalf("Markers: initiator sends %v, responder sends %v", ini.qp.conn.neg.TxMarkers, resp.qp.conn.neg.TxMarkers)
				}
				for _, n := range []int{0, 1, 1442, 1443, 100000} {
					exchange(t, ini, resp, n)
				}
			})
		}
	}
}

// The data path allocates nothing per operation, on either side: posting,
// framing, writev, deframing, placement, completion; with Markers too, for
// messages that fill the sender's staging buffer several times over.
func TestDataPathAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool allocate on purpose; make test runs this without it")
	}
	for _, tc := range []struct {
		name    string
		markers bool
		n       int
	}{{"markers-off", false, 64 << 10}, {"markers-on", true, 1 << 20}} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg ConnConfig
			cfg.MPA.Markers = tc.markers
			ini, resp := connect(t, cfg, cfg)
			write := &SendWR{ID: 1, Op: OpWrite, SGL: []SGE{ini.sge(0, tc.n)}, RemoteSTag: resp.mr.STag(), RemoteTO: resp.mr.BaseTO()}
			read := &SendWR{ID: 2, Op: OpRead, SGL: []SGE{ini.sge(4<<20, tc.n)}, RemoteSTag: resp.mr.STag(), RemoteTO: resp.mr.BaseTO()}
			send := &SendWR{ID: 3, Op: OpSend, SGL: []SGE{ini.sge(0, 4096)}}
			recv := &RecvWR{ID: 4, SGL: []SGE{resp.sge(8<<20, 4096)}}
			round := func() {
				if err := resp.qp.PostRecv(recv); err != nil {
					t.Fatal(err)
				}
				for _, wr := range []*SendWR{write, read, send} {
					if err := ini.qp.PostSend(wr); err != nil {
						t.Fatal(err)
					}
				}
				for range 3 {
					if wc := ini.wait(ini.scq); wc.Status != StatusSuccess {
						t.Fatalf("%+v", wc)
					}
				}
				if wc := resp.wait(resp.rcq); wc.Status != StatusSuccess {
					t.Fatalf("%+v", wc)
				}
			}
			for range 50 { // warm up: EMSS growth, buffers, goroutine stacks
				round()
			}
			if a := testing.AllocsPerRun(200, round); a > 0 {
				t.Fatalf("%v allocations per Write+Read+Send round", a)
			}
		})
	}
}

// With Markers, messages larger than the sender's staging buffer go out a
// buffer at a time, wherever its end falls in an FPDU sequence; every octet
// arrives, at the EMSS of loopback and at an Ethernet one.
func TestMarkersLargeMessages(t *testing.T) {
	for _, emss := range []int{0, 1460} {
		for _, crc := range []bool{true, false} {
			t.Run(fmt.Sprintf("emss-%d/crc-%v", emss, crc), func(t *testing.T) {
				cfg := ConnConfig{EMSS: emss}
				cfg.MPA.Markers, cfg.MPA.NoCRC = true, !crc
				ini, resp := connect(t, cfg, cfg)
				for _, n := range []int{stageBytes - 1, stageBytes, stageBytes + 1, 3*stageBytes + 509, 1 << 20} {
					exchange(t, ini, resp, n)
				}
			})
		}
	}
}

// TestRepostOnCompletion: an application that posts a receive again as soon
// as it polls a receive completion, with its receive queue full, always
// finds room (the slot is free before the completion is visible).
func TestRepostOnCompletion(t *testing.T) {
	ini, resp := pair(t, 1<<20, ConnConfig{}, ConnConfig{})
	const depth, sends = 256, 4000
	for i := 0; i < depth; i++ {
		if err := resp.qp.PostRecv(&RecvWR{ID: uint64(i), SGL: []SGE{SGEOf(resp.mr, i*64, 64)}}); err != nil {
			t.Fatal(err)
		}
	}
	credits := make(chan struct{}, depth) // one per posted receive
	for i := 0; i < depth; i++ {
		credits <- struct{}{}
	}
	errc := make(chan error, 1)
	go func() {
		var swcs [64]WC
		for i := 0; i < sends; i++ {
			<-credits
			ini.scq.Poll(swcs[:]) // keep the send CQ from overrunning
			for {
				err := ini.qp.PostSend(&SendWR{ID: uint64(i), Op: OpSend, SGL: []SGE{SGEOf(ini.mr, 0, 8)}})
				if err == nil {
					break
				}
				if err != ErrQueueFull {
					errc <- err
					return
				}
				var wcs [64]WC
				ini.scq.Poll(wcs[:])
			}
		}
		errc <- nil
	}()
	var wcs [64]WC
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for got := 0; got < sends; {
		n := resp.rcq.Poll(wcs[:])
		if n == 0 {
			if err := resp.rcq.Wait(ctx, false); err != nil {
				t.Fatalf("after %d receives: %v", got, err)
			}
			continue
		}
		for _, wc := range wcs[:n] {
			if wc.Status != StatusSuccess {
				t.Fatalf("receive %d: %v", got, wc.Status)
			}
			if err := resp.qp.PostRecv(&RecvWR{ID: wc.WRID, SGL: []SGE{SGEOf(resp.mr, int(wc.WRID)*64, 64)}}); err != nil {
				t.Fatalf("repost after receive %d: %v", got, err)
			}
			credits <- struct{}{}
			got++
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestReadSpin runs every operation with both receivers polling between
// messages (ConnConfig.ReadSpin), then closes the QPs while they poll: a
// close ends the spin with the QP's error, as it ends a wait.
func TestReadSpin(t *testing.T) {
	cfg := ConnConfig{ReadSpin: 200 * time.Microsecond}
	ini, resp := connect(t, cfg, cfg)
	if ini.qp.conn.l.(*mpaLLP).s.spin != cfg.ReadSpin {
		t.Fatal("ReadSpin did not reach the socket")
	}
	for _, n := range []int{0, 1, 4096, 300 << 10} {
		exchange(t, ini, resp, n)
	}
	ini.qp.Close()
	waitDone(t, "initiator", ini.qp)
	waitDone(t, "responder", resp.qp)
}
