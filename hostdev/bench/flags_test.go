package bench

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/config"
)

func TestRegisterDefaults(t *testing.T) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var o Options
	o.Register(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	want := Options{RW: "randread", BlockSize: 4 * config.KiB, IODepth: 32, Runtime: 10 * time.Second, Progress: "auto"}
	if o != want {
		t.Errorf("defaults %+v, want %+v", o, want)
	}
	if err := o.Check(); err != nil {
		t.Errorf("the defaults fail Check: %v", err)
	}
}

func TestRegisterParses(t *testing.T) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var o Options
	o.Register(fs)
	args := []string{"--lun", "2", "--rw", "randrw", "--bs", "64KiB", "--iodepth", "4", "--runtime", "3s", "--size", "1MiB", "--verify", "--progress", "never"}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	want := Options{LUN: 2, RW: "randrw", BlockSize: 64 * config.KiB, IODepth: 4, Runtime: 3 * time.Second, Size: config.MiB, Verify: true, Progress: "never"}
	if o != want {
		t.Errorf("parsed %+v, want %+v", o, want)
	}
	if err := fs.Parse([]string{"--bs", "lots"}); err == nil {
		t.Error("--bs lots parsed")
	}
}

func TestPrintJSON(t *testing.T) {
	r := &Result{RW: "randread", BlockSize: 4096, IODepth: 32, IOs: 10, Verified: true}
	var buf bytes.Buffer
	if err := r.PrintJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "\n  \"rw\": \"randread\",\n") {
		t.Errorf("not indented by two spaces:\n%s", buf.String())
	}
	var back Result
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || back != *r {
		t.Errorf("read back %+v (%v), want %+v", back, err, *r)
	}
}
