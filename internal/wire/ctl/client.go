package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"

	"github.com/lazaret-dev/lazaret/internal/version"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// Client is the CLI's end of a control connection: one typed method per
// request the CLI sends the coordinator (Status, ExecSpec, GitSync, Stop,
// RegisterEscalation, and the audit requests in audit.go). Wire errors
// come back as the coordinator's *Error, so errors.Is matches the
// sentinels (ErrUnknownType from a coordinator without that request,
// ErrClosed when the connection ended).
type Client struct {
	conn *Conn
	// Reply is the coordinator's answer to the hello.
	Reply HelloReply
	h     handlers
	log   *slog.Logger
}

// NewClient returns a Client to register push handlers on before Connect.
func NewClient(log *slog.Logger) *Client {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{log: log}
}

// Handle registers f for messages the coordinator pushes with type typ
// (requests get f's result as their reply).
func (c *Client) Handle(typ string, f HandlerFunc) { c.h.set(typ, f) }

// Connect dials the control socket at path and performs the hello. It
// returns a *net.OpError wrapping ECONNREFUSED or ENOENT when nothing
// listens there, an *APIMismatchError when the coordinator speaks another
// protocol version, and the coordinator's *Error when it refuses the hello
// (ErrShuttingDown, or why the sandbox could not start).
func (c *Client) Connect(ctx context.Context, path string, h Hello) error {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return err
	}
	conn := NewConn(nc, c.log)
	go conn.Serve(dispatchTo(&c.h))
	h.API = version.APIVersion
	if h.Version == "" {
		h.Version = version.Version
	}
	var reply HelloReply
	if err := conn.Call(ctx, TypeHello, h, &reply); err != nil {
		conn.Close()
		var we *Error
		if errors.As(err, &we) && we.Code == ErrAPIMismatch.Code {
			var d struct {
				API int `json:"api"`
			}
			_ = json.Unmarshal(we.Data, &d)
			return &APIMismatchError{Coordinator: d.API, Client: version.APIVersion}
		}
		return err
	}
	if reply.API != version.APIVersion {
		conn.Close()
		return &APIMismatchError{Coordinator: reply.API, Client: version.APIVersion}
	}
	c.conn = conn
	c.Reply = reply
	return nil
}

// call sends one request on the connection (ErrClosed before Connect).
func (c *Client) call(ctx context.Context, typ string, req, resp any) error {
	if c.conn == nil {
		return ErrClosed
	}
	return c.conn.Call(ctx, typ, req, resp)
}

// Close ends the connection; pending calls fail with ErrClosed.
func (c *Client) Close() error {
	if c.conn == nil {
		return nil
	}
	return c.conn.Close()
}

// Done is closed when the connection has ended.
func (c *Client) Done() <-chan struct{} { return c.conn.Done() }

// Err is why the connection ended (io.EOF for a clean close by the
// coordinator).
func (c *Client) Err() error { return c.conn.Err() }

// Status asks for the coordinator's view of its domain.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.call(ctx, TypeStatus, nil, &st)
	return st, err
}

// ExecSpec asks how to run a command for the attached session req names.
func (c *Client) ExecSpec(ctx context.Context, req ExecSpecRequest) (ExecSpec, error) {
	var spec ExecSpec
	err := c.call(ctx, TypeExecSpec, req, &spec)
	return spec, err
}

// GitSync asks for one ref sync of the agent clone to the host and
// returns once it is done.
func (c *Client) GitSync(ctx context.Context) error {
	return c.call(ctx, TypeGitSync, nil, nil)
}

// Stop asks for a clean teardown and returns once the sandbox is gone.
// The zero StopRequest (a `lazaret stop`) is sent without a payload.
func (c *Client) Stop(ctx context.Context, req StopRequest) error {
	var payload any
	if req != (StopRequest{}) {
		payload = req
	}
	return c.call(ctx, TypeStop, payload, nil)
}

// RegisterEscalation registers the attached session's Session Anchor
// public key for Host Escalation (escprompt.TypeRegister). A coordinator
// whose escalation is disabled answers ErrUnknownType.
func (c *Client) RegisterEscalation(ctx context.Context, req escprompt.RegisterRequest) (escprompt.RegisterReply, error) {
	var reply escprompt.RegisterReply
	err := c.call(ctx, escprompt.TypeRegister, req, &reply)
	return reply, err
}
