package transport_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/blockdev"
	"github.com/ddpstore/ddpstore/iwarp/mem"
	"github.com/ddpstore/ddpstore/transport/initiator"
)

// remoteStore is a memory store without a Mapping, as a store in a cluster
// (RBD) is, whose every read and write takes a while and whose reads of
// block gateLBA wait until gate is closed.
type remoteStore struct {
	*blockdev.Memory
	delay   time.Duration
	gateLBA int64
	gate    chan struct{}
	// gated, when not nil, hears of each read that reaches the gate.
	gated chan struct{}
}

func (s *remoteStore) Mapping() *mem.Mapping { return nil }

func (s *remoteStore) ReadAt(p []byte, off int64) error {
	if s.gate != nil && off == s.gateLBA*512 {
		if s.gated != nil {
			s.gated <- struct{}{}
		}
		<-s.gate
	}
	time.Sleep(s.delay)
	return s.Memory.ReadAt(p, off)
}

func (s *remoteStore) WriteAt(p []byte, off int64) error {
	time.Sleep(s.delay)
	return s.Memory.WriteAt(p, off)
}

// TestRemoteStore: a LU whose store is not in memory serves verified I/O
// over iSER and iSCSI/TCP, several commands at once, reads landing in the
// connection's staging and RDMA-Written from there; and a command waiting
// on the store does not hold up the commands behind it on its connection.
func TestRemoteStore(t *testing.T) {
	checkGoroutines(t)
	mem, err := blockdev.NewMemory(16 << 20)
	if err != nil {
		t.Fatal(err)
	}
	st := &remoteStore{Memory: mem, delay: 200 * time.Microsecond, gateLBA: 1 << 14, gate: make(chan struct{})}
	r := newRig(t, rigOpts{stores: []blockdev.Store{st}, tcp: true})
	sessions := map[string]*initiator.Session{
		"iser":      r.dial(t, initiator.Config{TargetName: targetName}),
		"iscsi-tcp": r.dialTCP(t, initiator.Config{TargetName: targetName}),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for name, s := range sessions {
		t.Run(name, func(t *testing.T) {
			// The held read goes first; the others must finish meanwhile.
			held, err := s.Alloc(4096)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Free(held)
			heldDone := make(chan error, 1)
			go func() {
				heldDone <- s.Do(ctx, &initiator.Command{CDB: read16(uint64(st.gateLBA), 8), Dir: initiator.DataIn, Data: held})
			}()
			time.Sleep(20 * time.Millisecond)

			var once sync.Once
			release := func() { once.Do(func() { st.gate <- struct{}{} }) }
			defer release() // never leave the target's reader held
			ioCtx, ioCancel := context.WithTimeout(ctx, 20*time.Second)
			defer ioCancel()
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- verifiedIO(ioCtx, s, int64(w), uint64(w)*1024, 1024)
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("while one read waited on the store: %v", err)
				}
			}
			select {
			case err := <-heldDone:
				t.Fatalf("the held read finished before its store answered: %v", err)
			default:
			}
			release()
			if err := <-heldDone; err != nil {
				t.Fatalf("held read: %v", err)
			}
			if want := mem.Mapping().Bytes()[st.gateLBA*512 : st.gateLBA*512+4096]; !bytes.Equal(held, want) {
				t.Fatal("the held read returned other data than the store holds")
			}
		})
	}
}

// verifiedIO writes random sizes up to 256 KiB in blocks [lba, lba+n) and
// reads each back.
func verifiedIO(ctx context.Context, s *initiator.Session, seed int64, lba, n uint64) error {
	rng := rand.New(rand.NewSource(seed))
	w, err := s.Alloc(256 << 10)
	if err != nil {
		return err
	}
	defer s.Free(w)
	rd, err := s.Alloc(256 << 10)
	if err != nil {
		return err
	}
	defer s.Free(rd)
	for i := range 20 {
		blocks := uint32(1 + rng.Intn(512))
		at := lba + uint64(rng.Int63n(int64(n-uint64(blocks)+1)))
		size := int(blocks) * 512
		rng.Read(w[:size])
		wc := &initiator.Command{CDB: write16(at, blocks), Dir: initiator.DataOut, Data: w[:size]}
		if err := s.Do(ctx, wc); err != nil || wc.Status != 0 {
			return fmt.Errorf("write %d: %v status %#x", i, err, wc.Status)
		}
		rc := &initiator.Command{CDB: read16(at, blocks), Dir: initiator.DataIn, Data: rd[:size]}
		if err := s.Do(ctx, rc); err != nil || rc.Status != 0 {
			return fmt.Errorf("read %d: %v status %#x", i, err, rc.Status)
		}
		if !bytes.Equal(rd[:size], w[:size]) {
			return fmt.Errorf("%d blocks at LBA %d: read back differs", blocks, at)
		}
	}
	return nil
}

// TestCommandOutstandingThroughLosses: a command outstanding each time the
// connection is lost is reissued after each of the first four losses and
// fails after the fifth, rather than going round for ever (a target that
// drops the connection on one command would otherwise hold it so).
func TestCommandOutstandingThroughLosses(t *testing.T) {
	checkGoroutines(t)
	mem, err := blockdev.NewMemory(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	st := &remoteStore{Memory: mem, gateLBA: 64, gate: make(chan struct{}), gated: make(chan struct{}, 8)}
	r := newRig(t, rigOpts{stores: []blockdev.Store{st}})
	px := newCutProxy(t, r.addr)
	defer close(st.gate) // every held read goes on, so the target can close
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := initiator.Dial(ctx, r.dev, "tcp", px.ln.Addr().String(), initiator.Config{InitiatorName: initiatorName,
		TargetName: targetName, RecoveryTimeout: 30 * time.Second, Log: quietLog(), Buffers: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	buf, _ := s.Alloc(4096)
	done := make(chan error, 1)
	go func() {
		done <- s.Do(ctx, &initiator.Command{CDB: read16(64, 8), Dir: initiator.DataIn, Data: buf})
	}()
	for i := 1; i <= 5; i++ {
		// Wait for the connection (and so the reissued read) to be up:
		// a ping answers then.
		deadline := time.Now().Add(10 * time.Second)
		for {
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			err := s.Nop(pctx, nil)
			pcancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("before loss %d: no connection: %v", i, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		// The read is outstanding on this connection once the target
		// holds it: a ping may be answered before the reissued read
		// reaches the target, and a connection lost before that is not
		// one the read was outstanding on.
		select {
		case <-st.gated:
		case err := <-done:
			t.Fatalf("the held read ended before loss %d: %v", i, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("before loss %d: the read did not reach the target", i)
		}
		px.cut()
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "connections lost while opcode 0x88 was outstanding") {
			t.Fatalf("after five losses: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the command outstanding through five losses is still waiting")
	}
}
