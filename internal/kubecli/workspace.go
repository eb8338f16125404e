package kubecli

import (
	"errors"
	"fmt"

	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/attempt"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/exitcode"
)

// target is one Domain Anchor on the cluster: a profile and the canonical
// workspace, and its hash (the claim's name); for an attempt (--attempt,
// `lazaret fork`) the attempt's name and its own hash, so that its claim,
// PVC, Trust Anchor, session keys and agent branch are its own.
type target struct {
	profile   *config.Profile
	workspace string
	hash      string
	attempt   string
}

// resolve picks the profile (empty: "default") and the workspace
// (--workspace, else the current directory or, outside direct mode, the
// top level of the user's git repository around it): clicore's
// resolution, the local CLI's, so that a directory's Domain Anchor (the
// claim's name, the audit trail `lazaret audit` reads, the review verbs
// handed to the local CLI) does not depend on the backend. With
// --attempt the target is that attempt of the workspace, which must
// exist (its record on this machine) and be a cluster one.
func (g *globals) resolve(cfg *config.Config, profile string) (*target, error) {
	p, err := clicore.Profile(cfg, profile)
	if err != nil {
		return nil, err
	}
	ws, err := clicore.Workspace(cfg, p, g.workspace, g.log)
	if err != nil {
		return nil, err
	}
	t := &target{profile: p, workspace: ws, hash: domain.Hash(p.Name, ws)}
	if g.attempt == "" {
		return t, nil
	}
	parent, err := g.anchorOf(cfg, t)
	if err != nil {
		return nil, err
	}
	a, err := openClusterAttempt(parent, g.attempt)
	if err != nil {
		return nil, err
	}
	t.attempt, t.hash = a.Attempt, a.Hash
	return t, nil
}

// anchorOf is t's Domain Anchor on this machine (its audit trail, an
// attempt's record).
func (g *globals) anchorOf(cfg *config.Config, t *target) (*domain.Anchor, error) {
	a, err := clicore.Anchor(cfg, t.profile, t.workspace)
	if err != nil || t.attempt == "" {
		return a, err
	}
	return a.ForAttempt(t.attempt)
}

// attemptsHint is the way to the attempts of a workspace.
const attemptsHint = "`" + invocation + " attempts` lists this workspace's cluster attempts; `" + invocation + " fork NAME` makes one"

// openClusterAttempt is attempt name of parent's workspace, which must
// exist and have been made by lazaret-kube: an unknown, invalid or local
// one is a usage error naming it.
func openClusterAttempt(parent *domain.Anchor, name string) (*domain.Anchor, error) {
	a, err := parent.ForAttempt(name)
	if err != nil {
		return nil, clicore.UsageError{Err: fmt.Errorf("--attempt: %w", err)}
	}
	r, err := attempt.Read(a)
	if errors.Is(err, attempt.ErrNotFound) {
		return nil, clicore.WithHint(err, exitcode.Usage, attemptsHint)
	}
	if err != nil {
		return nil, err
	}
	if r.Backend != attempt.BackendKubernetes {
		return nil, clicore.WithHint(fmt.Errorf("attempt %q of profile %s is a local attempt, not a cluster one", name, parent.Profile), exitcode.Usage,
			"work in it with the local backend (`lazaret --backend podman shell --attempt "+name+"`); "+attemptsHint)
	}
	return a, nil
}
