package rdmap

import (
	"testing"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
)

// BenchmarkParse is the receive path of every segment: DDP header, RDMAP
// Control Field, buffer model and queue.
func BenchmarkParse(b *testing.B) {
	seg := rfc5044Send()
	b.SetBytes(int64(len(seg)))
	b.ReportAllocs()
	for b.Loop() {
		sinkHdr, sinkData, sinkErr = Parse(seg)
	}
}

// BenchmarkUntaggedHeaderEncode builds the header of each Send from its
// opcode, MSN and Invalidate STag, as the transmit path does.
func BenchmarkUntaggedHeaderEncode(b *testing.B) {
	buf := make([]byte, ddp.UntaggedHeaderLen)
	ops := [...]Opcode{OpSend, OpSendInvalidate, OpSendSE, OpSendSEInvalidate}
	b.SetBytes(ddp.UntaggedHeaderLen)
	b.ReportAllocs()
	msn := uint32(0)
	for b.Loop() {
		msn++
		f, err := UntaggedFields(ops[msn%4], msn, 0x1234)
		if err != nil {
			b.Fatal(err)
		}
		f.Last = true
		sinkN, sinkErr = f.Encode(buf)
	}
	sinkData = buf
}

func BenchmarkReadRequestParse(b *testing.B) {
	seg := readRequest(ReadRequestFields{SinkSTag: 1, SinkTO: 2, Size: 4096, SrcSTag: 3, SrcTO: 4})
	src := SourceBuffer{Valid: true, Associated: true, RemoteRead: true, Len: 1 << 20}
	b.SetBytes(int64(len(seg)))
	b.ReportAllocs()
	for b.Loop() {
		_, p, err := Parse(seg)
		if err != nil {
			b.Fatal(err)
		}
		r, err := ParseReadRequest(p)
		if err == nil {
			err = ValidateReadRequest(r, src)
		}
		sinkErr = err
	}
}

func BenchmarkReadRequestEncode(b *testing.B) {
	var buf [ReadRequestLen]byte
	f := ReadRequestFields{SinkSTag: 1, SinkTO: 2, Size: 4096, SrcSTag: 3, SrcTO: 4}
	b.SetBytes(ReadRequestLen)
	b.ReportAllocs()
	for b.Loop() {
		sinkN, sinkErr = f.Encode(buf[:])
	}
}

func BenchmarkTerminateEncode(b *testing.B) {
	f := NewTerminate(ErrBaseBounds, rrHdr, 46, rrBody)
	var buf [MaxTerminateLen]byte
	b.SetBytes(MaxTerminateLen)
	b.ReportAllocs()
	for b.Loop() {
		sinkN, sinkErr = f.Encode(buf[:])
	}
}

func BenchmarkTerminateParse(b *testing.B) {
	var buf [MaxTerminateLen]byte
	n, err := NewTerminate(ErrBaseBounds, rrHdr, 46, rrBody).Encode(buf[:])
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		t, err := ParseTerminate(buf[:n])
		if err != nil {
			b.Fatal(err)
		}
		sinkError = t.Err()
		sinkHdr = t.DDPHeader()
		sinkRR = t.RDMAHeader()
	}
}
