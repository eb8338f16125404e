package notify

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/fdsafe/fdprobe"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// childOut, set in the environment, makes the test binary the notify
// command: it writes what it read on stdin and what it inherited there.
const childOut = "LAZARET_NOTIFY_TEST_OUT"

type childReport struct {
	Stdin string         `json:"stdin"`
	Probe fdprobe.Report `json:"probe"`
}

func TestMain(m *testing.M) {
	fdprobe.Main(os.Args[1:])
	if out := os.Getenv(childOut); out != "" {
		in, _ := io.ReadAll(os.Stdin)
		r, err := fdprobe.Collect()
		if err != nil {
			os.Exit(3)
		}
		b, _ := json.Marshal(childReport{Stdin: string(in), Probe: r})
		_ = os.WriteFile(out, b, 0o600)
		os.Stdout.WriteString(strings.Repeat("o", 10000))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestCommandStdinAndDescriptors: the command gets the notice as JSON on
// stdin and descriptors 0-2 only, though this process holds a terminal,
// a file and a pipe without close-on-exec; its output reaches the log,
// bounded. Positive control: a plain child holds all three.
func TestCommandStdinAndDescriptors(t *testing.T) {
	l, err := fdprobe.OpenLeaks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.ClearCloexec(); err != nil {
		t.Fatal(err)
	}
	ctlOut, err := exec.Command(os.Args[0], fdprobe.Arg).Output()
	if err != nil {
		t.Fatal(err)
	}
	cr, err := fdprobe.Parse(ctlOut)
	if err != nil {
		t.Fatal(err)
	}
	if found := l.FoundIn(cr); len(found) != 3 {
		t.Fatalf("positive control: a plain child holds %v, want the pty, the file and the pipe", found)
	}

	out := t.TempDir() + "/report.json"
	t.Setenv(childOut, out)
	h := start(t, config.Notify{Command: []string{os.Args[0]}, IncludeRequest: false}, nil)
	h.hub.Publish(pending("r-3", "secret-ish agent text"))
	h.stop()
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("the command did not run: %v\n%s", err, h.log)
	}
	var rep childReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	var n Notice
	if err := json.Unmarshal([]byte(rep.Stdin), &n); err != nil || n.Kind != ctl.EventApprovalPending || n.Request != "r-3" || n.Detail != "" {
		t.Fatalf("stdin %q: %v", rep.Stdin, err)
	}
	if leaked := rep.Probe.Leaked(); len(leaked) != 0 {
		t.Fatalf("the command inherited %v beyond 0-2", leaked)
	}
	if log := h.log.String(); !strings.Contains(log, "notify: command output") || !strings.Contains(log, "truncated=true") || strings.Count(log, "o") > 2*maxCommandOutput {
		t.Fatalf("log: %.300s", log)
	}
}

// TestCommandKilledAfterItsTime: a command that does not end is killed
// (with what it started), and the notifier goes on.
func TestCommandKilledAfterItsTime(t *testing.T) {
	short := func(o *options) { o.cmdTimeout = 100 * time.Millisecond }
	h := start(t, config.Notify{Command: []string{"/bin/sh", "-c", "sleep 600 & sleep 600"}}, nil, short)
	h.hub.Publish(pending("r-1", ""))
	h.hub.Publish(ctl.Event{Kind: ctl.EventSandboxStopped})
	h.stop()
	if n := strings.Count(h.log.String(), "killed after its time"); n != 2 {
		t.Fatalf("%d kills:\n%s", n, h.log)
	}
}
