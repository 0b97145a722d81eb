package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ddpstore/ddpstore/config"
)

const statusUsage = `usage: ddptarget status [--json] [--config FILE | --socket PATH]

Asks the running ddptarget, over its control socket, what it serves: its
portals, its targets and their LUNs (size, backing store, I/O counts since
it started), and its sessions (initiator, peer address, transport, TSIH,
since when). The socket is control.socket of --config FILE (the embedded
default's without it: /run/ddpstore/ddptarget.sock, or under the user's
runtime directory for a user other than root), or --socket PATH.

  --json         print the answer as JSON, for scripts
  --config FILE  the daemon's configuration, to find its control socket
  --socket PATH  the control socket itself

Exit status: 0 answered, 1 no daemon answered, 2 bad flags.
`

func statusCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ddptarget status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, statusUsage) }
	asJSON := fs.Bool("json", false, "")
	path := fs.String("config", "", "")
	socket := fs.String("socket", "", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, statusUsage)
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ddptarget status: unexpected argument %q\n\n%s", fs.Arg(0), statusUsage)
		return exitUsage
	}
	if *socket != "" && *path != "" {
		fmt.Fprintf(stderr, "ddptarget status: give --config or --socket, not both\n")
		return exitUsage
	}
	if *socket == "" {
		cfg, err := load(*path)
		if err != nil {
			fmt.Fprintf(stderr, "ddptarget status: %v\n", err)
			return exitUsage
		}
		*socket, _ = controlPath(cfg)
	}
	raw, err := askStatus(*socket)
	if err != nil {
		fmt.Fprintf(stderr, "ddptarget status: %v\n", err)
		return exitFailed
	}
	if *asJSON {
		stdout.Write(raw)
		return exitOK
	}
	var st Status
	if err := json.Unmarshal(raw, &st); err != nil {
		fmt.Fprintf(stderr, "ddptarget status: the daemon's answer: %v\n", err)
		return exitFailed
	}
	printStatus(stdout, &st, time.Now())
	return exitOK
}

// askStatus sends "status" on the control socket and returns the JSON
// answer.
func askStatus(path string) ([]byte, error) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("no ddptarget answers on %s: %w", path, unwrapOp(err))
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "status\n"); err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(bufio.NewReader(c))
	if err != nil {
		return nil, fmt.Errorf("reading the answer on %s: %w", path, err)
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error != "" {
		return nil, fmt.Errorf("%s: %s", path, e.Error)
	}
	return raw, nil
}

// unwrapOp drops the net package's "dial unix PATH: " which repeats what
// the message says.
func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Err
	}
	return err
}

// printStatus writes st for people.
func printStatus(w io.Writer, st *Status, now time.Time) {
	fmt.Fprintf(w, "ddptarget pid %d, up %s, config %s\n", st.PID, age(now, st.Started), st.Config)
	if st.Metrics != "" {
		fmt.Fprintf(w, "metrics: http://%s/metrics\n", st.Metrics)
	}
	fmt.Fprintln(w, "\nPortals:")
	for _, p := range st.Portals {
		fmt.Fprintf(w, "  %s (%s)\n", p.Address, p.Transport)
	}
	fmt.Fprintln(w, "\nTargets:")
	for _, t := range st.Targets {
		fmt.Fprintf(w, "  %s", t.Name)
		if t.Alias != "" {
			fmt.Fprintf(w, " (%s)", t.Alias)
		}
		var notes []string
		if t.CHAP {
			notes = append(notes, "CHAP")
		}
		if len(t.Initiators) > 0 {
			notes = append(notes, "initiators "+strings.Join(t.Initiators, ", "))
		} else {
			notes = append(notes, "any initiator")
		}
		fmt.Fprintf(w, ": %s\n", strings.Join(notes, "; "))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "    LUN\tSIZE\tBACKING\tCOMMANDS\tREADS\tWRITES\tERRORS\tREAD\tWRITTEN")
		for _, l := range t.LUNs {
			backing := l.Backing
			if l.Path != "" {
				backing += " " + l.Path
			}
			if l.ReadOnly {
				backing += " (readonly)"
			}
			fmt.Fprintf(tw, "    %d\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", l.ID, config.Size(l.Size), backing,
				l.IO.Commands, l.IO.Reads, l.IO.Writes, l.IO.Errors, config.Size(l.IO.ReadBytes), config.Size(l.IO.WrittenBytes))
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\nSessions: %d\n", len(st.Sessions))
	if len(st.Sessions) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  INITIATOR\tTARGET\tKIND\tPEER\tTRANSPORT\tTSIH\tCMDS\tREAD\tWRITTEN\tSINCE")
	for _, s := range st.Sessions {
		in, tg := s.Initiator, s.Target
		if in == "" {
			in = "-"
		}
		if tg == "" {
			tg = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%#04x\t%d\t%d\t%d\t%s (%s ago)\n", in, tg, s.Kind, s.Peer, s.Transport, s.TSIH,
			s.Commands, s.ReadBytes, s.WrittenBytes, s.Since.Local().Format(time.DateTime), age(now, s.Since))
	}
	tw.Flush()
	for _, s := range st.Sessions {
		if p := s.Params; p != nil {
			fmt.Fprintf(w, "  %s: queue depth %d, MaxRecvDataSegmentLength %d, FirstBurstLength %d, MaxBurstLength %d, ImmediateData %s, InitialR2T %s, digests %s/%s\n",
				s.Peer, p.QueueDepth, p.MaxRecvDataSegmentLength, p.FirstBurstLength, p.MaxBurstLength,
				yesNo(p.ImmediateData), yesNo(p.InitialR2T), digest(p.HeaderDigest), digest(p.DataDigest))
		}
	}
}

// age is how long ago t was, to the second.
func age(now, t time.Time) time.Duration { return now.Sub(t).Truncate(time.Second) }

func yesNo(b bool) string {
	if b {
		return "Yes"
	}
	return "No"
}

func digest(crc bool) string {
	if crc {
		return "CRC32C"
	}
	return "None"
}
