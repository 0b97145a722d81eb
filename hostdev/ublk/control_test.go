package ublk

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

func TestRetryCanceled(t *testing.T) {
	for _, tc := range []struct {
		name     string
		results  []error // what each send returns, in turn
		tries    int
		wantSent int
		wantErr  error
	}{
		{"done at once", []error{nil}, 5, 1, nil},
		{"cancelled, then done", []error{unix.ECANCELED, unix.ECANCELED, nil}, 5, 3, nil},
		{"cancelled, then refused", []error{unix.ECANCELED, unix.EINVAL}, 5, 2, unix.EINVAL},
		{"other errors are not retried", []error{unix.EINTR, nil}, 5, 1, unix.EINTR},
		{"cancelled every time", []error{unix.ECANCELED, unix.ECANCELED, unix.ECANCELED}, 3, 3, unix.ECANCELED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent := 0
			res, err := retryCanceled(tc.tries, 0, func() (int32, error) {
				err := tc.results[sent]
				sent++
				if err != nil {
					return -int32(err.(unix.Errno)), err
				}
				return 7, nil
			})
			if sent != tc.wantSent {
				t.Errorf("sent %d times, want %d", sent, tc.wantSent)
			}
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
			if err == nil && res != 7 {
				t.Errorf("result %d, want 7", res)
			}
		})
	}
}
