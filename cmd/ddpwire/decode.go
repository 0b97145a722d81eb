package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	"github.com/ddpstore/ddpstore/iwarp/mpa"
)

// decode prints the MPA stream one end sent: its Startup frame if the stream
// opens with one, then every FPDU with its DDP and RDMAP headers. markers
// and crc describe Full Operation, which depends on both ends' frames, so
// they stay the caller's to say.
func decode(r io.Reader, w io.Writer, markers, crc bool) error {
	br := bufio.NewReaderSize(r, 64<<10)
	if head, _ := br.Peek(mpa.StartupKeyLen); bytes.HasPrefix(head, []byte("MPA ID R")) {
		hdr, err := br.Peek(mpa.StartupHeaderLen)
		if err != nil {
			return fmt.Errorf("startup frame: %w", err)
		}
		pd, err := mpa.ParseStartupHeader(hdr, mpa.AnyKind, mpa.MaxPrivateData)
		if err != nil {
			return err
		}
		frame := make([]byte, mpa.StartupHeaderLen+pd)
		if _, err := io.ReadFull(br, frame); err != nil {
			return fmt.Errorf("startup frame: %w", err)
		}
		f, err := mpa.ParseStartup(frame, mpa.AnyKind, mpa.MaxPrivateData)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, describeStartup(f))
	}
	d := mpa.NewDeframer(0, markers, crc)
	var ulpdu []byte
	var start uint32
	n := 0
	buf := make([]byte, 64<<10)
	for {
		k, rerr := br.Read(buf)
		for raw := buf[:k]; len(raw) > 0; {
			before := d.Pos()
			ev, data, used, err := d.Next(raw)
			raw = raw[used:]
			switch ev {
			case mpa.ULPDUStart:
				start, ulpdu = before, ulpdu[:0]
			case mpa.ULPDUData:
				ulpdu = append(ulpdu, data...)
			case mpa.FPDUEnd:
				n++
				status := "CRC ok"
				if !crc {
					status = "CRC not checked"
				}
				if err != nil {
					status = err.Error()
				}
				fmt.Fprintf(w, "FPDU %-4d @%#08x %5d octets, %s | %s\n", n, start, d.Pos()-start, status, describeULPDU(ulpdu))
			}
			if err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			if !d.AtBoundary() {
				return d.EndOfStream()
			}
			fmt.Fprintf(w, "%d FPDUs, %d octets\n", n, d.Pos())
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}
