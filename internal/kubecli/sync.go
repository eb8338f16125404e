package kubecli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
	"github.com/lazaret-dev/lazaret/internal/locate"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

func newSyncCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "sync [PROFILE]",
		Short: "Bring the agent's branches from the cluster sandbox into your repository",
		Long: `Bring the branches of the cluster sandbox of PROFILE for this directory into the
host repository as lazaret/agent-<profile> and refs/lazaret/<profile>/heads/*:
the objects come out of the pod as a bundle, host git verifies every one,
and only lazaret's refs move. A command's end syncs too.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := g.runSync(cmd.Context(), firstArg(args), true)
			return err
		},
	}
}

// runSync syncs the running sandbox of profile for this workspace; with
// report it says what moved. It reports whether a sandbox was there.
func (g *globals) runSync(ctx context.Context, profile string, report bool) (bool, error) {
	cfg, c, t, err := g.clientFor(profile)
	if err != nil {
		return false, err
	}
	gt, err := g.gitTarget(ctx, cfg, t)
	if err != nil {
		return false, err
	}
	if gt == nil {
		return false, clicore.UsageError{Err: fmt.Errorf("workspace %s is not in branch mode: nothing to sync", visible.Line(t.workspace))}
	}
	claim, err := c.Claim(ctx, kubespec.ClaimName(t.hash))
	if errors.Is(err, kube.ErrNotFound) || (err == nil && claim.Status.Sandbox.Name == "") {
		if report {
			fmt.Fprintf(g.io.Out, "profile %s: no running sandbox for %s; the host has what the last sync brought\n", t.profile.Name, visible.Line(t.workspace))
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	r, err := g.podOf(ctx, c, claim)
	if err != nil {
		return false, err
	}
	res, err := g.sync(ctx, c, r.pod, gt)
	if err != nil {
		return true, err
	}
	if report {
		fmt.Fprintf(g.io.Out, "synced from pod %s: %d ref(s) updated, %d deleted, %d branch(es) skipped\n",
			visible.Line(r.pod), len(res.Updated), len(res.Deleted), len(res.Skipped))
	}
	return true, nil
}

// newReviewCmd is a host-side review verb (diff, log, merge,
// reset-branch): the running sandbox's branches are synced first, then
// the local lazaret runs the verb on the host repository, exactly as for
// a local sandbox (its host git, its review flags).
func newReviewCmd(g *globals, verb, short string) *cobra.Command {
	cmd := &cobra.Command{
		Use:                verb + " [PROFILE] [FLAGS]",
		Short:              short + " (after syncing the cluster sandbox)",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			profile := ""
			if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
				profile = args[0]
			}
			if _, err := g.runSync(cmd.Context(), profile, false); err != nil {
				g.log.Warn("showing what the host has: the sync failed", "err", err)
			}
			return g.execLocal(append([]string{verb}, args...))
		},
	}
	return cmd
}

// newLocalCmd is a verb the local lazaret answers from the host alone
// (the audit trail of the Domain Anchor, which the cluster backend writes
// too).
func newLocalCmd(g *globals, verb, short string) *cobra.Command {
	return &cobra.Command{
		Use:                verb + " [ARGS]",
		Short:              short,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.execLocal(append([]string{verb}, args...))
		},
	}
}

// execLocal replaces this process with the local lazaret running args,
// with this invocation's --config and --workspace.
func (g *globals) execLocal(args []string) error {
	path, err := locate.Find(locate.Lazaret)
	if err != nil {
		return setupError{err, "install lazaret beside lazaret-kube (`make install`)"}
	}
	argv := []string{"lazaret"}
	if g.configPath != "" {
		argv = append(argv, "--config", g.configPath)
	}
	if g.workspace != "" {
		argv = append(argv, "--workspace", g.workspace)
	}
	if g.attempt != "" {
		argv = append(argv, "--attempt", g.attempt)
	}
	env := append(os.Environ(), "LAZARET_BACKEND=podman")
	if err := syscall.Exec(path, append(argv, args...), env); err != nil {
		return fmt.Errorf("running %s: %w", path, err)
	}
	return nil
}

func firstArg(args []string) string {
	if len(args) > 0 {
		return args[0]
	}
	return ""
}
