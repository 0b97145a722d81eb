package session

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ddpstore/ddpstore/config"
	log "github.com/sirupsen/logrus"
)

func TestLoggerLevel(t *testing.T) {
	for _, tc := range []struct {
		level          string
		verbose, debug bool
		want           log.Level
	}{
		{"info", true, false, log.InfoLevel},
		{"info", false, false, log.WarnLevel}, // a command that prints its own results
		{"debug", false, false, log.WarnLevel},
		{"error", false, false, log.ErrorLevel}, // quieter than warn stays so
		{"trace", true, false, log.TraceLevel},
		{"nonsense", true, false, log.InfoLevel},
		{"error", false, true, log.DebugLevel}, // --debug wins
		{"trace", true, true, log.DebugLevel},
	} {
		l := Logger(&bytes.Buffer{}, config.Log{Level: tc.level}, tc.verbose, tc.debug)
		if got := l.Logger.GetLevel(); got != tc.want {
			t.Errorf("level %q verbose %v debug %v: %v, want %v", tc.level, tc.verbose, tc.debug, got, tc.want)
		}
	}
}

func TestLoggerFormatAndOutput(t *testing.T) {
	var buf bytes.Buffer
	Logger(&buf, config.Log{Level: "info", Format: "json"}, true, false).Info("hello")
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil || rec["msg"] != "hello" {
		t.Errorf("json format wrote %q (%v)", buf.String(), err)
	}
	buf.Reset()
	Logger(&buf, config.Log{Level: "info", Format: "text"}, true, false).Info("hello")
	if s := buf.String(); !strings.Contains(s, "msg=hello") {
		t.Errorf("text format wrote %q", s)
	}
	buf.Reset()
	Logger(&buf, config.DefaultLog(), false, false).Info("quiet")
	if buf.Len() != 0 {
		t.Errorf("not verbose, info logged: %q", buf.String())
	}
}
