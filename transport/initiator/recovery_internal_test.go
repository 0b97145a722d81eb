package initiator

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	log "github.com/sirupsen/logrus"
)

// recoverySession is a logged-in Session without a connection, with n
// command records and room in the window, for startRecovery.
func recoverySession(n int) *Session {
	l := log.New()
	l.SetOutput(io.Discard)
	s := &Session{cfg: Config{RecoveryTimeout: time.Minute}, log: log.NewEntry(l)}
	s.cond = sync.NewCond(&s.mu)
	s.tasks = make([]task, n+extra+1)
	for i := len(s.tasks) - 1; i >= 0; i-- {
		s.tasks[i].done = make(chan struct{}, 1)
		if i != len(s.tasks)-1 {
			s.free = append(s.free, int32(i))
		}
	}
	s.maxCmdSN = s.cmdSN + uint32(n)
	s.ffp.Store(true)
	return s
}

// A connection lost between a command's take and its post leaves the
// command to its post, which marks it for reissue: recovery must neither
// answer it as a ping nor reissue it itself (it has no CmdSN yet).
func TestRecoveryBeforePost(t *testing.T) {
	s := recoverySession(4)
	cmd := &Command{CDB: []byte{0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0}, Dir: NoData}
	ti, err := s.take(context.Background(), true, cmd, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if recover, _ := s.startRecovery(errors.New("cut")); !recover {
		t.Fatal("startRecovery: no recovery")
	}
	tk := &s.tasks[ti]
	if tk.replied || tk.reissue || tk.sent {
		t.Fatalf("recovery took the unposted command: replied %v reissue %v sent %v", tk.replied, tk.reissue, tk.sent)
	}
	select {
	case <-tk.done:
		t.Fatal("recovery answered the unposted command")
	default:
	}
	if err := s.postCommand(ti); err != nil {
		t.Fatal(err)
	}
	if !tk.reissue || tk.cmd != cmd || tk.lun != 3 {
		t.Fatalf("post during recovery: reissue %v, cmd %p (want %p), lun %d", tk.reissue, tk.cmd, cmd, tk.lun)
	}
}
