package mount

import (
	"net"
	"os"
)

// Notify sends state to the service manager over $NOTIFY_SOCKET, as
// sd_notify(3) does: one datagram on a unix socket ("@" leads an abstract
// address). Without NOTIFY_SOCKET it does nothing and returns nil. Serve
// sends READY=1 once the mount is made and STOPPING=1 when it unmounts, so
// a foreground mount runs as a Type=notify unit
// (dist/systemd/ddpinitiator-mount@.service).
func Notify(state string) error {
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
