package ddp

import "testing"

func BenchmarkParseUntagged(b *testing.B) {
	seg := rfc5044Send()
	b.SetBytes(int64(len(seg)))
	b.ReportAllocs()
	for b.Loop() {
		sinkHdr, sinkData, sinkErr = Parse(seg)
	}
}

func BenchmarkParseTagged(b *testing.B) {
	seg := make([]byte, 1500)
	if _, err := (TaggedFields{STag: 7, TO: 4096}).Encode(seg); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(seg)))
	b.ReportAllocs()
	for b.Loop() {
		h, p, err := Parse(seg)
		if err != nil || len(p) != 1486 {
			b.Fatal(err)
		}
		sinkN = int(h.STag()) + int(h.TO())
	}
}

func BenchmarkEncodeTagged(b *testing.B) {
	var buf [TaggedHeaderLen]byte
	b.SetBytes(TaggedHeaderLen)
	b.ReportAllocs()
	for b.Loop() {
		sinkN, sinkErr = TaggedFields{Last: true, RsvdULP: 0x40, STag: 0x1234, TO: 1 << 40}.Encode(buf[:])
	}
}

func BenchmarkEncodeUntagged(b *testing.B) {
	var buf [UntaggedHeaderLen]byte
	b.SetBytes(UntaggedHeaderLen)
	b.ReportAllocs()
	for b.Loop() {
		sinkN, sinkErr = UntaggedFields{Last: true, RsvdULP: 0x43, MSN: 1}.Encode(buf[:])
	}
}

// BenchmarkSegment cuts a 1 MiB RDMA Write into segments for a typical
// MULPDU and stamps each one's header, as the engine's transmit path does.
func BenchmarkSegment(b *testing.B) {
	const msgLen = 1 << 20
	var buf [TaggedHeaderLen]byte
	h := Header(buf[:])
	if _, err := (TaggedFields{STag: 1, TO: 0}).Encode(buf[:]); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(msgLen)
	b.ReportAllocs()
	for b.Loop() {
		s, err := NewSegmenter(msgLen, 1448-6, TaggedHeaderLen)
		if err != nil {
			b.Fatal(err)
		}
		for seg, ok := s.Next(); ok; seg, ok = s.Next() {
			h.SetLast(seg.Last)
			h.SetTO(uint64(seg.Offset))
		}
	}
}

func BenchmarkValidateTagged(b *testing.B) {
	seg := make([]byte, 1500)
	if _, err := (TaggedFields{STag: 7, TO: 4096}).Encode(seg); err != nil {
		b.Fatal(err)
	}
	tb := TaggedBuffer{Valid: true, Associated: true, Base: 0, Len: 1 << 30}
	b.SetBytes(int64(len(seg)))
	b.ReportAllocs()
	for b.Loop() {
		h, p, err := Parse(seg)
		if err == nil {
			err = ValidateTagged(h, uint32(len(p)), tb)
		}
		sinkErr = err
	}
}

func BenchmarkValidateUntagged(b *testing.B) {
	seg := rfc5044Send()
	q := UntaggedQueue{Valid: true, Posted: true, FirstMSN: 1, LastMSN: 64, BufLen: 4096}
	b.SetBytes(int64(len(seg)))
	b.ReportAllocs()
	for b.Loop() {
		h, p, err := Parse(seg)
		if err == nil {
			err = ValidateUntagged(h, uint32(len(p)), q)
		}
		sinkErr = err
	}
}
