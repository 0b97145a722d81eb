package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
	"github.com/ddpstore/ddpstore/iwarp/mpa"
	"github.com/ddpstore/ddpstore/iwarp/rdmap"
)

func TestDemo(t *testing.T) {
	tests := []struct {
		name string
		cfg  demoConfig
		want []string
	}{
		{"rev2 CRC", demoConfig{rev: 2, writeBytes: 100000},
			[]string{"MPA Request: Rev 2 M=0 C=1", "IRD 4 ORD 4", "RDMA Read Request: 100000 octets", "Terminate: rdmap: DDP tagged buffer error: invalid STag"}},
		{"rev1 Markers small EMSS", demoConfig{rev: 1, markers: true, emss: 1460, writeBytes: 3000},
			[]string{"MPA Reply: Rev 1 M=1 C=1", "MULPDU 1442, Markers out true in true", "RDMA Read Response, 144 octets"}},
		{"no CRC", demoConfig{rev: 2, noCRC: true, writeBytes: 1}, []string{"C=0", "no CRC"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.timeout = 20 * time.Second
			var out bytes.Buffer
			if err := runDemo(context.Background(), tc.cfg, &out); err != nil {
				t.Fatalf("demo failed: %v\n%s", err, out.String())
			}
			for _, w := range append(tc.want, "invalid STag answered with Terminate: true", "placed: true") {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestDecode(t *testing.T) {
	cfg := mpa.StartupConfig{Markers: true}
	req := cfg.Request([]byte("pd"))
	stream, err := req.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	f := mpa.NewFramer(0, true, true)
	var hdr [ddp.UntaggedHeaderLen]byte
	uf, _ := rdmap.UntaggedFields(rdmap.OpSend, 1, 0)
	uf.Last = true
	uf.Encode(hdr[:])
	iov, _ := f.AppendFPDU(nil, hdr[:], []byte("decoded payload"))
	for _, v := range iov {
		stream = append(stream, v...)
	}
	var out bytes.Buffer
	if err := decode(bytes.NewReader(stream), &out, true, true); err != nil {
		t.Fatalf("decode: %v\n%s", err, out.String())
	}
	for _, w := range []string{"MPA Request: Rev 2 M=1", `RDMAP v1 Send, 15 octets "decoded payload"`, "CRC ok", "1 FPDUs"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
	// A corrupted CRC and a stream cut inside an FPDU are both reported.
	bad := bytes.Clone(stream)
	bad[len(bad)-1] ^= 1
	if err := decode(bytes.NewReader(bad), &out, true, true); err == nil || mpa.CodeOf(err) != mpa.CodeCRC {
		t.Errorf("corrupt CRC: got %v", err)
	}
	if err := decode(bytes.NewReader(stream[:len(stream)-3]), &out, true, true); mpa.CodeOf(err) != mpa.CodeLLPLost || !strings.Contains(err.Error(), "inside the FPDU") {
		t.Errorf("truncated stream: got %v", err)
	}
}
