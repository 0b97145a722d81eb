package sctp

import (
	"bytes"
	"errors"
	"testing"
)

// TestControlCodec checks Session Control messages against section 5.2.3.
func TestControlCodec(t *testing.T) {
	pd512 := bytes.Repeat([]byte{0xa5}, 512)
	tests := []struct {
		name string
		b    []byte
		err  error
		fn   Function
		pd   []byte
	}{
		{"Initiate without Private Data (zero length is allowed)", []byte{0, 0, 0, 1}, nil, FuncInitiate, []byte{}},
		{"Accept with Private Data", []byte{0, 0, 0, 2, 'o', 'k'}, nil, FuncAccept, []byte("ok")},
		{"Reject with 512 octets", append([]byte{0x12, 0x34, 0, 3}, pd512...), nil, FuncReject, pd512},
		{"Terminate", []byte{0, 7, 0, 4}, nil, FuncTerminate, []byte{}},
		{"Terminate with Private Data", []byte{0, 7, 0, 4, 1}, ErrTerminateData, 0, nil},
		{"513 octets of Private Data", append([]byte{0, 0, 0, 1}, append(pd512, 0)...), ErrPrivateDataTooLong, 0, nil},
		{"function 0", []byte{0, 0, 0, 0}, ErrUnknownFunction, 0, nil},
		{"function 5", []byte{0, 0, 0, 5}, ErrUnknownFunction, 0, nil},
		{"function 0x101 (high octet counts)", []byte{0, 0, 1, 1}, ErrUnknownFunction, 0, nil},
		{"3 octets", []byte{0, 0, 0}, ErrShortControl, 0, nil},
		{"empty", nil, ErrShortControl, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseControl(tt.b)
			if !errors.Is(err, tt.err) {
				t.Fatalf("ParseControl: %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			if c.Function() != tt.fn || !bytes.Equal(c.PrivateData(), tt.pd) {
				t.Fatalf("function %v pd %d octets, want %v %d", c.Function(), len(c.PrivateData()), tt.fn, len(tt.pd))
			}
			again, err := AppendControl(nil, c.SSN(), c.Function(), c.PrivateData())
			if err != nil || !bytes.Equal(again, tt.b) {
				t.Fatalf("AppendControl: %x, %v; want %x", again, err, tt.b)
			}
		})
	}
}

func TestAppendControlRefuses(t *testing.T) {
	tests := []struct {
		name string
		fn   Function
		pd   []byte
		err  error
	}{
		{"Terminate with Private Data", FuncTerminate, []byte{1}, ErrTerminateData},
		{"513 octets", FuncAccept, make([]byte, 513), ErrPrivateDataTooLong},
		{"function 0", 0, nil, ErrUnknownFunction},
		{"function 5", 5, nil, ErrUnknownFunction},
	}
	for _, tt := range tests {
		if _, err := AppendControl(nil, 0, tt.fn, tt.pd); !errors.Is(err, tt.err) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.err)
		}
	}
}

func TestSegmentChunk(t *testing.T) {
	tests := []struct {
		b   []byte
		ssn uint16
		seg []byte
		err error
	}{
		{[]byte{0xff, 0xfe, 0x41, 1, 2}, 0xfffe, []byte{0x41, 1, 2}, nil},
		{[]byte{0, 1}, 1, []byte{}, nil},
		{[]byte{0}, 0, nil, ErrShortChunk},
	}
	for _, tt := range tests {
		c, err := ParseSegmentChunk(tt.b)
		if err != tt.err {
			t.Fatalf("%x: %v, want %v", tt.b, err, tt.err)
		}
		if err == nil && (c.SSN() != tt.ssn || !bytes.Equal(c.Segment(), tt.seg)) {
			t.Fatalf("%x: SSN %d segment %x", tt.b, c.SSN(), c.Segment())
		}
	}
	var b [2]byte
	PutSSN(b[:], 0x1234)
	if b != [2]byte{0x12, 0x34} {
		t.Fatalf("PutSSN: %x", b)
	}
}

func TestMaxChunk(t *testing.T) {
	tests := []struct {
		name        string
		mtu, below  int
		chunk, mulp int
	}{
		// Ethernet, IPv4: 1500-20-12-16 = 1452 of user data, 16 left for a SACK.
		{"ethernet IPv4", 1500, IPv4HeaderLen, 1436, 1434},
		{"ethernet IPv6", 1500, IPv6HeaderLen, 1416, 1414},
		{"loopback IPv4", 65536, IPv4HeaderLen, 65472, 65470},
		// A tiny path still offers 516 (section 9), at the cost of fragmentation.
		{"576-octet path, UDP", 576, IPv4HeaderLen + UDPHeaderLen, 516, 514},
	}
	for _, tt := range tests {
		c := MaxChunk(UserDataForMTU(tt.mtu, tt.below))
		if c != tt.chunk || MULPDU(c) != tt.mulp {
			t.Errorf("%s: chunk %d MULPDU %d, want %d %d", tt.name, c, MULPDU(c), tt.chunk, tt.mulp)
		}
	}
}
