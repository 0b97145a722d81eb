package mem

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAnonymous(t *testing.T) {
	for _, size := range []int{1, pageSize, 3*pageSize + 5, 4 << 20} {
		m, err := Anonymous(size)
		if err != nil {
			t.Fatalf("Anonymous(%d): %v", size, err)
		}
		b := m.Bytes()
		if len(b) != size || m.Len() != size || !m.Writable() || m.Name() != "anonymous" {
			t.Errorf("Anonymous(%d): len %d, Len %d, writable %v, name %q", size, len(b), m.Len(), m.Writable(), m.Name())
		}
		for i := range b {
			if b[i] != 0 {
				t.Fatalf("Anonymous(%d): byte %d is %d, want zeroed memory", size, i, b[i])
			}
		}
		b[0], b[size-1] = 1, 2
		if err := m.Sync(0, 1); !errors.Is(err, ErrNotFile) {
			t.Errorf("Sync of an anonymous mapping: %v, want ErrNotFile", err)
		}
		if err := m.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := m.Close(); err != nil {
			t.Errorf("second Close: %v, want nil", err)
		}
		if m.Bytes() != nil || m.Len() != 0 {
			t.Errorf("Bytes after Close: %d bytes, want nil", len(m.Bytes()))
		}
	}
}

func TestAnonymousBadSize(t *testing.T) {
	for _, size := range []int{0, -1} {
		if _, err := Anonymous(size); !errors.Is(err, ErrSize) {
			t.Errorf("Anonymous(%d): %v, want ErrSize", size, err)
		}
	}
}

func TestCloseBusy(t *testing.T) {
	tab := NewTable(0)
	m := anon(t, pageSize)
	mr, err := tab.Register(NewPD(), m, 0, 10, LocalWrite, ZeroBased)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Close with a registered MR: %v, want ErrBusy", err)
	}
	if m.Bytes() == nil {
		t.Fatal("a refused Close unmapped the memory")
	}
	deregister(t, tab, mr)
	if err := m.Close(); err != nil {
		t.Fatalf("Close after Deregister: %v", err)
	}
	if _, err := tab.Register(NewPD(), m, 0, 10, LocalWrite, ZeroBased); !errors.Is(err, ErrClosed) {
		t.Fatalf("Register in a closed mapping: %v, want ErrClosed", err)
	}
}

func TestHold(t *testing.T) {
	m := anon(t, 2*pageSize)
	b, err := m.Hold(pageSize, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 100 || &b[0] != &m.Bytes()[pageSize] {
		t.Fatalf("Hold(%d, 100) = %d octets elsewhere", pageSize, len(b))
	}
	if err := m.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Close while held: %v, want ErrBusy", err)
	}
	m.Release()
	if err := m.Close(); err != nil {
		t.Fatalf("Close after Release: %v", err)
	}
	if _, err := m.Hold(0, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Hold in a closed mapping: %v, want ErrClosed", err)
	}
	ro := anon(t, pageSize)
	ro.writable = false
	if _, err := ro.Hold(0, 1); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Hold of a read-only mapping: %v, want ErrReadOnly", err)
	}
	if _, err := ro.Hold(1, pageSize); !errors.Is(err, ErrRange) {
		t.Fatalf("Hold beyond the end: %v, want ErrRange", err)
	}
}

// tempFile writes a file of n bytes, byte i being i%251, and returns its path.
func tempFile(t *testing.T, n int) (string, []byte) {
	t.Helper()
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i % 251)
	}
	path := filepath.Join(t.TempDir(), "backing")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, data
}

// mapsPerms returns the permission column of /proc/self/maps for b's mapping.
func mapsPerms(t *testing.T, b []byte) string {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps")
	}
	addr := uintptrOf(b)
	for line := range strings.Lines(string(maps)) {
		f := strings.Fields(line)
		var lo, hi uintptr
		if len(f) >= 2 && parseRange(f[0], &lo, &hi) && lo <= addr && addr < hi {
			return f[1]
		}
	}
	t.Fatalf("mapping at %#x not in /proc/self/maps", addr)
	return ""
}

