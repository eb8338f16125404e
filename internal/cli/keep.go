package cli

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// kept reports whether this process is a kept session's CLI (the inner a
// keeper started): it runs the session itself and spawns no keeper.
func kept() bool { return clicore.Kept() }

// keptSession runs r through a session keeper (clicore.RunKept): the
// keeper runs this same command line as the session's CLI on a terminal
// of its own; this process attaches to it (a shell on a terminal) or,
// with detach, returns once the session reached its coordinator. What can
// be checked before anything starts (the configuration, the profile, the
// workspace) is checked here, so that a mistake is one line and nothing
// is spawned; a detached start's question is asked here too (nobody is at
// the keeper's terminal to answer it).
func keptSession(ctx context.Context, g *globalOptions, r sessionRequest, detach bool) error {
	if err := g.refuseRoot(); err != nil {
		return err
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	p, a, err := g.resolveDomain(cfg, r.profile, "")
	if err != nil {
		return err
	}
	var env []string
	if detach {
		if env, err = g.askBeforeDetach(ctx, p, a, r.choices); err != nil {
			return err
		}
	}
	return clicore.RunKept(ctx, clicore.KeepRequest{IO: g.io, Config: cfg, Profile: p.Name, Workspace: a.Workspace,
		Invocation: "lazaret", Detach: detach, Inner: os.Args[1:], Env: env})
}

// takeDirectConsent is the workspace a detached start's spawner got the
// direct-mode consent for ("" none, or not kept), taken out of the
// environment: no child inherits it.
func takeDirectConsent(kept bool) string {
	v := os.Getenv(envDirectConsent)
	_ = os.Unsetenv(envDirectConsent)
	if !kept {
		return ""
	}
	return v
}

// keeperLink is a kept session CLI's line to its keeper.
type keeperLink struct{ *clicore.KeeperLink }

// openKeeperLink returns the keeper's line when this process is kept, and
// takes the marker out of the environment: the coordinator and the
// commands this CLI starts are not kept sessions.
func openKeeperLink() *keeperLink {
	if l := clicore.OpenKeeperLink(); l != nil {
		return &keeperLink{l}
	}
	return nil
}

// sessionStateWait bounds one state report to the coordinator.
const sessionStateWait = 10 * time.Second

// started tells the keeper the session reached its coordinator, then
// passes each of the keeper's state lines on: to the session's link
// (prompts wait while nobody is attached) and to the coordinator
// (`lazaret ps`, the events).
func (k *keeperLink) started(s *session) {
	k.Started(s.link.SessionID(), func(ks clicore.KeptState) {
		st := ctl.SessionState{Kept: true, Attached: ks.Attached, Attention: ks.Attention}
		if !st.Attention {
			s.link.SetAttached(st.Attached) // a detached session's prompts wait as pending
		}
		ctx, cancel := context.WithTimeout(context.Background(), sessionStateWait)
		err := s.client.SessionState(ctx, st)
		cancel()
		if err != nil && !errors.Is(err, ctl.ErrUnknownType) {
			s.g.log.Debug("session state", "err", err)
		}
	})
}
