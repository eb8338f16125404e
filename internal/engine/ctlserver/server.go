// Package ctlserver is the server end of the control socket
// (internal/wire/ctl is the wire), the coordinator's and each lazaret-kube
// session process's: it accepts only its process's own user
// (SO_PEERCRED), runs the hello handshake, keeps the attached Client
// Sessions (the coordinator's references) and dispatches the CLI's
// requests to the handlers its process and components register.
package ctlserver

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/lazaret-dev/lazaret/internal/unixsock"
	"github.com/lazaret-dev/lazaret/internal/version"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// Request is a request or notification from a CLI, given to a handler.
// Session is the connection's attached session (nil for a connection that
// did not attach).
type Request struct {
	ctl.Request
	Session *Session
	// PeerPID and PeerUID are the connection's peer as the kernel reports
	// it (SO_PEERCRED): who answered a pending request, for the audit.
	PeerPID, PeerUID int
}

// HandlerFunc answers one request. Its result is encoded as the reply's
// payload; an error becomes the reply's Error (a *ctl.Error keeps its
// code, anything else is ctl.ErrInternal). ctx ends when the connection
// closes.
type HandlerFunc func(ctx context.Context, req *Request) (any, error)

var sessionIDRe = regexp.MustCompile(`^[0-9a-f]{32}$`)

// Session is an attached Client Session as the server sees it. Use Call
// and Notify to push messages to that one CLI.
type Session struct {
	ctl.SessionInfo
	// PeerPID is the CLI's pid as the kernel reports it (SO_PEERCRED),
	// which unlike SessionInfo.PID cannot be forged.
	PeerPID  int
	Attached time.Time
	conn     *ctl.Conn
}

// Call sends a request to the session's CLI and waits for its reply.
func (s *Session) Call(ctx context.Context, typ string, req, resp any) error {
	return s.conn.Call(ctx, typ, req, resp)
}

// Notify sends a notification to the session's CLI.
func (s *Session) Notify(typ string, payload any) error { return s.conn.Notify(typ, payload) }

// Done is closed when the session's connection ends.
func (s *Session) Done() <-chan struct{} { return s.conn.Done() }

// Server serves the control socket. Register handlers with Handle before
// Serve; set the hooks before Serve.
type Server struct {
	// Log receives connection-level events.
	Log *slog.Logger
	// UID is the only uid allowed to connect (checked with SO_PEERCRED).
	UID int
	// Hello, if set, runs for every hello after the API check and before
	// the reply; an error rejects the connection (the coordinator uses it
	// to wait until the sandbox is running, or to report why it is not).
	Hello func(ctx context.Context, h *ctl.Hello) (*ctl.HelloReply, error)
	// Attached runs when a session registers, before the hello reply; an
	// error rejects the hello. Detached runs when an attached session's
	// connection ends. They are how the coordinator counts references.
	Attached func(*Session) error
	Detached func(*Session)

	hmu      sync.RWMutex
	handlers map[string]HandlerFunc

	mu       sync.Mutex
	sessions map[string]*Session
	conns    map[*ctl.Conn]struct{}
	closed   bool
	ln       net.Listener
	wg       sync.WaitGroup
	// hs counts handshakes between reading a hello and writing its reply;
	// Close lets them finish so that a refusal (such as a start error)
	// reaches the client.
	hs sync.WaitGroup
}

// NewServer returns a Server that accepts only uid.
func NewServer(uid int, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{Log: log, UID: uid, handlers: map[string]HandlerFunc{}, sessions: map[string]*Session{}, conns: map[*ctl.Conn]struct{}{}}
}

// Handle registers f for requests and notifications of type typ.
func (s *Server) Handle(typ string, f HandlerFunc) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	s.handlers[typ] = f
}

// dispatch answers req from the handler of its type.
func (s *Server) dispatch(ctx context.Context, req *Request) (any, error) {
	s.hmu.RLock()
	f := s.handlers[req.Type]
	s.hmu.RUnlock()
	if f == nil {
		return nil, ctl.UnknownType(req.Type)
	}
	return f(ctx, req)
}

// Listen creates the control socket at path with mode 0600 (by chmod after
// bind, never through the process-wide umask: internal/unixsock); path is
// in the private runtime directory. A file already there is an error: the
// caller decides whether it is stale.
func Listen(path string) (*net.UnixListener, error) {
	ln, err := unixsock.Listen(path)
	if err != nil {
		return nil, err
	}
	// Unlinking is the coordinator's job, done after teardown.
	ln.SetUnlinkOnClose(false)
	return ln, nil
}

// Serve accepts connections until ln is closed or Close is called.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return net.ErrClosed
	}
	s.ln = ln
	s.mu.Unlock()
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(nc)
		}()
	}
}

