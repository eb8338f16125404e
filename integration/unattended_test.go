//go:build integration

package integration

import (
	"crypto/hmac"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/desktopnotify/desktoptest"
	"github.com/lazaret-dev/lazaret/internal/engine/notify"
)

// hookCall is one webhook request as the test's receiver checked it.
type hookCall struct {
	event    string
	body     string
	verified bool
}

// hookReceiver is a webhook endpoint that checks each request's
// signature with key, as docs/NOTIFY.md tells a receiver to.
func hookReceiver(t *testing.T, key string) (string, <-chan hookCall) {
	calls := make(chan hookCall, 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts, err := strconv.ParseInt(r.Header.Get(notify.HeaderTimestamp), 10, 64)
		ok := err == nil && hmac.Equal([]byte(r.Header.Get(notify.HeaderSignature)), []byte(notify.Sign([]byte(key), ts, body)))
		calls <- hookCall{event: r.Header.Get(notify.HeaderEvent), body: string(body), verified: ok}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, calls
}

// TestUnattendedApproval is issue 35's "done when" on the real path: an
// agent started detached asks for a host command; the user is told by a
// desktop notification (a private session bus) and a signed webhook
// call, neither carrying the agent's words; the request is approved from
// another terminal bound to its hash; the command runs on the host; and
// the session, attached again, shows its screen as the agent left it.
func TestUnattendedApproval(t *testing.T) {
	e := NewEnv(t)
	bus := desktoptest.Bus(t)
	desk := desktoptest.Serve(t, bus)
	const key = "unattended-webhook-key-5b1e0c"
	url, hooks := hookReceiver(t, key)
	e.ExtraEnv = append(e.ExtraEnv, "DBUS_SESSION_BUS_ADDRESS="+bus, "LZ_TEST_HOOK_KEY="+key)
	e.WriteConfig(fmt.Sprintf("[escalation]\nanswer_from = \"any\"\n[notify]\ndesktop = true\nwebhook = { url = %q, secret = \"env:LZ_TEST_HOOK_KEY\" }\n", url))

	const agent = `echo SCREEN$((6*7)); lazaret-escalate --reason "agent-words-xyzzy" -- touch unattended-file; echo "rc=$?"; exec sh`
	r := e.Run("exec", "-t", "--detach", "--", "sh", "-c", agent)
	if r.Code != 0 || !strings.Contains(r.Stderr, "lazaret attach") {
		t.Fatalf("exec --detach: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	var call desktoptest.Call
	deadline := time.After(time.Minute)
	for !strings.Contains(call.Summary, "approval needed") {
		select {
		case call = <-desk.Calls:
		case <-deadline:
			t.Fatal("no desktop notification of the pending request")
		}
	}
	var hook hookCall
	for hook.event != "approval.pending" {
		select {
		case hook = <-hooks:
		case <-deadline:
			t.Fatal("no webhook call for the pending request")
		}
	}
	if !hook.verified {
		t.Fatalf("the webhook call's signature does not verify: %+v", hook)
	}
	p := pendingOne(t, e)
	for _, text := range []string{call.Summary, call.Body, hook.body} {
		if strings.Contains(text, "xyzzy") || strings.Contains(text, "unattended-file") {
			t.Errorf("a notification carries the agent's words (include_request is off): %q", text)
		}
		if !strings.Contains(text, p.ID) && text != call.Summary {
			t.Errorf("a notification does not name the request %s: %q", p.ID, text)
		}
	}

	e.MustRun("approvals", "answer", p.ID, "approve", "--hash", p.Hash)
	Eventually(t, time.Minute, "the approved command to run on the host", func() bool {
		_, err := os.Stat(filepath.Join(e.Workspace, "unattended-file"))
		return err == nil
	})

	a := ptyLazaret(t, e, true, "attach")
	a.waitFor("SCREEN42") // the screen the agent left, redrawn
	a.waitFor("rc=0")
	a.send("exit\r")
	if code := a.exit(); code != 0 {
		t.Fatalf("the attached session: exit %d\n%s", code, a.output())
	}
}
