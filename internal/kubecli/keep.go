package kubecli

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/clicore"
)

// Kept cluster sessions: the same keeper as the local CLI's
// (clicore.RunKept, clicore/keeper), on the user's machine. It holds the
// terminal of this process's inner copy, which holds the exec through
// the API server; the pod runs on whatever the keeper does.

// backendName is the keeper's Info.Backend of a cluster session.
const backendName = "kubernetes"

// keptSession resolves r's target (a mistake is one line, no keeper
// spawned) and runs this command line under a keeper.
func (g *globals) keptSession(ctx context.Context, r sessionRequest, detach bool) error {
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	t, err := g.resolve(cfg, r.profile)
	if err != nil {
		return err
	}
	return clicore.RunKept(ctx, clicore.KeepRequest{IO: g.io, Config: cfg, Profile: t.profile.Name, Workspace: t.workspace,
		Backend: backendName, Invocation: invocation, Detach: detach, Inner: os.Args[1:]})
}

// errDetachNeedsTTY: a detached command runs on the keeper's terminal.
var errDetachNeedsTTY = clicore.UsageError{Err: errors.New("exec --detach: needs -t (a detached command runs on a terminal the session keeper holds)")}

func newAttachCmd(g *globals) *cobra.Command {
	return clicore.Verb("attach", &cobra.Command{
		Short: "Attach this terminal to a kept cluster session (a detached shell)",
		Long:  clicore.AttachLong,
		RunE:  func(cmd *cobra.Command, args []string) error { return g.runAttach(cmd.Context(), args) },
	})
}

func (g *globals) runAttach(ctx context.Context, args []string) error {
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	profile, prefix := clicore.AttachArgs(cfg, args)
	list, err := clicore.KeptList(backendName)
	if err != nil {
		return err
	}
	workspace := ""
	if prefix == "" {
		t, err := g.resolve(cfg, profile)
		if err != nil {
			return err
		}
		profile, workspace = t.profile.Name, t.workspace
	}
	// A session whose lazaret-kube died is offered too: attaching takes
	// it back under a new keeper (resume.go).
	recs, err := resumables(cfg, list)
	if err != nil {
		return err
	}
	byID := map[string]*resumeRecord{}
	for _, r := range recs {
		list = append(list, r.info())
		byID[r.Session] = r
	}
	i, err := clicore.ChooseKept(list, invocation, profile, workspace, prefix)
	if err != nil {
		return err
	}
	if r := byID[i.Session]; r != nil && i.Socket == "" {
		return clicore.RunKept(ctx, clicore.KeepRequest{IO: g.io, Config: cfg, Profile: r.Profile, Workspace: r.Workspace,
			Backend: backendName, Invocation: invocation, Inner: r.innerArgs()})
	}
	return clicore.AttachKept(g.io, invocation, cfg, i)
}

// printKept lists this user's kept cluster sessions after ps's claims,
// with what each waits on (its pending requests, from its control
// socket).
func (g *globals) printKept(ctx context.Context) error {
	list, err := clicore.KeptList(backendName)
	if err != nil {
		return err
	}
	pending := map[string][]string{}
	if cfg, err := g.loadConfig(); err == nil {
		recs, _ := resumables(cfg, list)
		for _, r := range recs {
			list = append(list, r.info())
			pending[r.Session] = []string{"(its lazaret-kube ended: attach takes it back)"}
		}
	}
	if len(list) == 0 {
		return nil
	}
	socks, err := clicore.ControlSockets()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	for _, s := range socks {
		c, err := clicore.DialControl(ctx, s, g.log)
		if err != nil {
			continue
		}
		if st, err := c.Status(ctx); err == nil {
			for _, ss := range st.Sessions {
				pending[ss.ID] = ss.Pending
				if strings.HasPrefix(st.Container.State, linkLostState) {
					// What it waits on first: this machine's link to its pod.
					pending[ss.ID] = append([]string{"(" + st.Container.State + ")"}, ss.Pending...)
				}
			}
		}
		c.Close()
	}
	return clicore.PrintKept(g.io.Out, list, pending)
}
