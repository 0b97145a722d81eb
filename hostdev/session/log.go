package session

import (
	"io"

	"github.com/ddpstore/ddpstore/config"
	log "github.com/sirupsen/logrus"
)

// Logger is the log of a session as conf says, writing to w: its level
// (info when unknown) and format (text or json). A command that prints
// its own results is not verbose and logs only warnings and worse; a
// long-running one (a mount, a device daemon) is. debug logs everything
// at debug level, whatever the rest says.
func Logger(w io.Writer, conf config.Log, verbose, debug bool) *log.Entry {
	l := log.New()
	l.SetOutput(w)
	lvl, err := log.ParseLevel(conf.Level)
	if err != nil {
		lvl = log.InfoLevel
	}
	if !verbose {
		lvl = min(lvl, log.WarnLevel)
	}
	l.SetLevel(lvl)
	if conf.Format == "json" {
		l.SetFormatter(&log.JSONFormatter{})
	}
	if debug {
		l.SetLevel(log.DebugLevel)
	}
	return log.NewEntry(l)
}
