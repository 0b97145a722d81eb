package siw

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The host side of the captures: every NAME.pcap the guest tests wrote is
// decoded by tshark's MPA/DDP/RDMAP dissectors and checked against its
// NAME.json (captureMeta).

// TestSiwCaptures decodes the captures of an earlier run kept in
// $SIW_PCAP_DIR (see TestSiwInterop), without booting the guest.
func TestSiwCaptures(t *testing.T) {
	dir := os.Getenv("SIW_PCAP_DIR")
	if dir == "" {
		t.Skip("set SIW_PCAP_DIR to a directory of captures (TestSiwInterop keeps them there too)")
	}
	checkCaptures(t, dir)
}

// tshark finds tshark, installing it with apt-get when it is missing and
// this is root; it skips t when neither works.
func tshark(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("tshark"); err == nil {
		return p
	}
	if os.Geteuid() != 0 {
		t.Skip("tshark is missing and installing it needs root: the captures are not decoded")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "apt-get", "install", "-y", "-q", "tshark")
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	if p, lerr := exec.LookPath("tshark"); lerr == nil {
		return p
	}
	t.Skipf("tshark is missing and apt-get install tshark failed (%v): the captures are not decoded\n%s", err, lastLines(string(out), 5))
	return ""
}

// checkCaptures checks every capture in dir (or dir/pcap).
func checkCaptures(t *testing.T, dir string) {
	if _, err := os.Stat(filepath.Join(dir, pcapDir)); err == nil {
		dir = filepath.Join(dir, pcapDir)
	}
	metas, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(metas) == 0 {
		t.Errorf("no captures in %s", dir)
		return
	}
	ts := tshark(t)
	decodeAs := decodeArgs(t, ts, metas[0])
	var good atomic.Int64
	t.Run("pcap", func(t *testing.T) {
		for _, mf := range metas {
			b, err := os.ReadFile(mf)
			if err != nil {
				t.Error(err)
				continue
			}
			var m captureMeta
			if err := json.Unmarshal(b, &m); err != nil {
				t.Errorf("%s: %v", mf, err)
				continue
			}
			t.Run(m.Name, func(t *testing.T) {
				t.Parallel()
				good.Add(int64(checkCapture(t, ts, decodeAs(m.Port), strings.TrimSuffix(mf, ".json")+".pcap", m)))
			})
		}
	})
	if good.Load() == 0 {
		t.Errorf("tshark reported no FPDU with a good CRC in any capture: is it decoding MPA at all?")
	}
}

// decodeArgs returns the tshark arguments that make it decode a port as
// MPA: `-d tcp.port==P,iwarp_mpa` where tshark offers it. tshark 4.0 has
// iwarp_mpa only as a TCP heuristic ("iwarp_mpa_tcp", on by default) that
// recognizes the MPA Request at the start of the stream; there the
// heuristic is enabled explicitly instead.
//
// The dissectors of ULPs over RDMAP stay off: tshark guesses from the
// first octets of every Send whether it is RPC-over-RDMA, SMB Direct or
// NVMe over Fabrics, and perftest's messages make the RPC-over-RDMA guess
// throw "Malformed Packet: RPCoRDMA". What is checked here is MPA, DDP and
// RDMAP. tshark may stack 10000 protocol layers in a frame instead of 500:
// siw packs up to about 500 FPDUs of perftest's 1-octet messages into one
// TCP segment, three layers each, and past the limit tshark gives up on
// the frame with a "Malformed" assertion (gui_max_tree_depth). And TCP's
// heuristic dissectors, MPA's among them, go before the dissectors chosen
// by port number: an Initiator's ephemeral port can be a registered one
// (44321 is Performance Co-Pilot's, whose dissector then took an MPA
// Request for the start of a PCP message). TCP reassembles segments the
// capture holds out of order (seen on the guest's lo with 64 KiB
// segments): else MPA reads FPDU headers in the middle of payload.
func decodeArgs(t *testing.T, ts, metaFile string) func(port int) []string {
	var prefs []string
	pcap := strings.TrimSuffix(metaFile, ".json") + ".pcap"
	for _, opt := range [][]string{
		{"--disable-protocol", "rpcordma", "--disable-protocol", "smb_direct", "--disable-protocol", "nvme-rdma"},
		{"-o", "gui.max_tree_depth:10000"},
		{"-o", "tcp.try_heuristic_first:TRUE"},
		{"-o", "tcp.reassemble_out_of_order:TRUE"},
	} {
		if out, err := exec.Command(ts, append([]string{"-r", pcap, "-c", "1"}, opt...)...).CombinedOutput(); err != nil {
			t.Logf("tshark does not take %s (%s)", strings.Join(opt, " "), lastLines(string(out), 1))
			continue
		}
		prefs = append(prefs, opt...)
	}
	out, err := exec.Command(ts, "-r", pcap, "-c", "1", "-d", "tcp.port==1,iwarp_mpa").CombinedOutput()
	if err == nil {
		return func(port int) []string {
			return append([]string{"-d", fmt.Sprintf("tcp.port==%d,iwarp_mpa", port)}, prefs...)
		}
	}
	t.Logf("tshark does not take -d tcp.port==P,iwarp_mpa (%s); using its iwarp_mpa TCP heuristic", lastLines(string(out), 1))
	heur := []string{"--enable-heuristic", "iwarp_mpa_tcp"}
	if out, err := exec.Command(ts, append([]string{"-r", pcap, "-c", "1"}, heur...)...).CombinedOutput(); err != nil {
		t.Logf("tshark: %s; relying on the heuristic's default", lastLines(string(out), 1))
		heur = nil
	}
	return func(int) []string { return append(slices.Clip(heur), prefs...) }
}

