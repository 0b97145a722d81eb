package rdmap

import (
	"testing"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
)

var (
	sinkErr   error
	sinkHdr   ddp.Header
	sinkData  []byte
	sinkN     int
	sinkRR    ReadRequest
	sinkTerm  Terminate
	sinkError Error
	sinkCtl   Control
	sinkTF    ddp.TaggedFields
	sinkUF    ddp.UntaggedFields
	sinkU16   uint16
)

// TestZeroAllocs checks that parsing, encoding and validating allocate
// nothing, on the error paths as well.
func TestZeroAllocs(t *testing.T) {
	seg := rfc5044Send()
	badQueue := append(header(0x41, 0x43, 1), 0)
	rrSeg := readRequest(ReadRequestFields{SinkSTag: 1, Size: 4096, SrcSTag: 2, SrcTO: 0})
	rr := ReadRequest(rrSeg[ddp.UntaggedHeaderLen:])
	src := SourceBuffer{Valid: true, Associated: true, RemoteRead: true, Len: 1 << 20}
	termFields := NewTerminate(ErrBaseBounds, rrSeg[:ddp.UntaggedHeaderLen], 46, rr)
	var termBuf [MaxTerminateLen]byte
	n, err := termFields.Encode(termBuf[:])
	if err != nil {
		t.Fatal(err)
	}
	term := termBuf[:n]
	var buf [ReadRequestLen]byte
	var ddpErr error = ddp.ErrMSNRange // boxed once, as a returned error is

	tests := []struct {
		name string
		f    func()
	}{
		{"Parse", func() { sinkHdr, sinkData, sinkErr = Parse(seg) }},
		{"Parse bad queue", func() { sinkHdr, sinkData, sinkErr = Parse(badQueue) }},
		{"ParseControl", func() { sinkCtl, sinkErr = ParseControl(0x43) }},
		{"ParseControl bad version", func() { sinkCtl, sinkErr = ParseControl(0x03) }},
		{"TaggedFields", func() { sinkTF, sinkErr = TaggedFields(OpWrite, 1, 2) }},
		{"UntaggedFields", func() { sinkUF, sinkErr = UntaggedFields(OpSendInvalidate, 1, 2) }},
		{"UntaggedFields wrong model", func() { sinkUF, sinkErr = UntaggedFields(OpWrite, 1, 2) }},
		{"ParseReadRequest", func() { sinkRR, sinkErr = ParseReadRequest(rr) }},
		{"ReadRequest Encode", func() { sinkN, sinkErr = rr.Fields().Encode(buf[:]) }},
		{"ValidateReadRequest", func() { sinkErr = ValidateReadRequest(rr, src) }},
		{"ValidateReadRequest error", func() { sinkErr = ValidateReadRequest(rr, SourceBuffer{Valid: true}) }},
		{"ValidateInvalidate error", func() { sinkErr = ValidateInvalidate(InvalidateTarget{Valid: true}) }},
		{"NewTerminate Encode", func() { sinkN, sinkErr = termFields.Encode(termBuf[:]) }},
		{"ParseTerminate", func() {
			sinkTerm, sinkErr = ParseTerminate(term)
			sinkError = sinkTerm.Err()
			sinkHdr = sinkTerm.DDPHeader()
			sinkRR = sinkTerm.RDMAHeader()
			sinkU16 = sinkTerm.SegmentLength()
		}},
		{"ParseTerminate short", func() { sinkTerm, sinkErr = ParseTerminate(term[:40]) }},
		{"ErrorOf", func() { sinkError = ErrorOf(sinkErr) }},
		{"ErrorOf DDP", func() { sinkError = ErrorOf(ddpErr) }},
	}
	for _, tt := range tests {
		if n := testing.AllocsPerRun(100, tt.f); n != 0 {
			t.Errorf("%s: %v allocations per run, want 0", tt.name, n)
		}
	}
}
