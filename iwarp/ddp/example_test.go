package ddp_test

import (
	"fmt"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
)

// The tagged example of RFC 5041 section 5.2: a 2048-octet message with an
// initial TO of 16384 and a MULPDU of 1500.
func ExampleSegmenter() {
	var hdr [ddp.TaggedHeaderLen]byte
	const initialTO = 16384
	if _, err := (ddp.TaggedFields{STag: 0x1234, TO: initialTO}).Encode(hdr[:]); err != nil {
		panic(err)
	}
	h := ddp.Header(hdr[:])
	s, err := ddp.NewSegmenter(2048, 1500, ddp.TaggedHeaderLen)
	if err != nil {
		panic(err)
	}
	for seg, ok := s.Next(); ok; seg, ok = s.Next() {
		h.SetLast(seg.Last)
		h.SetTO(initialTO + uint64(seg.Offset))
		fmt.Printf("TO=%d payload=%d L=%v\n", h.TO(), seg.Len, h.Last())
	}
	// Output:
	// TO=16384 payload=1486 L=false
	// TO=17870 payload=562 L=true
}

// The DDP Segment of the annotated FPDU of RFC 5044 section 4.4.
func ExampleParse() {
	seg := []byte{
		0x41, 0x43, // DDP control: T 0, L 1, DV 1; RsvdULP[0:7] (RDMAP Send)
		0, 0, 0, 0, // RsvdULP[8:39]
		0, 0, 0, 0, // QN 0
		0, 0, 0, 1, // MSN 1
		0, 0, 0, 0, // MO 0
	}
	seg = append(seg, make([]byte, 24)...)
	h, payload, err := ddp.Parse(seg)
	if err != nil {
		panic(err)
	}
	err = ddp.ValidateUntagged(h, uint32(len(payload)), ddp.UntaggedQueue{Valid: true, Posted: true, FirstMSN: 2, LastMSN: 9, BufLen: 4096})
	fmt.Printf("T=%v L=%v QN=%d MSN=%d MO=%d payload=%d: %v\n", h.Tagged(), h.Last(), h.QN(), h.MSN(), h.MO(), len(payload), err)
	// Output:
	// T=false L=true QN=0 MSN=1 MO=0 payload=24: ddp: untagged buffer error: invalid MSN - MSN range is not valid
}
