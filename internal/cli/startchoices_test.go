package cli

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/cli/ptytest"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo/gittest"
	"github.com/lazaret-dev/lazaret/internal/engine/prompt"
)

func choicesOpts(in *os.File, errOut *bytes.Buffer) *globalOptions {
	g := &globalOptions{io: IO{In: in, Out: errOut, ErrOut: errOut}, log: slog.New(slog.DiscardHandler)}
	if in == nil {
		g.io.In = strings.NewReader("")
	}
	return g
}

// Without a terminal a start in a plain directory fails before anything
// runs, in one line naming --direct; the flag or git_mode = "direct" let
// it through without a question.
func TestDirectConsentWithoutTerminal(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	a := gittest.Anchor(t, ws, "p1")
	var out bytes.Buffer
	g := choicesOpts(nil, &out)
	err := g.checkStartChoices(ctx, &config.Profile{Name: "p1"}, a, startChoices{})
	if err == nil {
		t.Fatal("direct mode without a terminal and without --direct: no error")
	}
	var msg bytes.Buffer
	if code := exitCode(err, &msg); code != exitUsage {
		t.Errorf("exit %d, want %d", code, exitUsage)
	}
	if want := "lazaret: " + ws + " is not a git repository: the agent would write directly into it; pass --direct to allow that (or set git_mode = \"direct\" in profile p1)\n"; msg.String() != want {
		t.Errorf("message %q, want %q", msg.String(), want)
	}
	if err := g.checkStartChoices(ctx, &config.Profile{Name: "p1"}, a, startChoices{direct: true}); err != nil {
		t.Errorf("--direct: %v", err)
	}
	if err := g.checkStartChoices(ctx, &config.Profile{Name: "p1", GitMode: "direct"}, a, startChoices{}); err != nil {
		t.Errorf("git_mode = direct: %v", err)
	}
	if err := g.checkStartChoices(ctx, &config.Profile{Name: "p1"}, a, startChoices{direct: true, withChanges: true}); err == nil || !strings.Contains(err.Error(), "--with-changes: ") {
		t.Errorf("--with-changes in direct mode: %v", err)
	}
	if out.Len() != 0 {
		t.Errorf("printed %q", out.String())
	}
}

// On a terminal the user is asked; only a y typed once the question was
// readable starts the sandbox, and nothing is remembered.
func TestDirectConsentOnTerminal(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	a := gittest.Anchor(t, ws, "p1")
	for _, c := range []struct {
		keys string
		ok   bool
	}{{"y\r", true}, {"n\r", false}, {"\r", false}} {
		tm := ptytest.Open(t)
		var out bytes.Buffer
		g := choicesOpts(tm.TTY, &out)
		g.io.ErrOut = tm.TTY
		// Typed ahead, before the question: must not answer it.
		tm.Ptmx.WriteString("y\r")
		done := make(chan error, 1)
		go func() { done <- g.checkStartChoices(ctx, &config.Profile{Name: "p1"}, a, startChoices{}) }()
		tm.WaitFor(t, "Continue? [y/N]")
		if !tm.Shows("The agent will write directly into " + ws + " (not a git repository: no agent branch, no review before it lands). Continue? [y/N]") {
			t.Errorf("question: %q", tm.Output())
		}
		time.Sleep(prompt.MinReadable + 200*time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("answered by the typed-ahead key: %v", err)
		default:
		}
		tm.Ptmx.WriteString(c.keys)
		err := <-done
		if (err == nil) != c.ok {
			t.Errorf("keys %q: %v", c.keys, err)
		}
		if err != nil && !strings.Contains(err.Error(), "nothing started") {
			t.Errorf("keys %q: %v", c.keys, err)
		}
	}
}

