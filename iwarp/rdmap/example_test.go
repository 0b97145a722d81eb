package rdmap_test

import (
	"fmt"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
	"github.com/ddpstore/ddpstore/iwarp/rdmap"
)

// A Send arrives for an MSN with no buffer posted: the Data Sink reports
// DDP's error in a Terminate Message carrying the offending DDP header.
func ExampleNewTerminate() {
	var seg [ddp.UntaggedHeaderLen + 24]byte
	f, _ := rdmap.UntaggedFields(rdmap.OpSend, 1, 0)
	f.Last = true
	if _, err := f.Encode(seg[:]); err != nil {
		panic(err)
	}
	h, payload, err := rdmap.Parse(seg[:])
	if err != nil {
		panic(err)
	}
	err = ddp.ValidateUntagged(h, uint32(len(payload)), ddp.UntaggedQueue{Valid: true})

	// The Terminate Message: an untagged header for QN 2, then the header.
	var msg [ddp.UntaggedHeaderLen + rdmap.MaxTerminateLen]byte
	tf, _ := rdmap.UntaggedFields(rdmap.OpTerminate, 1, 0)
	tf.Last = true
	n, _ := tf.Encode(msg[:])
	m, err := rdmap.NewTerminate(rdmap.ErrorOf(err), h, uint16(len(seg)), nil).Encode(msg[n:])
	if err != nil {
		panic(err)
	}
	fmt.Printf("% x\n", msg[:n+m])

	_, body, _ := rdmap.Parse(msg[:n+m])
	term, _ := rdmap.ParseTerminate(body)
	fmt.Println(term.Err(), term.SegmentLength(), term.DDPHeader().MSN())
	// Output:
	// 41 47 00 00 00 00 00 00 00 02 00 00 00 01 00 00 00 00 12 02 c0 00 00 2a 41 43 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00
	// rdmap: DDP untagged buffer error: invalid MSN - no buffer available 42 1
}
