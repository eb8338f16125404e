package kubecli

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/approvals"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/events"
	"github.com/lazaret-dev/lazaret/internal/engine/notify"
	"github.com/lazaret-dev/lazaret/internal/version"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// A cluster session's process is its coordinator (docs/KUBERNETES.md,
// "Kept sessions, approvals and events"): it holds the session's event
// stream, its pending approvals and its notifiers, as the local
// coordinator holds a sandbox's, and serves them on a control socket of
// its own (the same ctl protocol and peer-credential check as the
// coordinator's; domain.KubeSessionSocket), which `lazaret approvals` and
// `lazaret events` find.

// sessionHub is one cluster session's hubs and control socket.
type sessionHub struct {
	events    *events.Hub
	approvals *approvals.Hub
	srv       *ctlserver.Server
	sock      string
	timeout   time.Duration
	// status is the session's Status without its changing fields.
	status     ctl.Status
	stopNotify func()
	served     chan struct{}
	// streams counts the event streams being delivered (close lets them
	// deliver session.ended, bounded by streamDrain).
	streams sync.WaitGroup

	mu       sync.Mutex
	id       string
	command  []string
	kept     bool
	attached bool
	closing  bool
	once     sync.Once
}

// openSessionHub makes the session's hubs, starts its notifiers and
// listens on its control socket (id names it). Nothing outlives an
// error.
func (g *globals) openSessionHub(cfg *config.Config, t *target, id string, command []string, tty bool) (*sessionHub, error) {
	rt, err := domain.RuntimeDir()
	if err != nil {
		return nil, err
	}
	if err := domain.EnsurePrivateDir(domain.KubeSessionDir(rt)); err != nil {
		return nil, err
	}
	h := &sessionHub{sock: domain.KubeSessionSocket(rt, id), id: id, command: command, timeout: cfg.Escalation.PendingTimeout,
		served: make(chan struct{})}
	ln, err := ctlserver.Listen(h.sock)
	if err != nil {
		return nil, err
	}
	h.events = events.New(t.profile.Name, t.workspace)
	h.approvals = approvals.New(h.events, cfg.Escalation.AnswerFrom)
	h.status = ctl.Status{Domain: t.hash, Profile: t.profile.Name, Workspace: t.workspace, PID: os.Getpid(),
		Version: version.Version, Started: time.Now(),
		Sessions: []ctl.SessionStatus{{SessionInfo: ctl.SessionInfo{ID: id, PID: os.Getpid(), Profile: t.profile.Name, TTY: tty, Command: command}, PeerPID: os.Getpid(), Attached: time.Now()}}}
	h.srv = ctlserver.NewServer(g.uid, g.log)
	for typ, f := range h.approvals.Handlers(t.profile.Name, t.workspace) {
		h.srv.Handle(typ, f)
	}
	h.srv.Handle(ctl.TypeStatus, func(context.Context, *ctlserver.Request) (any, error) { return h.statusNow(), nil })
	h.srv.Handle(ctl.TypeEventsSubscribe, h.subscribe)
	if cfg.Notify.Any() {
		h.stopNotify = notify.Start(context.Background(), cfg.Notify, h.events, g.log)
	}
	go func() {
		defer close(h.served)
		if err := h.srv.Serve(ln); err != nil {
			g.log.Warn("control socket", "err", err)
		}
	}()
	h.events.Publish(ctl.Event{Kind: ctl.EventSessionStarted, Session: id})
	return h, nil
}

// setPod names the session's pod in its status.
func (h *sessionHub) setPod(pod string) {
	h.mu.Lock()
	h.status.Container = ctl.ContainerStatus{Name: "pod/" + pod, Runtime: "kubernetes", State: "running"}
	h.mu.Unlock()
}

// linkState records whether the link to the pod is lost (the session
// goes on there): ps shows it, the pod's container state says it.
func (h *sessionHub) linkState(lost bool) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.status.Container.State = "running"
	if lost {
		h.status.Container.State = linkLostState + " " + time.Now().Format("15:04")
	}
}

// linkLostState begins the pod's state while its link is lost.
const linkLostState = "link lost since"

// session is the session's id and command, for its pending requests.
func (h *sessionHub) session() (string, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.id, h.command
}

// statusNow is the session's Status with its pending requests and kept
// state.
func (h *sessionHub) statusNow() *ctl.Status {
	h.mu.Lock()
	st := h.status
	st.Sessions = append([]ctl.SessionStatus(nil), h.status.Sessions...)
	st.Sessions[0].Kept, st.Sessions[0].Detached = h.kept, h.kept && !h.attached
	h.mu.Unlock()
	st.Uptime = ctl.Duration(time.Since(st.Started))
	st.Sessions[0].Pending = h.approvals.PendingOf(st.Sessions[0].ID)
	return &st
}

// keptState publishes what a kept session's keeper reports, as the
// coordinator does (session.detached/attached, agent.attention).
func (h *sessionHub) keptState(st clicore.KeptState) {
	if st.Attention {
		h.events.Publish(ctl.Event{Kind: ctl.EventAgentAttention, Session: h.id})
		return
	}
	h.mu.Lock()
	known, changed := h.kept, h.attached != st.Attached
	h.kept, h.attached = true, st.Attached
	h.mu.Unlock()
	if (!known && !st.Attached) || (known && changed) {
		kind := ctl.EventSessionDetached
		if st.Attached {
			kind = ctl.EventSessionAttached
		}
		h.events.Publish(ctl.Event{Kind: kind, Session: h.id})
	}
}

// subscribe streams the session's events after Since on the request's
// connection, in order (each a TypeEvent request, the next after its
// reply); the stream ends with the session.
func (h *sessionHub) subscribe(_ context.Context, r *ctlserver.Request) (any, error) {
	var req ctl.EventsSubscribe
	if err := r.Decode(&req); err != nil {
		return nil, err
	}
	conn := r.Conn
	// Counted under mu before close's wait begins, never beside it.
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		return nil, ctl.ErrShuttingDown
	}
	h.streams.Add(1)
	h.mu.Unlock()
	h.events.Stream(conn, req.Since, h.streams.Done)
	return struct{}{}, nil
}

// streamDrain bounds the wait for subscribers to receive session.ended.
const streamDrain = 2 * time.Second

// close publishes session.ended, lets the notifiers send it (their
// bounded drain), and removes the control socket.
func (h *sessionHub) close() {
	if h == nil {
		return
	}
	h.once.Do(func() {
		h.events.Publish(ctl.Event{Kind: ctl.EventSessionEnded, Session: h.id})
		h.mu.Lock()
		h.closing = true
		h.mu.Unlock()
		h.events.Close()
		drained := make(chan struct{})
		go func() { h.streams.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(streamDrain):
		}
		_ = h.srv.Close()
		<-h.served
		_ = os.Remove(h.sock)
		if h.stopNotify != nil {
			h.stopNotify()
		}
	})
}
