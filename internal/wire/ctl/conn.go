package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// writeTimeout bounds one write: a peer that stops reading must not block
// the coordinator.
const writeTimeout = 10 * time.Second

// Request is an incoming request or notification given to a handler.
type Request struct {
	Type    string
	Payload json.RawMessage
	// Conn is the connection it arrived on.
	Conn *Conn
}

// Decode unmarshals the payload into v; a bad payload is ErrBadRequest.
func (r *Request) Decode(v any) error {
	if len(r.Payload) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.Payload, v); err != nil {
		return Errorf(ErrBadRequest.Code, "%s: %v", r.Type, err)
	}
	return nil
}

// HandlerFunc answers one request. Its result is encoded as the reply's
// payload; an error becomes the reply's Error (an *Error keeps its code,
// anything else is ErrInternal). ctx ends when the connection closes.
type HandlerFunc func(ctx context.Context, req *Request) (any, error)

// handlers is a concurrency-safe handler registry.
type handlers struct {
	mu sync.RWMutex
	m  map[string]HandlerFunc
}

func (h *handlers) set(typ string, f HandlerFunc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]HandlerFunc{}
	}
	h.m[typ] = f
}

func (h *handlers) get(typ string) HandlerFunc {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.m[typ]
}

// Conn is one end of a control connection. It is symmetric: both ends can
// Call and Notify, and both dispatch incoming requests to handlers.
type Conn struct {
	nc  net.Conn
	log *slog.Logger

	// dispatch handles an incoming request; set before the read loop.
	dispatch func(ctx context.Context, req *Request) (any, error)
	// r reads the connection; the server's hello is read from it before
	// the read loop takes over (ReadHello, Serve).
	r *reader

	wmu sync.Mutex

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan *Message
	err     error

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// NewConn wraps one end of a control connection. The client's end is
// made by Client.Connect; the server (the coordinator's ctlserver) wraps
// each accepted connection, reads its hello (ReadHello), answers it
// (ReplyHello) and then serves it (Serve).
func NewConn(nc net.Conn, log *slog.Logger) *Conn {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Conn{nc: nc, log: log, r: newReader(nc), pending: map[uint64]chan *Message{}, ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// Context ends when the connection ends.
func (c *Conn) Context() context.Context { return c.ctx }

// Serve dispatches the connection's requests and notifications to
// dispatch (each in its own goroutine) and routes replies to their
// callers, until the connection ends.
func (c *Conn) Serve(dispatch func(ctx context.Context, req *Request) (any, error)) {
	c.dispatch = dispatch
	c.readLoop()
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the connection ended (io.EOF for a clean close by the peer).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection; pending calls fail with ErrClosed.
func (c *Conn) Close() error {
	c.Fail(ErrClosed)
	return nil
}

// Fail ends the connection with err as its Err; pending calls fail with
// ErrClosed.
func (c *Conn) Fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	c.cancel()
	_ = c.nc.Close()
	for _, ch := range pending {
		close(ch)
	}
	close(c.done)
}

func (c *Conn) write(m *Message) error {
	b, err := encode(m)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := c.nc.Write(b); err != nil {
		c.Fail(err)
		return fmt.Errorf("%w: %v", ErrClosed, err)
	}
	return nil
}

// Call sends a request of type typ with payload req and decodes the reply's
// payload into resp (which may be nil). A failed reply is returned as its
// *Error.
func (c *Conn) Call(ctx context.Context, typ string, req, resp any) error {
	payload, err := marshal(req)
	if err != nil {
		return err
	}
	ch := make(chan *Message, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return ErrClosed
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	if err := c.write(&Message{Type: typ, ID: id, Payload: payload}); err != nil {
		return err
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return ErrClosed
		}
		if m.Error != nil {
			return m.Error
		}
		if resp != nil && len(m.Payload) > 0 {
			if err := json.Unmarshal(m.Payload, resp); err != nil {
				return fmt.Errorf("control reply %s: %w", typ, err)
			}
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Notify sends a message that gets no reply.
func (c *Conn) Notify(typ string, payload any) error {
	p, err := marshal(payload)
	if err != nil {
		return err
	}
	return c.write(&Message{Type: typ, Payload: p})
}

func marshal(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	return json.Marshal(v)
}

// readLoop reads until the connection ends, routing replies to their
// callers and requests to dispatch (each in its own goroutine, so a slow
// handler such as a prompt never blocks the connection).
func (c *Conn) readLoop() {
	for {
		m, err := c.r.next()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				err = io.EOF
			}
			c.Fail(err)
			return
		}
		if m.Reply {
			c.mu.Lock()
			ch := c.pending[m.ID]
			c.mu.Unlock()
			if ch != nil {
				ch <- m
			}
			continue
		}
		go c.serve(m)
	}
}

func (c *Conn) serve(m *Message) {
	res, err := c.dispatch(c.ctx, &Request{Type: m.Type, Payload: m.Payload, Conn: c})
	if m.ID == 0 {
		if err != nil {
			c.log.Debug("control notification failed", "type", m.Type, "err", err)
		}
		return
	}
	reply := &Message{Type: m.Type, ID: m.ID, Reply: true}
	if err != nil {
		reply.Error = toWire(err)
	} else if reply.Payload, err = marshal(res); err != nil {
		reply.Error = Errorf(ErrInternal.Code, "encoding %s reply: %v", m.Type, err)
	}
	_ = c.write(reply)
}

func toWire(err error) *Error {
	var we *Error
	if errors.As(err, &we) {
		return we
	}
	var am *APIMismatchError
	if errors.As(err, &am) {
		data, _ := json.Marshal(map[string]int{"api": am.Coordinator})
		return &Error{Code: ErrAPIMismatch.Code, Message: am.Error(), Data: data}
	}
	return &Error{Code: ErrInternal.Code, Message: err.Error()}
}

// UnknownType is the reply to a request of a type that has no handler.
func UnknownType(typ string) *Error {
	return Errorf(ErrUnknownType.Code, "unknown control message type %q", typ)
}

func dispatchTo(h *handlers) func(context.Context, *Request) (any, error) {
	return func(ctx context.Context, req *Request) (any, error) {
		f := h.get(req.Type)
		if f == nil {
			return nil, UnknownType(req.Type)
		}
		return f(ctx, req)
	}
}
