package ctl

import (
	"time"

	"github.com/lazaret-dev/lazaret/internal/version"
)

// The server's half of the hello handshake (the client's is
// Client.Connect). The coordinator's server (internal/coordinator/ctlserver)
// checks the peer, then calls ReadHello, DecodeHello and ReplyHello in
// that order before it serves the connection.

// HelloTimeout bounds how long a new connection may take to send its hello.
const HelloTimeout = 10 * time.Second

// ReadHello reads the connection's first message, which must be a hello
// request sent within HelloTimeout. Anything else is answered with
// ErrHelloRequired; on any error the connection has ended.
func (c *Conn) ReadHello() (*Message, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(HelloTimeout))
	m, err := c.r.next()
	if err != nil {
		c.Fail(err)
		return nil, err
	}
	_ = c.nc.SetReadDeadline(time.Time{})
	if m.Type != TypeHello || m.Reply || m.ID == 0 {
		_ = c.write(&Message{Type: m.Type, ID: max(m.ID, 1), Reply: true, Error: Errorf(ErrHelloRequired.Code, "the first control message must be a hello request")})
		c.Fail(ErrHelloRequired)
		return nil, ErrHelloRequired
	}
	return m, nil
}

// DecodeHello decodes a hello request and checks its API version: a
// client of another version is an *APIMismatchError.
func DecodeHello(m *Message) (*Hello, error) {
	var h Hello
	if err := (&Request{Type: m.Type, Payload: m.Payload}).Decode(&h); err != nil {
		return nil, err
	}
	if h.API != version.APIVersion {
		return nil, &APIMismatchError{Coordinator: version.APIVersion, Client: h.API}
	}
	return &h, nil
}

// ReplyHello answers the hello m: with herr when it is not nil, else with
// reply, its API set to this build's. It returns the write's error.
func (c *Conn) ReplyHello(m *Message, reply *HelloReply, herr error) error {
	out := &Message{Type: TypeHello, ID: m.ID, Reply: true}
	var err error
	if herr != nil {
		out.Error = toWire(herr)
	} else {
		reply.API = version.APIVersion
		if out.Payload, err = marshal(reply); err != nil {
			out.Error = toWire(err)
		}
	}
	if err := c.write(out); err != nil {
		return err
	}
	if out.Error != nil {
		return out.Error
	}
	return nil
}
