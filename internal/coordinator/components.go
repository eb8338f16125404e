package coordinator

import (
	"context"
	"log/slog"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/coordinator/escalation"
	"github.com/lazaret-dev/lazaret/internal/coordinator/gitsentry"
	"github.com/lazaret-dev/lazaret/internal/coordinator/limits"
	"github.com/lazaret-dev/lazaret/internal/coordinator/sandbox"
	"github.com/lazaret-dev/lazaret/internal/coordinator/sidecar"
	"github.com/lazaret-dev/lazaret/internal/coordinator/stateanchor"
	"github.com/lazaret-dev/lazaret/internal/engine/approvals"
	"github.com/lazaret-dev/lazaret/internal/engine/audit"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/eschost"
	"github.com/lazaret-dev/lazaret/internal/engine/events"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// Deps is what the sandbox components are built from.
type Deps struct {
	Config  *config.Config
	Profile *config.Profile
	Anchor  *domain.Anchor
	Podman  *podman.Client
	// Server is the control socket: components register their message
	// handlers on it (Server.Handle) and push to one CLI session with
	// Server.Session(id).Call / Notify.
	Server *ctlserver.Server
	Log    *slog.Logger
	// Audit appends to the domain's audit trail (the state store).
	Audit func(context.Context, audit.Entry) (uint64, error)
	// Secrets are the profile's secrets with their values (netd's).
	Secrets *sidecar.Secrets
	// SpareExpiry is how long a spare network sidecar waits for the
	// domain's next start (spare.go); zero: none is left.
	SpareExpiry time.Duration
	// Events is the sandbox's event stream, Approvals its pending
	// requests (nil in tests that need neither).
	Events    *events.Hub
	Approvals *approvals.Hub
}

// components returns the sandbox components of a domain in the order they
// are prepared (they are closed in reverse). Each part of lazaret adds one
// line here.
func components(d *Deps) []sandbox.Component {
	return []sandbox.Component{
		// In this order: each Prepare sees the spec its predecessors
		// changed (network sidecar, State Anchor, Git Sentry, escalation).
		withDenials(d, sidecar.NewComponent(d.Profile, d.Anchor, d.Podman, d.Log).WithSecrets(d.Secrets).WithSpares(d.SpareExpiry)),
		stateanchor.NewComponent(d.Profile, d.Anchor, d.Podman, d.Log),
		gitsentry.New(d.Anchor, d.Profile.GitMode, d.Podman, d.Log).WithAudit(d.Audit).WithIsolation(d.Config.Escalation.Enabled).WithHostChanges(d.Profile.WithChanges),
		withProposals(d, escalation.FromConfig(d.Config, d.Anchor, d.Server, eschost.EntryAuditor(d.Audit), d.Log).
			WithApprovals(d.Approvals, d.Config.Escalation.PendingTimeout)),
		// Last, so that its BeforeStop (reverse order) resumes a paused
		// sandbox before the others need it.
		limits.New(limits.Options{Profile: d.Profile, Anchor: d.Anchor, EscalationEnabled: d.Config.Escalation.Enabled,
			Podman: d.Podman, Server: d.Server, Audit: d.Audit, Log: d.Log}),
	}
}

// ExecEnver is implemented by a component that adds environment variables
// to every `podman exec` of a session (for example escalation credentials
// delegated to that session).
type ExecEnver interface {
	ExecEnv(ctx context.Context, session *ctlserver.Session, req *ctl.ExecSpecRequest) (map[string]string, error)
}

// Syncer is implemented by a component that syncs on demand (the Git
// Sentry brings the agent's commits to the host: ctl.TypeGitSync).
type Syncer interface {
	SyncNow(ctx context.Context) error
}

// SpareStarter is implemented by a component that leaves something ready
// for the domain's next start when a sandbox ends normally (the network
// sidecar leaves a spare): called at teardown, after every Close.
// RemoveSpare removes it again (a stop came meanwhile).
type SpareStarter interface {
	// HandOverToSpare, called before Close when a spare will be started,
	// lets Close leave what StartSpare replaces anyway.
	HandOverToSpare()
	StartSpare(ctx context.Context) error
	RemoveSpare(ctx context.Context) error
}

// BeforeStopper is implemented by a component that needs the running
// container once more at teardown, before it is removed (the Git Sentry
// syncs the agent's last commits).
type BeforeStopper interface {
	BeforeStop(ctx context.Context)
}

// LimitsReporter is implemented by the component that enforces the
// resource limits: the usage against each, for lazaret status.
type LimitsReporter interface {
	Status() *ctl.LimitsStatus
}

// StopReasoner is an error of a Watcher that is the whole teardown reason
// every session is told (a resource limit that stopped the sandbox), not
// a component's failure.
type StopReasoner interface {
	StopReason() string
}
