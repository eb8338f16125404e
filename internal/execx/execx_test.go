package execx

import (
	"os/exec"
	"strings"
	"testing"
)

func TestTailBufferKeepsTheEnd(t *testing.T) {
	b := &TailBuffer{Max: 4}
	b.Write([]byte("abc"))
	b.Write([]byte("defg"))
	if b.String() != "defg" {
		t.Errorf("got %q", b.String())
	}
}

func TestLastLine(t *testing.T) {
	for in, want := range map[string]string{"": "", "a\n": "a", "a\n b \n\n": "b", "x": "x"} {
		if got := LastLine(in); got != want {
			t.Errorf("LastLine(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOutputExitCode(t *testing.T) {
	out, stderr, err := Output(exec.Command("sh", "-c", "cat; echo oops >&2; exit 3"), strings.NewReader("in"))
	if string(out) != "in" || stderr != "oops\n" {
		t.Errorf("out %q stderr %q", out, stderr)
	}
	if code, ok := ExitCode(err); !ok || code != 3 {
		t.Errorf("exit %d %v (%v)", code, ok, err)
	}
}
