package transport_test

import (
	"context"
	"testing"
	"time"

	"github.com/ddpstore/ddpstore/transport/initiator"
)

// A RESERVE(6) ends with its I_T nexus (SPC-2 5.5.1, SAM-5): once the
// holder's Logout Response is in, another initiator's RESERVE(6) must
// find the LU free. The target released the reservation only when the
// logged-out connection's loop had ended, after the response was sent, so
// libiscsi's Reserve6.Logout, which reserves from its second session the
// moment the first has logged out, now and then met RESERVATION CONFLICT.
func TestLogoutReleasesReservation(t *testing.T) {
	for _, via := range []string{"iser", "iscsi-tcp"} {
		t.Run(via, func(t *testing.T) {
			r := newRig(t, rigOpts{tcp: true})
			dial := func(name string) *initiator.Session {
				cfg := initiator.Config{InitiatorName: name, TargetName: targetName}
				var s *initiator.Session
				var err error
				if via == "iser" {
					s, err = r.tryDial(cfg)
				} else {
					s, err = r.tryDialVia(initiator.NetworkISCSITCP, r.tcpAddr, cfg)
				}
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			const reservationConflict = 0x18
			reserve6 := func(s *initiator.Session) uint8 {
				t.Helper()
				cmd := &initiator.Command{CDB: []byte{0x16, 0, 0, 0, 0, 0}}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := s.Do(ctx, cmd); err != nil {
					if se, ok := err.(*initiator.StatusError); ok {
						return se.Status
					}
					t.Fatalf("RESERVE(6): %v", err)
				}
				return cmd.Status
			}
			b := dial(initiatorName + "-b")
			for i := range 20 {
				a := dial(initiatorName)
				if st := reserve6(a); st != 0 {
					t.Fatalf("round %d: RESERVE(6) from the first initiator: status %#x", i, st)
				}
				if st := reserve6(b); st != reservationConflict {
					t.Fatalf("round %d: RESERVE(6) from the second while the first holds it: status %#x, want RESERVATION CONFLICT", i, st)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := a.Logout(ctx)
				cancel()
				if err != nil {
					t.Fatalf("round %d: logout: %v", i, err)
				}
				if st := reserve6(b); st != 0 {
					t.Fatalf("round %d: RESERVE(6) from the second right after the holder logged out: status %#x", i, st)
				}
				do(t, b, &initiator.Command{CDB: []byte{0x17, 0, 0, 0, 0, 0}}) // RELEASE(6)
			}
		})
	}
}
