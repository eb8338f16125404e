package prompt

import (
	"testing"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// TestCookedOutputOnRawTerminal: the attached session leaves the terminal
// raw (no ONLCR); the prompt needs newline mapping while it shows and the
// raw mode back afterwards.
func TestCookedOutputOnRawTerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	if _, err := term.MakeRaw(int(tty.Fd())); err != nil {
		t.Fatal(err)
	}
	oflag := func() uint32 {
		tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}
		return tio.Oflag
	}
	// cfmakeraw clears OPOST (ONLCR then has no effect).
	if oflag()&unix.OPOST != 0 {
		t.Fatal("control: MakeRaw left OPOST on, the test proves nothing")
	}
	restore := cookedOutput(tty)
	if got := oflag(); got&(unix.OPOST|unix.ONLCR) != unix.OPOST|unix.ONLCR {
		t.Fatalf("during the prompt oflag = %#x, want OPOST|ONLCR", got)
	}
	restore()
	if oflag()&unix.OPOST != 0 {
		t.Fatal("raw mode not restored after the prompt")
	}
}
