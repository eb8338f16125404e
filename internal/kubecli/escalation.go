package kubecli

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"path"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/eschost"
	"github.com/lazaret-dev/lazaret/internal/engine/session"
	"github.com/lazaret-dev/lazaret/internal/engine/trust"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
	"github.com/lazaret-dev/lazaret/internal/wire/escrelay"
)

// Host Escalation of a cluster sandbox, one per lazaret-kube shell/exec
// (docs/KUBERNETES.md, "Host Escalation"): this process is the session's
// coordinator. The pod's init container put the client, read-only, at
// /run/lazaret/bin (internal/engine/netdpod). It makes a Trust Anchor in memory, starts the relay
// (`lazaret-escalate-go __relay DIR`) in the agent container through the
// API server's exec, serves the connections the relay carries with the
// shared escalation server (internal/escalation: the same verification,
// replay check, auto-approve policy, executor and audit as locally), and
// runs the session's command under the holder in --stdin mode, which
// receives the session's delegation on its stdin once it is non-dumpable.

// escRunDir is where each session's relay directory lives in the pod.
const escRunDir = "/run/lazaret/kube"

// relayStartTimeout bounds the wait for the relay's socket.
const relayStartTimeout = 30 * time.Second

// escSession is Host Escalation for one session.
type escSession struct {
	// id is the session's id (its Session Anchor's).
	id    string
	dir   string
	frame []byte
	// public is the Session Anchor's public key; resumed is a session
	// taken back, whose holder has its delegation (no frame).
	public  ed25519.PublicKey
	resumed bool
	// ready is closed when the holder's HolderReady marker was seen.
	ready  chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	// host is the relay's host end; stop ends its re-linking, links is
	// closed when that has stopped.
	host  *escrelay.Host
	stop  chan struct{}
	links chan struct{}
}

// startEscalation sets Host Escalation up for one session in pod, or
// returns nil when the configuration turns it off. A resumed session's
// (resumed non-nil) keeps its id and public key: its holder in the pod
// has its delegation already, and has it only when the record has a key.
// Nothing it started outlives an error.
func (g *globals) startEscalation(ctx context.Context, cfg *config.Config, c *kube.Client, t *target, pod string, command []string, ask escprompt.Prompter, id string, hub *sessionHub, resumed *resumeRecord) (*escSession, error) {
	if !cfg.Escalation.Enabled || (resumed != nil && len(resumed.Public) == 0) {
		return nil, nil
	}
	began := time.Now()
	anchor, err := trust.NewMemory(t.profile.Name, t.hash)
	if err != nil {
		return nil, err
	}
	var public ed25519.PublicKey
	var frame []byte
	if resumed != nil {
		public = resumed.Public
	} else {
		sess, err := session.New()
		if err != nil {
			return nil, err
		}
		sess.ID = id // the session's own id (its control socket's, ps's), before any delegation names it
		del, err := sess.Delegate(t.hash, session.DefaultDelegationTTL, time.Now())
		if err != nil {
			return nil, err
		}
		if frame, err = del.StdinFrame(); err != nil {
			return nil, err
		}
		public = sess.Public
	}
	reg := eschost.NewRegistry()
	// Without a terminal (ask nil) a request that is not auto-approved is
	// denied and audited, as locally.
	if _, err := reg.Register(&eschost.Session{ID: id, Public: public, Prompt: ask,
		Command: command, PID: os.Getpid(), Started: time.Now()}); err != nil {
		return nil, err
	}
	home, _ := os.UserHomeDir()
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	policy := &eschost.Policy{AutoApprove: cfg.Escalation.AutoApprove, Path: escprompt.SafePath(os.Getenv("PATH")), Workspace: t.workspace}
	srv := eschost.NewServer(eschost.Config{
		Profile: t.profile.Name, SandboxID: t.hash, Workspace: t.workspace, Registry: reg, Policy: policy,
		Executor: &eschost.Executor{Env: eschost.MinimalEnv(os.Getenv("PATH"), home, os.Getenv("LANG"))},
		Auditor:  eschost.EntryAuditor(g.auditTo(cfg, t)), Log: g.log,
		Proposals: g.sessionProposals(sctx, cfg, t, policy, c, pod, hub),
	}, anchor.ServerConfig())
	e := &escSession{id: id, public: public, resumed: resumed != nil, dir: path.Join(escRunDir, id), frame: frame, ready: make(chan struct{}), done: make(chan struct{}),
		stop: make(chan struct{}), links: make(chan struct{})}
	e.cancel = cancel
	host, err := g.startRelay(sctx, c, pod, e.dir, anchor, e.stop, e.links)
	if err != nil {
		cancel()
		return nil, err
	}
	e.host = host
	g.log.Debug("escalation relay ready", "took", time.Since(began).Round(time.Millisecond))
	go func() {
		defer close(e.done)
		if err := srv.Serve(sctx, host); err != nil {
			g.log.Warn("escalation server", "err", err)
		}
	}()
	return e, nil
}

// startRelay links to the relay in pod (relaylink.go) and returns its
// host end once the relay listens; the links and the rotation stop with
// ctx or stop.
func (g *globals) startRelay(ctx context.Context, c *kube.Client, pod, dir string, anchor *trust.Memory, stop <-chan struct{}, links chan<- struct{}) (*escrelay.Host, error) {
	bundle, err := anchor.ClientBundle()
	if err != nil {
		return nil, err
	}
	host := escrelay.NewHost()
	if err := host.SetBundle(bundle); err != nil {
		return nil, fmt.Errorf("escalation relay: %w", err)
	}
	if err := g.relayLinks(ctx, c, pod, dir, host, stop, links); err != nil {
		return nil, err
	}
	go g.rotate(ctx, host, anchor)
	return host, nil
}

// rotate sends a fresh client bundle at half its lifetime.
func (g *globals) rotate(ctx context.Context, host *escrelay.Host, anchor *trust.Memory) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(anchor.Lifetime() / 2):
		}
		b, err := anchor.ClientBundle()
		if err == nil {
			err = host.SetBundle(b)
		}
		if err != nil {
			g.log.Warn("escalation: rotating the client certificate", "err", err)
		}
	}
}

// logWriter sends the relay's stderr to the debug log.
type logWriter struct{ g *globals }

func (w logWriter) Write(p []byte) (int, error) {
	w.g.log.Debug("escalation relay", "stderr", string(p))
	return len(p), nil
}

// wrap runs command under the session holder in --stdin mode, pointed at
// the session's relay.
func (e *escSession) wrap(command []string) []string {
	argv := []string{escrelay.BinFrontEnd, session.HolderVerb, session.HolderStdinFlag, "--path-append", escrelay.BinDir,
		"--env", escrelay.EnvGoClient + "=" + escrelay.BinGoClient,
		"--env", escrelay.EnvSocket + "=" + path.Join(e.dir, escrelay.Socket),
		"--env", escrelay.EnvTLSDir + "=" + path.Join(e.dir, escrelay.TLSDir)}
	return append(append(argv, "--"), command...)
}

// close stops the server (commands in flight are killed) and, with
// relay, the relay in the pod.
func (e *escSession) close(relay bool) {
	if e == nil {
		return
	}
	close(e.stop)
	if relay {
		// End first, on the link that is up: the relay in the pod removes
		// its directory and exits. Without a link it waits there until the
		// pod goes.
		e.host.End()
		select {
		case <-e.links:
		case <-time.After(endWait):
		}
	}
	e.cancel()
	<-e.done
}