func TestWithChangesChecks(t *testing.T) {
	ctx := context.Background()
	ws := gittest.NewRepo(t)
	a := gittest.Anchor(t, ws, "p1")
	var out bytes.Buffer
	g := choicesOpts(nil, &out)
	p := &config.Profile{Name: "p1"}
	if err := g.checkStartChoices(ctx, p, a, startChoices{withChanges: true}); err != nil || !p.WithChanges {
		t.Fatalf("new clone: %v, WithChanges %v", err, p.WithChanges)
	}
	// --direct in a repository says what it would not do.
	if err := g.checkStartChoices(ctx, &config.Profile{Name: "p1"}, a, startChoices{direct: true}); err == nil || !strings.Contains(err.Error(), "is a git repository") {
		t.Errorf("--direct in a repository: %v", err)
	}
	// A clone exists: refused with a hint, nothing changed.
	if err := os.MkdirAll(a.AgentClone(), 0o700); err != nil {
		t.Fatal(err)
	}
	p = &config.Profile{Name: "p1"}
	err := g.checkStartChoices(ctx, p, a, startChoices{withChanges: true})
	var he *hintError
	if !errors.As(err, &he) || he.Code != exitUsage || !strings.Contains(he.Hint, "reset-branch") || p.WithChanges {
		t.Errorf("existing clone: %v", err)
	}
	// The profile key alone never refuses: it applies to new clones.
	p = &config.Profile{Name: "p1", WithChanges: true}
	if err := g.checkStartChoices(ctx, p, a, startChoices{}); err != nil {
		t.Errorf("with_changes and an existing clone: %v", err)
	}
}

func TestCarriedSummary(t *testing.T) {
	for _, tc := range []struct {
		c    gitrepo.Carried
		want string
	}{
		{gitrepo.Carried{Modified: 3, Untracked: 2}, "carried 3 modified and 2 untracked files into the agent's clone (--with-changes)"},
		{gitrepo.Carried{Modified: 1, Deleted: 2}, "carried 1 modified, 0 untracked and 2 deleted files into the agent's clone (--with-changes)"},
		{gitrepo.Carried{Untracked: 1}, "carried 0 modified and 1 untracked file into the agent's clone (--with-changes)"},
		{gitrepo.Carried{}, "no uncommitted changes to carry into the agent's clone (--with-changes)"},
	} {
		if got := tc.c.Summary("--with-changes"); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.c, got, tc.want)
		}
	}
}

// A detached start asks its question on the spawner's terminal (nobody is
// at the keeper's): without one it is the same one line, with --direct
// nothing is asked, and a y is carried to the session CLI for this
// workspace only. The session CLI takes it for that workspace and no
// other (control: another workspace still needs consent), and only when
// kept.
func TestAskBeforeDetach(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	a := gittest.Anchor(t, ws, "p1")
	p := &config.Profile{Name: "p1"}
	var out bytes.Buffer
	g := choicesOpts(nil, &out)
	if _, err := g.askBeforeDetach(ctx, p, a, startChoices{}); err == nil || !strings.Contains(err.Error(), "pass --direct") {
		t.Fatalf("without a terminal: %v", err)
	}
	if env, err := g.askBeforeDetach(ctx, p, a, startChoices{direct: true}); err != nil || env != nil {
		t.Fatalf("--direct: %v %v", env, err)
	}

	tm := ptytest.Open(t)
	g = choicesOpts(tm.TTY, &out)
	g.io.ErrOut = tm.TTY
	done := make(chan error, 1)
	var env []string
	go func() {
		var err error
		env, err = g.askBeforeDetach(ctx, p, a, startChoices{})
		done <- err
	}()
	tm.WaitFor(t, "Continue? [y/N]")
	time.Sleep(prompt.MinReadable + 200*time.Millisecond)
	tm.Ptmx.WriteString("y\r")
	if err := <-done; err != nil || len(env) != 1 || env[0] != envDirectConsent+"="+ws {
		t.Fatalf("after y: %v %v", env, err)
	}

	t.Setenv(envDirectConsent, ws)
	if got := takeDirectConsent(false); got != "" || os.Getenv(envDirectConsent) != "" {
		t.Fatalf("not kept: took %q, left %q", got, os.Getenv(envDirectConsent))
	}
	t.Setenv(envDirectConsent, ws)
	consented := takeDirectConsent(true)
	if consented != ws || os.Getenv(envDirectConsent) != "" {
		t.Fatalf("kept: took %q, left %q", consented, os.Getenv(envDirectConsent))
	}
	g = choicesOpts(nil, &out)
	if err := g.checkStartChoices(ctx, p, a, startChoices{consentedFor: consented}); err != nil {
		t.Fatalf("the session CLI with the spawner's consent: %v", err)
	}
	other := gittest.Anchor(t, t.TempDir(), "p1")
	if err := g.checkStartChoices(ctx, p, other, startChoices{consentedFor: consented}); err == nil {
		t.Fatal("control: the consent for one workspace let another start")
	}
}
