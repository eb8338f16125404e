// Package ctl is the control-socket protocol between the lazaret CLI and
// the Session Coordinator: a UNIX socket carrying newline-delimited JSON
// messages in both directions. Either side can send requests (which get a
// reply with the same id) and notifications (id 0, no reply), so the
// coordinator can push messages to one CLI session, for example an
// escalation prompt, and wait for its answer.
//
// Every connection starts with a hello request from the client that
// carries the API version (version.APIVersion); a mismatch is an
// *APIMismatchError on both sides.
//
// This package is the wire both processes share: message types and
// payloads, framing (Conn), both halves of the hello (Client.Connect;
// ReadHello, DecodeHello, ReplyHello) and the CLI's typed Client, one
// method per request. The coordinator's server (peer check, sessions,
// handler registry) is internal/coordinator/ctlserver.
package ctl

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxMessage bounds one encoded message; a longer line closes the
// connection (the peer is the same user, but a runaway message must not
// grow the coordinator without bound).
const MaxMessage = 1 << 20

// Message is one frame on the wire.
type Message struct {
	// Type names the operation ("hello", "status", ...). A reply carries
	// the type of its request.
	Type string `json:"type"`
	// ID pairs a request with its reply; 0 marks a notification, which
	// gets no reply.
	ID uint64 `json:"id,omitempty"`
	// Reply is true on replies.
	Reply   bool            `json:"reply,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// Error is set on a failed reply instead of Payload.
	Error *Error `json:"error,omitempty"`
}

// Error is a typed error carried over the wire. errors.Is matches two
// errors with the same Code, so the sentinels below work across the
// socket.
type Error struct {
	Code    string          `json:"code"`
	Message string          `json:"message,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Message
}

// Is matches any *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf returns an *Error with code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error codes with a fixed meaning; handlers may define their own.
var (
	ErrAPIMismatch   = &Error{Code: "api_mismatch"}
	ErrHelloRequired = &Error{Code: "hello_required"}
	ErrUnknownType   = &Error{Code: "unknown_type"}
	ErrBadRequest    = &Error{Code: "bad_request"}
	ErrInternal      = &Error{Code: "internal"}
	ErrShuttingDown  = &Error{Code: "shutting_down"}
	ErrNoSession     = &Error{Code: "no_session"}
	ErrClosed        = &Error{Code: "closed", Message: "control connection closed"}
)

// APIMismatchError is a coordinator and a CLI speaking different protocol
// versions.
type APIMismatchError struct {
	Coordinator, Client int
}

func (e *APIMismatchError) Error() string {
	return fmt.Sprintf("coordinator speaks API %d, this lazaret speaks %d", e.Coordinator, e.Client)
}

// Is lets errors.Is(err, ErrAPIMismatch) match.
func (e *APIMismatchError) Is(target error) bool { return target == ErrAPIMismatch }

// reader decodes messages from a stream.
type reader struct{ s *bufio.Scanner }

func newReader(r io.Reader) *reader {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 4096), MaxMessage)
	return &reader{s: s}
}

// next returns the next message; io.EOF at a clean end of stream.
func (r *reader) next() (*Message, error) {
	for r.s.Scan() {
		line := r.s.Bytes()
		if len(line) == 0 {
			continue
		}
		return DecodeMessage(line)
	}
	if err := r.s.Err(); err != nil {
		return nil, err
	}
	return nil, io.EOF
}

// DecodeMessage parses one encoded message and checks its shape.
func DecodeMessage(line []byte) (*Message, error) {
	var m Message
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, fmt.Errorf("control message: %w", err)
	}
	if m.Type == "" {
		return nil, errors.New("control message: no type")
	}
	if m.Reply && m.ID == 0 {
		return nil, errors.New("control message: reply without id")
	}
	return &m, nil
}

// encode returns m as one line.
func encode(m *Message) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if len(b)+1 > MaxMessage {
		return nil, fmt.Errorf("control message %s: %d bytes, over the %d limit", m.Type, len(b), MaxMessage)
	}
	return append(b, '\n'), nil
}