// frame is one captured TCP segment as tshark decodes it; MPA fields hold
// one value per FPDU in the segment.
type frame struct {
	num     int
	srcPort int
	rev, crcFlag, rejFlag, markerFlag,
	ulpduLen, crcCheck, crc, opcode, stag, readSize, srcSTag, sinkSTag,
	termLayer, termEType, termCode []string
	payload string
	info    string // tshark's summary (the Info column)
}

var frameFields = []string{
	"frame.number", "tcp.srcport",
	"iwarp_mpa.rev", "iwarp_mpa.crc_flag", "iwarp_mpa.rej_flag", "iwarp_mpa.marker_flag",
	"iwarp_mpa.ulpdulength", "iwarp_mpa.crc_check", "iwarp_mpa.crc",
	"iwarp_rdma.opcode", "iwarp_ddp.stag", "iwarp_rdma.rdmardsz", "iwarp_rdma.srcstag", "iwarp_rdma.sinkstag",
	"iwarp_rdma.term_layer",
	"iwarp_rdma.term_etype_rdma", "iwarp_rdma.term_etype_ddp", "iwarp_rdma.term_etype_llp", "iwarp_rdma.term_etype",
	"iwarp_rdma.term_errcode_rdma", "iwarp_rdma.term_errcode_ddp_tagged", "iwarp_rdma.term_errcode_ddp_untagged",
	"iwarp_rdma.term_errcode_llp", "iwarp_rdma.term_errcode",
	"tcp.payload",
	"_ws.col.Info", // last: the only field that may hold anything
}

func frames(t *testing.T, ts string, decode []string, pcap string) []frame {
	args := append([]string{"-r", pcap}, decode...)
	args = append(args, "-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=,")
	for _, f := range frameFields {
		args = append(args, "-e", f)
	}
	out, err := exec.Command(ts, args...).Output()
	if err != nil {
		t.Fatalf("tshark %s: %v", strings.Join(args, " "), err)
	}
	var fs []frame
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		c := strings.SplitN(line, "\t", len(frameFields))
		if len(c) != len(frameFields) {
			continue
		}
		list := func(i int) []string {
			if c[i] == "" {
				return nil
			}
			return strings.Split(c[i], ",")
		}
		first := func(is ...int) []string {
			for _, i := range is {
				if l := list(i); l != nil {
					return l
				}
			}
			return nil
		}
		f := frame{rev: list(2), crcFlag: list(3), rejFlag: list(4), markerFlag: list(5),
			ulpduLen: list(6), crcCheck: list(7), crc: list(8), opcode: list(9), stag: list(10),
			readSize: list(11), srcSTag: list(12), sinkSTag: list(13),
			termLayer: list(14), termEType: first(15, 16, 17, 18), termCode: first(19, 20, 21, 22, 23),
			payload: c[24], info: c[25]}
		f.num, _ = strconv.Atoi(c[0])
		f.srcPort, _ = strconv.Atoi(c[1])
		fs = append(fs, f)
	}
	return fs
}

func num(s string) int {
	v, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		return -1
	}
	return int(v)
}

func isSet(s []string) bool { return len(s) > 0 && (s[0] == "1" || s[0] == "True") }

