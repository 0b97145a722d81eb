package remote_test

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ddpstore/ddpstore/hostdev/remote"
	"github.com/ddpstore/ddpstore/internal/testtarget"
	"github.com/ddpstore/ddpstore/transport/initiator"
)

func TestReport(t *testing.T) {
	testtarget.CheckLeaks(t)
	tt := testtarget.Start(t, testtarget.Memory(t, 4<<20), testtarget.Memory(t, 1<<20))
	s := tt.Dial(t, initiator.Config{Buffers: 1 << 20, QueueDepth: 8})
	var out bytes.Buffer
	if err := remote.Report(context.Background(), s, tt.Addr, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("want 4 lines (session, parameters, 2 LUNs), got:\n%s", out.String())
	}
	head := regexp.MustCompile(fmt.Sprintf(`^target %s at %s: logged in \(ISID [0-9a-f]{12}, TSIH [1-9][0-9]*\)$`, regexp.QuoteMeta(testtarget.TargetName), regexp.QuoteMeta(tt.Addr)))
	if !head.MatchString(lines[0]) {
		t.Errorf("first line %q", lines[0])
	}
	if !regexp.MustCompile(`^  ImmediateData=(true|false) FirstBurstLength=\d+ MaxBurstLength=\d+ TargetRecvDataSegmentLength=\d+ MaxCmdSN-CmdSN=[1-9]\d*$`).MatchString(lines[1]) {
		t.Errorf("parameters %q", lines[1])
	}
	// The LUNs come in the target's order, which this one does not fix.
	got := slices.Sorted(slices.Values(lines[2:]))
	want := []string{"  LUN 0: 8192 blocks of 512 octets (4.0 MiB)", "  LUN 1: 2048 blocks of 512 octets (1.0 MiB)"}
	if !slices.Equal(got, want) {
		t.Errorf("LUN lines %q, want %q", got, want)
	}
}

func TestReportFailureNamesTheCommand(t *testing.T) {
	testtarget.CheckLeaks(t)
	tt := testtarget.Start(t, testtarget.Memory(t, 1<<20))
	s := tt.Dial(t, initiator.Config{Buffers: 1 << 20, QueueDepth: 8})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	err := remote.Report(ctx, s, tt.Addr, &out)
	if err == nil || !strings.HasPrefix(err.Error(), "REPORT LUNS: ") {
		t.Errorf("on a cancelled context: %v, want a REPORT LUNS error", err)
	}
	if !strings.HasPrefix(out.String(), "target ") {
		t.Errorf("the session is described before the LUNs: %q", out.String())
	}
}
