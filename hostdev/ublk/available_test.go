package ublk

import (
	"errors"
	"os"
	"testing"
)

// TestAvailableHere: on a kernel without ublk_drv, Available says so.
func TestAvailableHere(t *testing.T) {
	if _, err := os.Stat(ControlPath); err == nil {
		t.Skip("this kernel has ublk")
	}
	if err := Available(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Available() = %v, want a missing %s", err, ControlPath)
	}
}
