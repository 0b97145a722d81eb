package ublk

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// The layouts of include/uapi/linux/ublk_cmd.h, field by field.
func TestCtrlCmdLayout(t *testing.T) {
	b := CtrlCmd{DevID: 7, QueueID: 0xffff, Len: 64, Addr: 0x1122334455667788, Data: [2]uint64{42, 43}}.Encode(make([]byte, CtrlCmdLen))
	want := make([]byte, 32)
	ne := binary.NativeEndian
	ne.PutUint32(want[0:], 7)
	ne.PutUint16(want[4:], 0xffff)
	ne.PutUint16(want[6:], 64)
	ne.PutUint64(want[8:], 0x1122334455667788)
	ne.PutUint64(want[16:], 42)
	ne.PutUint64(want[24:], 43)
	if !bytes.Equal(b, want) {
		t.Fatalf("% x\nwant % x", b, want)
	}
}

func TestDevInfoRoundTrip(t *testing.T) {
	in := DevInfo{NrHWQueues: 1, QueueDepth: 128, State: 1, MaxIOBufBytes: 512 << 10, DevID: 3, SrvPID: 4242, Flags: FlagURingCmdCompInTask}
	b := in.Encode(make([]byte, DevInfoLen))
	if got := binary.NativeEndian.Uint32(b[8:]); got != 512<<10 {
		t.Fatalf("max_io_buf_bytes at offset 8: %d", got)
	}
	if got := binary.NativeEndian.Uint64(b[24:]); got != FlagURingCmdCompInTask {
		t.Fatalf("flags at offset 24: %#x", got)
	}
	out, err := ParseDevInfo(b)
	if err != nil || out != in {
		t.Fatalf("%+v, %v", out, err)
	}
	if _, err := ParseDevInfo(b[:63]); err == nil {
		t.Fatal("a short device information parsed")
	}
}

func TestParamsLayout(t *testing.T) {
	p := Params{Types: ParamTypeBasic | ParamTypeDiscard, Attrs: AttrVolatileCache, LogicalBSShift: 12, PhysicalBSShift: 12, IOMinShift: 12,
		MaxSectors: 1024, DevSectors: 1 << 20, DiscardGranularity: 4096, MaxDiscardSectors: 1 << 21, MaxWriteZeroesSectors: 1 << 20, MaxDiscardSegments: 1}
	b := p.Encode(make([]byte, ParamsLen))
	ne := binary.NativeEndian
	for _, f := range []struct {
		name string
		off  int
		got  uint64
		want uint64
	}{
		{"len", 0, uint64(ne.Uint32(b[0:])), ParamsLen},
		{"types", 4, uint64(ne.Uint32(b[4:])), 3},
		{"basic.attrs", 8, uint64(ne.Uint32(b[8:])), AttrVolatileCache},
		{"basic.logical_bs_shift", 12, uint64(b[12]), 12},
		{"basic.io_min_shift", 15, uint64(b[15]), 12},
		{"basic.max_sectors", 16, uint64(ne.Uint32(b[16:])), 1024},
		{"basic.dev_sectors", 24, ne.Uint64(b[24:]), 1 << 20},
		{"discard.discard_granularity", 44, uint64(ne.Uint32(b[44:])), 4096},
		{"discard.max_discard_sectors", 48, uint64(ne.Uint32(b[48:])), 1 << 21},
		{"discard.max_write_zeroes_sectors", 52, uint64(ne.Uint32(b[52:])), 1 << 20},
		{"discard.max_discard_segments", 56, uint64(ne.Uint16(b[56:])), 1},
	} {
		if f.got != f.want {
			t.Errorf("%s at %d: %d, want %d", f.name, f.off, f.got, f.want)
		}
	}
	back, err := ParseParams(b)
	if err != nil || back != p {
		t.Fatalf("ParseParams: %+v, %v\nwant %+v", back, err, p)
	}
	if _, err := ParseParams(b[:63]); err == nil {
		t.Fatal("short parameters parsed")
	}
}

func TestIOCmdAndDesc(t *testing.T) {
	b := IOCmd{QueueID: 0, Tag: 5, Result: -5, Addr: 0xdead000}.Encode(make([]byte, IOCmdLen))
	ne := binary.NativeEndian
	if ne.Uint16(b[2:]) != 5 || int32(ne.Uint32(b[4:])) != -5 || ne.Uint64(b[8:]) != 0xdead000 {
		t.Fatalf("% x", b)
	}
	d := make([]byte, descLen)
	ne.PutUint32(d[0:], OpWriteZeroes|IOFlagNoUnmap)
	ne.PutUint32(d[4:], 16)
	ne.PutUint64(d[8:], 2048)
	desc, err := ParseIODesc(d)
	if err != nil || desc.Op() != OpWriteZeroes || desc.Flags() != IOFlagNoUnmap || desc.NrSectors != 16 || desc.StartSector != 2048 {
		t.Fatalf("%+v, %v", desc, err)
	}
	if OpName(desc.Op()) != "WRITE_ZEROES" || OpName(99) != "op 99" {
		t.Fatal("OpName")
	}
	if _, err := ParseIODesc(d[:23]); err == nil {
		t.Fatal("a short descriptor parsed")
	}
}