func TestMapFileReadWrite(t *testing.T) {
	fds := openFDs(t)
	path, data := tempFile(t, 3*pageSize)
	m, err := MapFile(path, int64(pageSize), pageSize, ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	b := m.Bytes()
	if string(b) != string(data[pageSize:2*pageSize]) || !m.Writable() || m.Name() != path {
		t.Fatalf("mapping holds the wrong bytes, or writable %v, name %q", m.Writable(), m.Name())
	}
	if p := mapsPerms(t, b); p != "rw-s" {
		t.Errorf("permissions %q, want rw-s (shared, writable)", p)
	}
	copy(b[100:], "written through the mapping")
	if err := m.Sync(100, 27); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(got[pageSize+100 : pageSize+127]); s != "written through the mapping" {
		t.Errorf("file holds %q after Sync", s)
	}
	for _, r := range [][2]int{{-1, 1}, {0, pageSize + 1}, {pageSize, 1}, {1, -1}} {
		if err := m.Sync(r[0], r[1]); !errors.Is(err, ErrRange) {
			t.Errorf("Sync(%d, %d): %v, want ErrRange", r[0], r[1], err)
		}
	}
	if err := m.Sync(0, 0); err != nil {
		t.Errorf("Sync of nothing: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Sync(0, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync after Close: %v, want ErrClosed", err)
	}
	if n := openFDs(t); n != fds {
		t.Errorf("%d open file descriptors after Close, %d before MapFile", n, fds)
	}
}

func TestMapFileReadOnly(t *testing.T) {
	path, data := tempFile(t, 2*pageSize+100)
	m, err := MapFile(path, 0, 0, ReadOnly) // length 0: to the end
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if string(m.Bytes()) != string(data) || m.Writable() {
		t.Fatalf("read-only mapping: %d bytes, writable %v", m.Len(), m.Writable())
	}
	if p := mapsPerms(t, m.Bytes()); p != "r--s" {
		t.Errorf("permissions %q, want r--s (shared, read-only)", p)
	}
	tab := NewTable(0)
	pd := NewPD()
	for _, acc := range []Access{LocalWrite, LocalWrite | RemoteWrite} {
		if _, err := tab.Register(pd, m, 0, 10, acc, ZeroBased); !errors.Is(err, ErrReadOnly) {
			t.Errorf("Register %v in a read-only mapping: %v, want ErrReadOnly", acc, err)
		}
	}
	mr, err := tab.Register(pd, m, 0, 10, RemoteRead|RemoteInvalidate, ZeroBased)
	if err != nil {
		t.Fatalf("Register RemoteRead in a read-only mapping: %v", err)
	}
	deregister(t, tab, mr)
}

func TestMapFileErrors(t *testing.T) {
	path, _ := tempFile(t, 2*pageSize)
	dir := t.TempDir()
	tests := []struct {
		name   string
		path   string
		off    int64
		length int
		mode   Mode
		want   error
	}{
		{"misaligned offset", path, 100, 10, ReadOnly, ErrAlignment},
		{"negative offset", path, -int64(pageSize), 10, ReadOnly, ErrAlignment},
		{"negative length", path, 0, -1, ReadOnly, ErrSize},
		{"past the end", path, int64(pageSize), pageSize + 1, ReadWrite, ErrRange},
		{"offset at the end", path, 2 * int64(pageSize), 0, ReadOnly, ErrRange},
		{"offset past the end", path, 3 * int64(pageSize), 1, ReadOnly, ErrRange},
		{"directory", dir, 0, 0, ReadOnly, ErrFileType},
		{"character device", "/dev/null", 0, 1, ReadOnly, ErrFileType},
		{"missing", filepath.Join(dir, "missing"), 0, 1, ReadOnly, os.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := MapFile(tt.path, tt.off, tt.length, tt.mode)
			if err == nil {
				m.Close()
				t.Fatal("MapFile succeeded")
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
			var fe *FileError
			if !errors.As(err, &fe) || fe.Path != tt.path || !strings.Contains(err.Error(), tt.path) {
				t.Errorf("error %q does not name %s", err, tt.path)
			}
		})
	}
}

func TestMapBlockDevice(t *testing.T) {
	dev := loopDevice(t, 4*pageSize)
	m, err := MapFile(dev, int64(pageSize), 2*pageSize, ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	copy(m.Bytes(), "block")
	if err := m.Sync(0, 5); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := MapFile(dev, int64(pageSize), 4*pageSize, ReadOnly); !errors.Is(err, ErrRange) {
		t.Errorf("mapping past the end of the device: %v, want ErrRange", err)
	}
	m, err = MapFile(dev, 0, 0, ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Len() != 4*pageSize || string(m.Bytes()[pageSize:pageSize+5]) != "block" {
		t.Errorf("device mapping: %d bytes, want %d with the bytes written before", m.Len(), 4*pageSize)
	}
}
