package ddp

import "testing"

var (
	sinkErr  error
	sinkHdr  Header
	sinkN    int
	sinkSeg  Segment
	sinkData []byte
)

// TestZeroAllocs checks the data-path promise of docs/design.md: parsing,
// encoding, segmenting and validating allocate nothing, on the error paths
// as well (an Error is a comparable value returned as a static constant).
func TestZeroAllocs(t *testing.T) {
	seg := rfc5044Send()
	tagged := make([]byte, TaggedHeaderLen+64)
	if _, err := (TaggedFields{STag: 7, TO: 4096}).Encode(tagged); err != nil {
		t.Fatal(err)
	}
	bad := []byte{0x80}
	var buf [UntaggedHeaderLen]byte
	th := Header(tagged[:TaggedHeaderLen])
	uh := Header(seg[:UntaggedHeaderLen])
	tb := TaggedBuffer{Valid: true, Associated: true, Base: 4096, Len: 64}
	uq := UntaggedQueue{Valid: true, Posted: true, FirstMSN: 1, LastMSN: 1, BufLen: 24}

	tests := []struct {
		name string
		f    func()
	}{
		{"Parse untagged", func() { sinkHdr, sinkData, sinkErr = Parse(seg) }},
		{"Parse tagged", func() { sinkHdr, sinkData, sinkErr = Parse(tagged) }},
		{"Parse bad version", func() { sinkHdr, sinkData, sinkErr = Parse(bad) }},
		{"Parse short", func() { sinkHdr, sinkData, sinkErr = Parse(tagged[:3]) }},
		{"Encode tagged", func() { sinkN, sinkErr = TaggedFields{Last: true, STag: 1, TO: 2}.Encode(buf[:]) }},
		{"Encode untagged", func() { sinkN, sinkErr = UntaggedFields{Last: true, MSN: 1}.Encode(buf[:]) }},
		{"Encode short", func() { sinkN, sinkErr = UntaggedFields{}.Encode(buf[:3]) }},
		{"setters", func() { th.SetLast(true); th.SetTO(4096); uh.SetMO(0) }},
		{"ValidateTagged ok", func() { sinkErr = ValidateTagged(th, 64, tb) }},
		{"ValidateTagged bounds", func() { sinkErr = ValidateTagged(th, 65, tb) }},
		{"ValidateTagged invalid", func() { sinkErr = ValidateTagged(th, 1, TaggedBuffer{}) }},
		{"ValidateTagged wrap", func() {
			sinkErr = ValidateTagged(th, 1<<31, TaggedBuffer{Valid: true, Associated: true, Base: 4096, Len: 1<<64 - 4096})
		}},
		{"ValidateUntagged ok", func() { sinkErr = ValidateUntagged(uh, 24, uq) }},
		{"ValidateUntagged too long", func() { sinkErr = ValidateUntagged(uh, 25, uq) }},
		{"ValidateUntagged range", func() {
			sinkErr = ValidateUntagged(uh, 1, UntaggedQueue{Valid: true, Posted: true, FirstMSN: 2, LastMSN: 3})
		}},
		{"CheckVersion", func() { sinkErr = CheckVersion(0x42) }},
		{"Segmenter", func() {
			s, _ := NewSegmenter(1<<20, 1500, TaggedHeaderLen)
			for seg, ok := s.Next(); ok; seg, ok = s.Next() {
				sinkSeg = seg
			}
		}},
	}
	for _, tt := range tests {
		if n := testing.AllocsPerRun(100, tt.f); n != 0 {
			t.Errorf("%s: %v allocations per run, want 0", tt.name, n)
		}
	}
}
