package siw

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/iwarp"
	"github.com/ddpstore/ddpstore/iwarp/mem"
)

// guestAddr is the vmlab guest's own address, where siw listens.
const guestAddr = "10.0.2.15"

func inGuest(t *testing.T) {
	t.Helper()
	if os.Getenv("VMLAB_GUEST") != "1" {
		t.Skip("runs inside the vmlab guest (Linux siw); run it with shared/vmlab/run-vm.sh")
	}
	out, err := exec.Command("rdma", "link", "add", "siw0", "type", "siw", "netdev", "eth0").CombinedOutput()
	if err != nil && !bytes.Contains(out, []byte("exist")) {
		t.Logf("rdma link add: %v: %s", err, out)
	}
}

// rpingInfo is rping's buffer advertisement: address, STag, size, big-endian.
func rpingInfo(b []byte, mr *mem.MR, size int) {
	binary.BigEndian.PutUint64(b[0:8], mr.BaseTO())
	binary.BigEndian.PutUint32(b[8:12], uint32(mr.STag()))
	binary.BigEndian.PutUint32(b[12:16], uint32(size))
}

// TestRpingClientAgainstSiwServer runs rping's protocol as the client
// against `rping -s` on siw: for each ping the client advertises its source
// buffer, siw RDMA-Reads it and says go ahead, the client advertises its
// sink, siw RDMA-Writes the data back and says go ahead, and the client
// checks the sink holds what the source did.
func TestGuestRpingClientAgainstSiwServer(t *testing.T) {
	inGuest(t)
	const size, count, port = 4096, 5, "7174"
	srv := exec.Command("rping", "-s", "-a", guestAddr, "-p", port, "-C", fmt.Sprint(count), "-S", fmt.Sprint(size), "-v")
	var srvOut bytes.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		srv.Process.Kill()
		srv.Wait()
		t.Logf("rping -s said:\n%s", srvOut.String())
	}()

	dev := iwarp.NewDevice(0)
	defer dev.Close()
	pd := dev.AllocPD()
	scq, _ := dev.NewCQ(64)
	rcq, _ := dev.NewCQ(64)
	qp, err := dev.NewQP(iwarp.QPConfig{PD: pd, SendCQ: scq, RecvCQ: rcq})
	if err != nil {
		t.Fatal(err)
	}
	m, err := mem.Anonymous(4 * size)
	if err != nil {
		t.Fatal(err)
	}
	reg := func(off, n int, acc mem.Access) *mem.MR {
		mr, err := dev.Register(pd, m, off, n, acc)
		if err != nil {
			t.Fatal(err)
		}
		return mr
	}
	start := reg(0, size, mem.RemoteRead)
	sink := reg(size, size, mem.LocalWrite|mem.RemoteWrite)
	msgs := reg(2*size, 64, mem.LocalWrite) // [0:16] to send, [32:48] to receive

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var connErr error
	for range 50 { // rping -s needs a moment to listen
		if _, connErr = qp.Connect(ctx, "tcp", guestAddr+":"+port, iwarp.ConnConfig{}); connErr == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if connErr != nil {
		t.Fatalf("connect to rping -s: %v", connErr)
	}
	var wcs [1]iwarp.WC
	wait := func(cq *iwarp.CQ, what string) iwarp.WC {
		for {
			if cq.Poll(wcs[:]) == 1 {
				if wcs[0].Status != iwarp.StatusSuccess {
					t.Fatalf("%s: %+v (QP: %v)", what, wcs[0], qp.Err())
				}
				return wcs[0]
			}
			if err := cq.Wait(ctx, false); err != nil {
				t.Fatalf("%s: %v (QP: %v)", what, err, qp.Err())
			}
		}
	}
	send := func(mr *mem.MR, id uint64) {
		rpingInfo(msgs.Bytes()[:16], mr, size)
		if err := qp.PostSend(&iwarp.SendWR{ID: id, Op: iwarp.OpSend, SGL: []iwarp.SGE{iwarp.SGEOf(msgs, 0, 16)}}); err != nil {
			t.Fatal(err)
		}
		wait(scq, "send")
	}
	recv := func() {
		if err := qp.PostRecv(&iwarp.RecvWR{ID: 9, SGL: []iwarp.SGE{iwarp.SGEOf(msgs, 32, 16)}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range count {
		src := start.Bytes()
		for j := range src {
			src[j] = byte('A' + (i+j)%26)
		}
		// rping's server echoes strlen(data)+1 octets: the data is a C
		// string filling the buffer, as rping's own client makes it.
		src[size-1] = 0
		clear(sink.Bytes())
		recv()
		send(start, 1) // RDMA_READ_ADV
		wait(rcq, "go ahead after the RDMA Read")
		recv()
		send(sink, 2) // RDMA_WRITE_ADV
		wait(rcq, "go ahead after the RDMA Write")
		if !bytes.Equal(sink.Bytes(), src) {
			t.Fatalf("ping %d: the sink does not hold what the source did", i)
		}
	}
	qp.Disconnect()
	select {
	case <-qp.Done():
	case <-ctx.Done():
		t.Fatal("graceful disconnect did not finish")
	}
	if err := srv.Wait(); err != nil {
		t.Errorf("rping -s: %v", err)
	}
}
