package main

import (
	"net"
	"os"
)

// sdNotify sends state to the service manager over $NOTIFY_SOCKET, as
// sd_notify(3) does: one datagram on a unix socket ("@" leads an abstract
// address). Without NOTIFY_SOCKET it does nothing and returns nil.
func sdNotify(state string) error {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return nil
	}
	if addr[0] == '@' {
		addr = "\x00" + addr[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(state))
	return err
}
