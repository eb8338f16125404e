package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/engine/prompt"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// startChoices are the flags of exec and shell about the workspace a
// start hands the agent.
type startChoices struct {
	// withChanges: carry the host's uncommitted changes into the agent's
	// new clone (branch mode; the profile's with_changes does the same).
	withChanges bool
	// direct: the workspace is not a git repository and the agent may
	// write into it directly, without the question a terminal gets.
	direct bool
	// consentedFor is the workspace a detached start's spawner got the
	// user's direct-mode consent for (envDirectConsent).
	consentedFor string
}

// envDirectConsent carries a detached start's direct-mode consent, asked
// on the spawner's terminal, to the session CLI its keeper runs, where
// nobody is attached to answer; its value is the workspace agreed to.
const envDirectConsent = "LAZARET_DIRECT_CONSENT"

// askBeforeDetach asks this terminal, before a detached session is
// spawned, what its start would ask on the keeper's terminal: the
// direct-mode consent (without a terminal and --direct, the one-line
// error). It returns the environment that carries the answer.
func (g *globalOptions) askBeforeDetach(ctx context.Context, p *config.Profile, a *domain.Anchor, c startChoices) ([]string, error) {
	mode, err := gitrepo.ResolveMode(p.GitMode, a.Workspace)
	if err != nil || mode != gitrepo.ModeDirect || c.direct {
		return nil, nil // the session's own checks say the rest
	}
	if err := g.directConsent(ctx, p, a, false); err != nil {
		return nil, err
	}
	return []string{envDirectConsent + "=" + a.Workspace}, nil
}

func (c *startChoices) addFlags(f *pflag.FlagSet) {
	f.BoolVar(&c.withChanges, "with-changes", false,
		"carry the host's modified and untracked (not ignored) files into the agent's new clone (branch mode)")
	f.BoolVar(&c.direct, "direct", false,
		"let the agent write directly into a workspace that is not a git repository without asking (needed without a terminal)")
}

// checkStartChoices runs before a session starts anything: in direct mode
// that the user agreed (directConsent); in branch mode that
// --with-changes can apply (the clone is made by this start), and it
// sets the profile's WithChanges for the preflight and the coordinator.
func (g *globalOptions) checkStartChoices(ctx context.Context, p *config.Profile, a *domain.Anchor, c startChoices) error {
	mode, err := gitrepo.ResolveMode(p.GitMode, a.Workspace)
	if err != nil {
		return nil // the preflight reports it
	}
	if mode == gitrepo.ModeDirect {
		if c.withChanges {
			return withHint(fmt.Errorf("--with-changes: %s is not a git repository (direct mode): the agent works on the directory itself, changes and all", field(a.Workspace)), exitUsage, "")
		}
		return g.directConsent(ctx, p, a, c.direct || (c.consentedFor != "" && c.consentedFor == a.Workspace))
	}
	if c.direct {
		return withHint(fmt.Errorf("--direct: %s is a git repository: the agent works on its branch %s there (git_mode = \"direct\" in profile %s gives it the directory itself)",
			field(a.Workspace), gitrepo.RefMap{Profile: p.Name}.AgentBranch(), p.Name), exitUsage, "")
	}
	if !c.withChanges {
		return nil
	}
	if _, err := os.Lstat(a.AgentClone()); err == nil {
		return withHint(fmt.Errorf("--with-changes: the agent's clone of profile %s already exists, and its own uncommitted work is never overwritten: changes are carried only into a new clone", p.Name),
			exitUsage, "commit the changes (the agent can merge or rebase onto them), or start afresh from HEAD with "+verbLine("reset-branch", p.Name)+" first")
	}
	p.WithChanges = true
	return nil
}

// directModeQuestion is what a terminal is asked before the agent gets a
// directory that is not a git repository.
func directModeQuestion(ws string) string {
	return fmt.Sprintf("The agent will write directly into %s (not a git repository: no agent branch, no review before it lands). Continue? [y/N] ", field(ws))
}

// errDirectNeedsConsent is the one line a start without a terminal gets.
func errDirectNeedsConsent(p *config.Profile, ws string) error {
	return withHint(fmt.Errorf("%s is not a git repository: the agent would write directly into it; pass --direct to allow that (or set git_mode = \"direct\" in profile %s)",
		field(ws), p.Name), exitUsage, "")
}

// directConsent: the agent is about to get the user's directory itself.
// The answer is the flag, the profile's explicit git_mode = "direct", or
// the user's y on a terminal (prompt.Confirm: keys typed before the
// question was readable do not answer it), asked again at every start
// and remembered nowhere. A session joining a running sandbox is not
// asked (the start was). Without a terminal and without the flag the
// start fails before anything runs.
func (g *globalOptions) directConsent(ctx context.Context, p *config.Profile, a *domain.Anchor, flag bool) error {
	if flag || p.GitMode == gitrepo.ModeDirect {
		return nil
	}
	if _, err := os.Lstat(a.ControlSocket()); err == nil && g.domainClient(a).alive(ctx) {
		return nil
	}
	in, _, _ := g.files()
	if !isTerminal(in) {
		return errDirectNeedsConsent(p, a.Workspace)
	}
	ok, err := prompt.Confirm(in, g.io.ErrOut, directModeQuestion(a.Workspace))
	if errors.Is(err, prompt.ErrNotTerminal) {
		return errDirectNeedsConsent(p, a.Workspace)
	}
	if err != nil || !ok {
		return errors.New("direct mode not confirmed: nothing started")
	}
	return nil
}

// carryAnnouncer is called before a session connects; the function it
// returns prints, once the sandbox runs, what the start carried into the
// agent's new clone (gitrepo.Carried, recorded by the coordinator) when
// this session starts the sandbox and carrying was asked for.
func (g *globalOptions) carryAnnouncer(p *config.Profile, a *domain.Anchor, flag bool) func() {
	if !p.WithChanges {
		return func() {}
	}
	if _, err := os.Lstat(a.ControlSocket()); err == nil {
		return func() {}
	}
	if _, err := os.Lstat(a.AgentClone()); err == nil {
		return func() {} // with_changes applies to a new clone only
	}
	source := "with_changes in profile " + p.Name
	if flag {
		source = "--with-changes"
	}
	return func() {
		c, ok := gitrepo.ReadCarried(a.Root())
		if !ok {
			return
		}
		// Names of the user's files: escaped.
		fmt.Fprintf(g.io.ErrOut, "lazaret: %s\n", visible.Line(c.Summary(source)))
		for _, n := range c.Notes {
			fmt.Fprintf(g.io.ErrOut, "lazaret: %s\n", visible.Line(n))
		}
	}
}
