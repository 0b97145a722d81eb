package nbd

import (
	"net"
	"os"
	"testing"
)

// newFileConn makes a descriptor a net.Conn.
func newFileConn(t *testing.T, fd int) net.Conn {
	t.Helper()
	f := os.NewFile(uintptr(fd), "client")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