// checkCapture checks one capture against its description and returns how
// many FPDUs tshark found a good CRC in.
func checkCapture(t *testing.T, ts string, decode []string, pcap string, m captureMeta) int {
	// The captures are checked in parallel: every line names its capture.
	pre := "[" + m.Name + "] "
	logf := func(format string, args ...any) { t.Helper(); t.Logf(pre+format, args...) }
	errorf := func(format string, args ...any) { t.Helper(); t.Errorf(pre+format, args...) }
	fatalf := func(format string, args ...any) { t.Helper(); t.Fatalf(pre+format, args...) }
	logf("guest outcome: %s", m.Outcome)
	if m.Dropped > 0 {
		errorf("tcpdump in the guest dropped %d packets: the capture is incomplete", m.Dropped)
	}
	verbose, err := exec.Command(ts, append(append([]string{"-r", pcap}, decode...), "-V")...).Output()
	if err != nil {
		fatalf("tshark -V: %v", err)
	}
	for _, bad := range []string{"Malformed", "Bad CRC", "Bad length", "does not contain the expected length", "Expert Info (Error"} {
		if n := bytes.Count(verbose, []byte(bad)); n > 0 {
			errorf("tshark reports %q %d times", bad, n)
		}
	}
	goodCRC := bytes.Count(verbose, []byte("Good CRC32"))

	fs := frames(t, ts, decode, pcap)
	var summary strings.Builder
	for _, f := range fs {
		if len(f.rev) > 0 || len(f.ulpduLen) > 0 {
			fmt.Fprintf(&summary, "%6d  %s\n", f.num, f.info)
		}
	}
	logf("MPA/DDP/RDMAP frames (tshark):\n%s", firstLines(summary.String(), 16))
	var req, rep *frame
	var fpdus, crcChecked, initiatorFPDUs, requests int
	var rtrSeen bool
	var crcValues []string
	var terms []*frame
	ops := map[opMeta]int{} // FPDUs per side and opcode
	for i := range fs {
		f := &fs[i]
		fromListener := f.srcPort == m.Port
		switch {
		case len(f.rev) > 0 && !fromListener && req == nil:
			req = f
		case len(f.rev) > 0 && fromListener && rep == nil:
			rep = f
		}
		if len(f.rev) > 0 && !fromListener {
			requests++
		}
		from := "siw"
		if fromListener == (m.Role == "server") {
			from = "ours"
		}
		for _, op := range f.opcode {
			ops[opMeta{From: from, Opcode: num(op)}]++
		}
		fpdus += len(f.ulpduLen)
		crcChecked += len(f.crcCheck)
		crcValues = append(crcValues, f.crc...)
		if len(f.termLayer) > 0 {
			terms = append(terms, f)
		}
		if len(f.ulpduLen) > 0 && !fromListener {
			if initiatorFPDUs == 0 && m.RTR != "" {
				rtrSeen = checkRTR(logf, f, m.RTR)
			}
			initiatorFPDUs += len(f.ulpduLen)
		}
	}
	if req == nil {
		// Without the Request tshark's MPA heuristic cannot recognise the
		// stream. A capture that began after the connection's SYN cannot be
		// judged at all (the guest test already checked the data); one that
		// has the SYN but no Request is a real failure.
		all, _ := exec.Command(ts, "-r", pcap, "-Y", fmt.Sprintf("tcp.flags.syn==1 && tcp.flags.ack==0 && tcp.dstport==%d", m.Port)).Output()
		raw, _ := exec.Command(ts, "-r", pcap).Output()
		if len(bytes.TrimSpace(all)) == 0 {
			t.Skipf(pre+"the capture began after the connection was set up (no SYN to port %d): nothing to decode\n%s", m.Port, firstLines(string(raw), 12))
		}
		fatalf("no MPA Request decoded; the capture:\n%s", firstLines(string(raw), 30))
	}
	if rep == nil {
		fatalf("no MPA Reply decoded")
	}
	reqC, repC := isSet(req.crcFlag), isSet(rep.crcFlag)
	logf("Request: rev %v M %v C %v; Reply: rev %v M %v C %v R %v", req.rev, req.markerFlag, req.crcFlag, rep.rev, rep.markerFlag, rep.crcFlag, rep.rejFlag)
	if m.Rev != 0 && (len(rep.rev) == 0 || num(rep.rev[0]) != m.Rev) {
		errorf("the Reply is revision %v, want %d", rep.rev, m.Rev)
	}
	if isSet(rep.rejFlag) != m.Rejected {
		errorf("the Reply's R bit is %v, want %v", rep.rejFlag, m.Rejected)
	}
	// RFC 5044: CRCs are used unless both the Request and the Reply have C
	// clear.
	crcOn := reqC || repC
	if m.CRC != nil && crcOn != *m.CRC {
		errorf("the Startup frames negotiate CRCs %v (Request C %v, Reply C %v), want %v", crcOn, reqC, repC, *m.CRC)
	}
	switch {
	case m.FullOperation && fpdus == 0:
		errorf("no FPDU decoded")
	case !m.FullOperation && fpdus > 0:
		errorf("%d FPDUs decoded after a Startup that should not have led to Full Operation", fpdus)
	}
	if fpdus > 0 && crcOn {
		if goodCRC == 0 || crcChecked != fpdus {
			errorf("CRCs in use but tshark checked %d of %d FPDUs (%d good)", crcChecked, fpdus, goodCRC)
		}
	}
	if fpdus > 0 && !crcOn {
		nonzero := 0
		for _, v := range crcValues {
			if num(v) != 0 {
				nonzero++
			}
		}
		logf("CRCs off: %d FPDUs, CRC fields not checked by tshark, %d of them nonzero", fpdus, nonzero)
	}
	if m.RTR != "" && !rtrSeen {
		errorf("the Initiator's first FPDU is not a zero-length RTR %s", m.RTR)
	}
	logf("%d FPDUs, %d with a good CRC; %s", fpdus, goodCRC, opSummary(ops))
	if m.Connections != 0 && requests != m.Connections {
		errorf("%d MPA Requests, want %d connections", requests, m.Connections)
	}
	for _, want := range m.Ops {
		if ops[want] == 0 {
			errorf("no %s from %s", opNames[want.Opcode], want.From)
		}
	}

	if m.Terminate == nil {
		if len(terms) > 0 {
			errorf("unexpected Terminate in frame %d", terms[0].num)
		}
		return goodCRC
	}
	want := m.Terminate
	found := false
	for _, f := range terms {
		from := "siw"
		if (f.srcPort == m.Port) == (m.Role == "server") {
			from = "ours"
		}
		layer, etype, code := num(first(f.termLayer)), num(first(f.termEType)), num(first(f.termCode))
		logf("Terminate in frame %d from %s: layer %d, type %d, code %d; TCP payload (FPDU) %s", f.num, from, layer, etype, code, f.payload)
		if from == want.From && layer == want.Layer && etype == want.EType && code == want.Code {
			found = true
		}
	}
	if !found {
		errorf("no Terminate from %s with layer %d, type %d, code %d", want.From, want.Layer, want.EType, want.Code)
	}
	return goodCRC
}