func (s *Server) serveConn(nc net.Conn) {
	cred, err := unixsock.PeerCred(nc)
	if err != nil || int(cred.Uid) != s.UID {
		// Another user (or an unknown peer) never gets a byte back.
		if err == nil {
			s.Log.Warn("control socket: refused peer of another user", "uid", cred.Uid, "pid", cred.Pid)
		} else {
			s.Log.Warn("control socket: cannot read peer credentials", "err", err)
		}
		_ = nc.Close()
		return
	}
	c := ctl.NewConn(nc, s.Log)
	if !s.track(c) {
		return
	}
	defer s.untrack(c)
	m, err := c.ReadHello()
	if err != nil {
		return
	}
	if !s.beginHandshake() {
		c.Fail(ctl.ErrShuttingDown)
		return
	}
	sess, reply, herr := s.handshake(c, m, int(cred.Pid))
	if herr == nil && sess != nil {
		if herr = s.register(sess); herr != nil {
			sess = nil
		}
	}
	err = c.ReplyHello(m, reply, herr)
	s.hs.Done()
	if err != nil {
		if sess != nil {
			s.unregister(sess)
		}
		c.Fail(errors.New("handshake failed"))
		return
	}
	c.Serve(func(ctx context.Context, req *ctl.Request) (any, error) {
		return s.dispatch(ctx, &Request{Request: *req, Session: sess, PeerPID: int(cred.Pid), PeerUID: int(cred.Uid)})
	})
	if sess != nil {
		s.unregister(sess)
	}
}

// handshake checks the hello m (API version, session id) and runs the
// Hello hook; the reply's API is set by ctl.Conn.ReplyHello.
func (s *Server) handshake(c *ctl.Conn, m *ctl.Message, peerPID int) (*Session, *ctl.HelloReply, error) {
	h, err := ctl.DecodeHello(m)
	if err != nil {
		return nil, nil, err
	}
	var sess *Session
	if h.Session != nil {
		if !sessionIDRe.MatchString(h.Session.ID) {
			return nil, nil, ctl.Errorf(ctl.ErrBadRequest.Code, "hello: session id must be 32 lowercase hex characters")
		}
		sess = &Session{SessionInfo: *h.Session, PeerPID: peerPID, Attached: time.Now(), conn: c}
	}
	reply := &ctl.HelloReply{Version: version.Version, PID: os.Getpid()}
	if s.Hello != nil {
		r, err := s.Hello(c.Context(), h)
		if err != nil {
			return nil, nil, err
		}
		if r != nil {
			reply = r
		}
	}
	return sess, reply, nil
}

func (s *Server) beginHandshake() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.hs.Add(1)
	return true
}

func (s *Server) track(c *ctl.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Fail(ctl.ErrShuttingDown)
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c *ctl.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

func (s *Server) register(sess *Session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.sessions[sess.ID]; dup {
		return ctl.Errorf(ctl.ErrBadRequest.Code, "session %s is already attached", sess.ID)
	}
	// Attached runs under the lock so that registrations and the
	// coordinator's reference count change together.
	if s.Attached != nil {
		if err := s.Attached(sess); err != nil {
			return err
		}
	}
	s.sessions[sess.ID] = sess
	s.Log.Info("session attached", "session", sess.ID, "pid", sess.PeerPID, "tty", sess.TTY)
	return nil
}

func (s *Server) unregister(sess *Session) {
	s.mu.Lock()
	cur, ok := s.sessions[sess.ID]
	if !ok || cur != sess {
		s.mu.Unlock()
		return
	}
	delete(s.sessions, sess.ID)
	if s.Detached != nil {
		s.Detached(sess)
	}
	s.mu.Unlock()
	s.Log.Info("session detached", "session", sess.ID)
}

// Session returns the attached session id, or nil.
func (s *Server) Session(id string) *Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id]
}

// Sessions returns the attached sessions, oldest first.
func (s *Server) Sessions() []*Session {
	s.mu.Lock()
	list := make([]*Session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		list = append(list, sess)
	}
	s.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].Attached.Before(list[j].Attached) })
	return list
}

// Broadcast notifies every attached session.
func (s *Server) Broadcast(typ string, payload any) {
	for _, sess := range s.Sessions() {
		if err := sess.Notify(typ, payload); err != nil {
			s.Log.Debug("broadcast failed", "session", sess.ID, "err", err)
		}
	}
}

// handshakeGrace bounds how long Close waits for hello replies in flight.
const handshakeGrace = 2 * time.Second

// Close stops accepting, lets hello replies in flight be written (bounded
// by handshakeGrace), closes every connection and waits for their
// goroutines. Detached runs for every session still attached.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	ln := s.ln
	s.mu.Unlock()
	var err error
	if ln != nil {
		err = ln.Close()
	}
	hsDone := make(chan struct{})
	go func() { s.hs.Wait(); close(hsDone) }()
	select {
	case <-hsDone:
	case <-time.After(handshakeGrace):
	}
	s.mu.Lock()
	conns := make([]*ctl.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Fail(ctl.ErrShuttingDown)
	}
	s.wg.Wait()
	return err
}
