package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/cli/review"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// reviewTarget is what every review command (diff, log, merge,
// reset-branch) works on: the profile's domain in the current directory,
// in branch mode.
type reviewTarget struct {
	anchor *domain.Anchor
	review *review.Review
	podman *podman.Client
}

// openReview resolves the domain of profile in the current directory and
// the host repository, refusing direct mode (there is no agent branch).
func (g *globalOptions) openReview(ctx context.Context, profile string) (*reviewTarget, error) {
	g.attemptBackend = clicore.AnyBackend // the branches are the host's
	cfg, err := g.loadConfig()
	if err != nil {
		return nil, err
	}
	p, a, err := g.resolveDomain(cfg, profile, "")
	if err != nil {
		return nil, err
	}
	mode, err := gitrepo.ResolveMode(p.GitMode, a.Workspace)
	if err != nil {
		return nil, err
	}
	if mode != gitrepo.ModeBranch {
		return nil, withHint(fmt.Errorf("profile %s works on %s in direct mode: there is no agent branch", p.Name, a.Workspace),
			exitUsage, "review the changes with git itself; branch mode needs the top level of a git repository and git_mode not \"direct\"")
	}
	git := g.hostGit()
	repo, err := gitrepo.OpenHostRepo(ctx, git, a.Workspace)
	if err != nil {
		return nil, err
	}
	return &reviewTarget{
		anchor: a,
		review: &review.Review{Git: git, Repo: repo, Map: gitrepo.RefMapOf(a)},
		podman: g.podmanClient(),
	}, nil
}

// terminalOut is the view of review output on stdout: escaped and coloured
// by lazaret on a terminal (plain with NO_COLOR set), escaped text and an
// applicable patch elsewhere (review.View). Either way no escape
// sequence of the agent's reaches the user.
func (g *globalOptions) terminalOut() review.View {
	if f, ok := g.io.Out.(*os.File); !ok || !isTerminal(f) {
		return review.ViewPipe
	}
	if os.Getenv("NO_COLOR") != "" {
		return review.ViewTerminalPlain
	}
	return review.ViewTerminal
}

type diffOptions struct {
	stat        bool
	uncommitted bool
}

func newDiffCmd(g *globalOptions) *cobra.Command {
	o := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff [PROFILE]",
		Short: "Show what the agent changed on its branch since it forked from your history",
		Long: `Show the diff of the agent branch lazaret/agent-<profile> against its merge base
with your current HEAD, computed by git on the host from the verified objects the
ref sync brought in (no external diff or textconv driver runs). After the diff,
on stderr, what a merge would plant: symlinks that lead out of the repository,
new executable bits, and changed files your tools run unasked (.envrc, editor
tasks, git hooks, Makefiles, package scripts, CI, .gitattributes ...). With --uncommitted, show instead the changes the agent has not
committed yet, as git in the sandbox sees them (the sandbox must be running).`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: g.completeProfiles,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDiff(cmd.Context(), g, o, firstArg(args))
		},
	}
	cmd.Flags().BoolVar(&o.stat, "stat", false, "show a diffstat instead of the patch")
	cmd.Flags().BoolVar(&o.uncommitted, "uncommitted", false, "show the agent's uncommitted changes (runs git diff in the sandbox)")
	return cmd
}

func firstArg(args []string) string {
	if len(args) > 0 {
		return args[0]
	}
	return ""
}

func runDiff(ctx context.Context, g *globalOptions, o *diffOptions, profile string) error {
	t, err := g.openReview(ctx, profile)
	if err != nil {
		return err
	}
	// The diff shows the agent's content (and, with --uncommitted, comes
	// from its git): see terminalOut.
	view := g.terminalOut()
	if o.uncommitted {
		running, err := review.SandboxRunning(ctx, t.podman, t.anchor.Container())
		if err != nil {
			return err
		}
		if !running {
			return withHint(fmt.Errorf("--uncommitted: the sandbox %s is not running", t.anchor.Container()), exitUsage,
				"uncommitted changes live only in the agent's clone; start the sandbox, or drop --uncommitted to see its commits")
		}
		return review.UncommittedDiff(ctx, t.podman, t.anchor.Container(), g.io.Out, g.io.ErrOut, o.stat, view)
	}
	if err := t.review.Diff(ctx, g.io.Out, g.io.ErrOut, o.stat, view); err != nil {
		return err
	}
	// After the diff, on stderr: `lazaret diff > x.patch` stays a patch.
	flags, err := t.review.Flags(ctx)
	if err != nil {
		return fmt.Errorf("reviewing what a merge would plant: %w", err)
	}
	writeFlags(g.io.ErrOut, "a merge of this branch would plant", flags)
	return nil
}

// writeFlags lists what a merge plants, the agent's names escaped
// (visible.Escape: no control, bidi or invisible character reaches the
// terminal as itself).
func writeFlags(w io.Writer, title string, flags []review.Flag) {
	if len(flags) == 0 {
		return
	}
	fmt.Fprintf(w, "lazaret: %s (review before merging):\n", title)
	for _, f := range flags {
		line := fmt.Sprintf("  %-18s %s", f.Kind, visible.Escape(f.Path, visible.GoForm))
		if f.Kind == review.FlagExternalSymlink {
			line += " -> " + visible.Escape(f.Detail, visible.GoForm)
		} else if f.Detail != "" {
			line += "  (" + visible.Escape(f.Detail, visible.GoForm) + ")"
		}
		fmt.Fprintln(w, line)
	}
}

// gitPreflight runs before a session starts the sandbox (exec, shell): a
// branch-mode start that would fail (no commits yet) fails here with its
// hint, and the one-time notice that uncommitted host changes are not in
// the agent's clone reaches the user's terminal (the coordinator that
// makes the clone only has a log file).
func (g *globalOptions) gitPreflight(ctx context.Context, p *config.Profile, a *domain.Anchor) error {
	notice, err := review.Preflight(ctx, g.hostGit(), a, p.GitMode)
	if err != nil {
		return err
	}
	if notice != "" && !p.WithChanges {
		// The notice names paths of the repository: shown escaped.
		fmt.Fprintf(g.io.ErrOut, "lazaret: %s\n", visible.Line(notice))
	}
	return nil
}
