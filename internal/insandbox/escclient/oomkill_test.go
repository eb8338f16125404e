package escclient

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestPickVictim: the largest resident process is chosen; PID 1, the
// killer itself, malformed and non-numeric entries are skipped.
func TestPickVictim(t *testing.T) {
	root := t.TempDir()
	page := int64(os.Getpagesize())
	write := func(name, statm, comm string) {
		d := filepath.Join(root, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "statm"), []byte(statm), 0o644)
		os.WriteFile(filepath.Join(d, "comm"), []byte(comm), 0o644)
	}
	write("1", "9 999999 0 0 0 0 0\n", "init\n")
	write("7", "9 50 0 0 0 0 0\n", "sh\n")
	write("9", "9 800 0 0 0 0 0\n", "dd\x1b[31m x\n")
	write("12", "9 900000 0\n", "self\n")
	write("13", "garbage\n", "bad\n")
	write("14", "9 0 0\n", "zero\n")
	write("self", "9 9999999 0\n", "link\n")
	v, err := pickVictim(root, 12)
	if err != nil {
		t.Fatal(err)
	}
	if v.pid != 9 || v.rss != 800*page || v.comm != "dd_[31m_x" {
		t.Fatalf("victim %+v", v)
	}
	os.RemoveAll(filepath.Join(root, "9"))
	os.RemoveAll(filepath.Join(root, "7"))
	os.RemoveAll(filepath.Join(root, "14"))
	if v, _ := pickVictim(root, 12); v.pid != 0 {
		t.Fatalf("victim %+v, want none", v)
	}
}

// TestOOMKillServe: one answer per byte; end of input ends it.
func TestOOMKillServe(t *testing.T) {
	root := t.TempDir()
	var out, errb strings.Builder
	if code := OOMKillServeMain(root, strings.NewReader("xx"), &out, &errb); code != 0 {
		t.Fatal(code)
	}
	if out.String() != "none\nnone\n" {
		t.Fatalf("%q %q", out.String(), errb.String())
	}
}

// TestPickVictimBusy: a process whose statm does not answer (a FIFO here,
// as a busy process's blocks under gVisor) is chosen over every process
// whose size is known to be small; a known process of knownLarge or more
// is chosen over it (a small process slow to answer on a loaded host is
// not taken for the allocator).
func TestPickVictimBusy(t *testing.T) {
	page := int64(os.Getpagesize())
	for _, c := range []struct {
		knownPages int64
		want       int
	}{
		{knownLarge/page - 1, 8}, // the known one is small: the busy one goes
		{knownLarge / page, 5},   // the control: a large known one goes first
	} {
		root := t.TempDir()
		for _, d := range []string{"5", "8"} {
			os.MkdirAll(filepath.Join(root, d), 0o755)
			os.WriteFile(filepath.Join(root, d, "comm"), []byte("p"+d+"\n"), 0o644)
		}
		os.WriteFile(filepath.Join(root, "5", "statm"), []byte(fmt.Sprintf("9 %d 0\n", c.knownPages)), 0o644)
		if err := syscall.Mkfifo(filepath.Join(root, "8", "statm"), 0o644); err != nil {
			t.Skip(err)
		}
		v, err := pickVictim(root, 1)
		if err != nil || v.pid != c.want {
			t.Errorf("known %d pages: victim %+v %v, want pid %d", c.knownPages, v, err, c.want)
		}
		if c.want == 8 && (v.rss != -1 || v.comm != "p8") {
			t.Errorf("busy victim %+v", v)
		}
		// Unblock the reader left waiting on the FIFO.
		if f, err := os.OpenFile(filepath.Join(root, "8", "statm"), os.O_WRONLY, 0); err == nil {
			f.Close()
		}
	}
}