// opSummary says how many FPDUs of each opcode each side sent.
func opSummary(ops map[opMeta]int) string {
	var parts []string
	for _, from := range []string{"ours", "siw"} {
		var each []string
		for op := range 8 {
			if n := ops[opMeta{from, op}]; n > 0 {
				each = append(each, fmt.Sprintf("%s ×%d", opNames[op], n))
			}
		}
		if len(each) > 0 {
			parts = append(parts, from+": "+strings.Join(each, ", "))
		}
	}
	return "FPDUs " + strings.Join(parts, "; ")
}

// checkRTR checks that f, the Initiator's first FPDU in the peer-to-peer
// model, is the zero-length RTR message of kind ("write" or "read").
func checkRTR(logf func(string, ...any), f *frame, kind string) bool {
	switch kind {
	case "write": // RDMA Write (opcode 0) with no payload: the 14-octet tagged header alone
		if first(f.opcode) == "0x00" && first(f.ulpduLen) == "14" {
			logf("RTR: zero-length RDMA Write, STag %s", first(f.stag))
			return true
		}
	case "read": // RDMA Read Request (opcode 1) of size 0
		if first(f.opcode) == "0x01" && num(first(f.readSize)) == 0 {
			logf("RTR: zero-length RDMA Read Request, source STag %s, sink STag %s", first(f.srcSTag), first(f.sinkSTag))
			return true
		}
	}
	logf("first Initiator FPDU: opcode %v, ULPDU length %v", f.opcode, f.ulpduLen)
	return false
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("... (%d more)", len(lines)-n))
	}
	return strings.Join(lines, "\n")
}
