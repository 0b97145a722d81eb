// Command ddpwire shows the iWARP wire protocols of ddpstore at work.
//
//	ddpwire demo [flags]            run an MPA/DDP/RDMAP exchange over loopback TCP, printing every frame
//	ddpwire decode [flags] FILE     decode one direction of a captured MPA stream
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

const usage = `ddpwire shows ddpstore's iWARP wire protocols (MPA, DDP, RDMAP) at work.

Usage:
  ddpwire demo [flags]         Connect an MPA Initiator and Responder over loopback
                               TCP, exchange a Send, an RDMA Write, an RDMA Read and
                               an RDMA Write to an unknown STag (answered with a
                               Terminate), and print every frame decoded. Exits 1
                               if any octet placed or read back is wrong.
  ddpwire decode [flags] FILE  Decode the octets one end of an MPA connection sent
                               (for example a TCP stream saved from a capture), from
                               its MPA Request or Reply if present, FPDU by FPDU.
                               FILE "-" reads standard input.

Run 'ddpwire COMMAND -h' for the flags of a command.
`

func main() {
	flag.Usage = func() { fmt.Fprint(os.Stderr, usage) }
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd, args := flag.Arg(0), flag.Args()[1:]; cmd {
	case "demo":
		err = demoCmd(ctx, args)
	case "decode":
		err = decodeCmd(args, os.Stdout)
	case "help":
		flag.Usage()
		return
	default:
		fmt.Fprintf(os.Stderr, "ddpwire: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ddpwire %s: %v\n", flag.Arg(0), err)
		os.Exit(1)
	}
}

func demoCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	rev := fs.Uint("rev", 2, "MPA revision to offer: 1 (RFC 5044) or 2 (RFC 6581)")
	markers := fs.Bool("markers", false, "both ends require Markers in the FPDUs they receive")
	noCRC := fs.Bool("no-crc", false, "both ends prefer no CRC (CRCs stay on if either wants them)")
	emss := fs.Int("emss", 0, "EMSS to size FPDUs for (0: the socket's TCP_MAXSEG)")
	size := fs.Int("size", 100000, "octets moved by the RDMA Write and read back by the RDMA Read (1 to 131072)")
	timeout := fs.Duration("timeout", 10*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rev != 1 && *rev != 2 {
		return fmt.Errorf("-rev %d: MPA revisions are 1 and 2", *rev)
	}
	if *size < 1 || *size > 128<<10 {
		return fmt.Errorf("-size %d: must be 1 to 131072 (the Responder's buffer)", *size)
	}
	if *emss < 0 || *emss > 65535 {
		return fmt.Errorf("-emss %d: must be 0 (from the socket) or a segment size up to 65535", *emss)
	}
	return runDemo(ctx, demoConfig{rev: uint8(*rev), markers: *markers, noCRC: *noCRC,
		emss: *emss, writeBytes: *size, timeout: *timeout}, os.Stdout)
}

func decodeCmd(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("decode", flag.ContinueOnError)
	markers := fs.Bool("markers", false, "the stream carries Markers (its receiver set M); read from the Startup frame when present")
	noCRC := fs.Bool("no-crc", false, "do not check CRCs (both ends cleared C)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("decode takes one FILE (or - for standard input)")
	}
	in := os.Stdin
	if name := fs.Arg(0); name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	return decode(in, w, *markers, !*noCRC)
}
