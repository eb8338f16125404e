package notify

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lazaret-dev/lazaret/internal/adapter/desktopnotify"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// FuzzFilter: whatever the sandbox's text, workspace or reason, a
// notification's text has no control character, the desktop body no
// markup, the request's text at most MaxDetail characters, and none of
// it without include_request.
func FuzzFilter(f *testing.F) {
	f.Add("rm -rf / \x1b]8;;http://x\x07", "/w/<b>p</b>", "r\u202e", true)
	f.Add(strings.Repeat("é", 500), "/", "", false)
	f.Fuzz(func(t *testing.T, detail, workspace, reason string, include bool) {
		e := ctl.Event{Kind: ctl.EventApprovalPending, Profile: "dev", Workspace: workspace, Request: "r-1", Reason: reason, Detail: detail}
		n := filter(e, include)
		if !include && n.Detail != "" {
			t.Fatalf("detail without include_request: %q", n.Detail)
		}
		if utf8.RuneCountInString(n.Detail) > MaxDetail {
			t.Fatalf("detail of %d characters", utf8.RuneCountInString(n.Detail))
		}
		body := desktopnotify.EscapeMarkup(Body(n))
		for _, s := range []string{Title(n), strings.ReplaceAll(body, "\nRequest: ", " ")} {
			if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }) {
				t.Fatalf("control character in %q", s)
			}
		}
		if strings.ContainsAny(body, "<>") {
			t.Fatalf("markup in the desktop body %q", body)
		}
	})
}
