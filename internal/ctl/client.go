package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"

	"github.com/lazaret-dev/lazaret/internal/version"
)

// Client is the CLI's end of a control connection.
type Client struct {
	*Conn
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
	conn := newConn(nc, c.log)
	conn.dispatch = dispatchTo(&c.h, func(m *Message) *Request {
		return &Request{Type: m.Type, Payload: m.Payload, Conn: conn}
	})
	go conn.readLoop(newReader(nc))
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
	c.Conn = conn
	c.Reply = reply
	return nil
}
