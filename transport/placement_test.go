package transport_test

import (
	"encoding/binary"
	"sync"
	"testing"

	"github.com/ddpstore/ddpstore/transport/initiator"
)

// TestPlacedWritesBesideDrainingCommands: 1 MiB WRITEs, placed straight
// into the memory LU, run on one session beside WRITE SAME, UNMAP and
// COMPARE AND WRITE of blocks in the same range-lock stripes, each of
// which waits for the placements in flight on its blocks to end. Those
// commands come with all their data as immediate data; executed on the
// connection's loop they would wait for placements that only that loop
// can end (the target hung so in the vmlab's ublk test). Every command
// must complete, and the session must end cleanly.
func TestPlacedWritesBesideDrainingCommands(t *testing.T) {
	checkGoroutines(t)
	r := newRig(t, rigOpts{sizes: []int64{8 << 20}})
	s := r.dial(t, initiator.Config{TargetName: targetName})
	const rounds = 60
	var wg sync.WaitGroup
	run := func(f func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				if t.Failed() {
					return
				}
				f(i)
			}
		}()
	}
	for w := range 3 {
		buf, err := s.Alloc(1 << 20)
		if err != nil {
			t.Fatal(err)
		}
		// LBAs 0 and 131072 (64 MiB on) share the range lock's stripes;
		// the LU is 8 MiB, so all of these sit in stripes 0-7.
		run(func(int) {
			do(t, s, &initiator.Command{CDB: write16(uint64(w)*2048, 2048), Dir: initiator.DataOut, Data: buf})
		})
	}
	block, err := s.Alloc(1024)
	if err != nil {
		t.Fatal(err)
	}
	run(func(i int) {
		cdb := make([]byte, 16)
		cdb[0] = 0x93                                        // WRITE SAME(16)
		cdb[1] = byte(i%2) << 3                              // UNMAP every other time
		binary.BigEndian.PutUint64(cdb[2:], uint64(i%6)*512) // inside the WRITEs' blocks
		binary.BigEndian.PutUint32(cdb[10:], 8)
		do(t, s, &initiator.Command{CDB: cdb, Dir: initiator.DataOut, Data: block[:512]})
	})
	list, err := s.Alloc(512)
	if err != nil {
		t.Fatal(err)
	}
	run(func(i int) {
		param := make([]byte, 24)
		param[1], param[3] = 22, 16
		binary.BigEndian.PutUint64(param[8:], uint64(i%6)*512+64)
		binary.BigEndian.PutUint32(param[16:], 8)
		p := list[:24]
		copy(p, param)
		cdb := []byte{0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0} // UNMAP
		do(t, s, &initiator.Command{CDB: cdb, Dir: initiator.DataOut, Data: p})
	})
	wg.Wait()
	// COMPARE AND WRITE of one block against what is there: it reads,
	// compares and writes under the drained lock.
	cur, err := s.Alloc(1024)
	if err != nil {
		t.Fatal(err)
	}
	do(t, s, &initiator.Command{CDB: read16(4096, 1), Dir: initiator.DataIn, Data: cur[:512]})
	cdb := make([]byte, 16)
	cdb[0] = 0x89 // COMPARE AND WRITE
	binary.BigEndian.PutUint64(cdb[2:], 4096)
	cdb[13] = 1
	do(t, s, &initiator.Command{CDB: cdb, Dir: initiator.DataOut, Data: cur[:1024]})
}
