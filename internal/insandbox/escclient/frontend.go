package escclient

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// viaHolder is the Go client's front end for a session whose holder keeps
// the delegated key (LAZARET_SESSION_SOCKET set, no key in the
// environment): like the C front end, it forwards its command line,
// working directory and LAZARET_* variables to the holder and relays the
// answer. The holder signs only for processes of its own session.
func viaHolder(ctx context.Context, sock string, getenv func(string) string, r request, stdout, stderr io.Writer) (int, error) {
	cwd := getenv(EnvCwd)
	if cwd == "" {
		var err error
		if cwd, err = os.Getwd(); err != nil {
			cwd = "/"
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "LAZARET_") {
			env = append(env, kv)
		}
	}
	body, err := EncodeBrokerRequest(&BrokerRequest{Cwd: cwd, Args: r.args}, env)
	if err != nil {
		return 0, err
	}
	conn, err := dialBlocking(ctx, sock)
	if err != nil {
		return 0, fmt.Errorf("cannot reach the session holder on %s: %w", sock, err)
	}
	defer conn.release()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	if _, err := conn.Write(body); err != nil {
		// Closed before the request was taken: refused.
		return 0, ctxErr(ctx, fmt.Errorf("%w (%v)", errRefused, err))
	}
	return relayFrames(ctx, bufio.NewReader(conn), stdout, stderr)
}

// errRefused: the holder closed the connection without acknowledging it
// (the process is not one of its session's).
var errRefused = errors.New("the session holder refused the request: this process is not part of that session")

// relayFrames reads a holder's (or broker's) answer: the acknowledgement,
// output frames, then the exit code.
func relayFrames(ctx context.Context, br *bufio.Reader, stdout, stderr io.Writer) (int, error) {
	buf := make([]byte, MaxBrokerChunk)
	for first := true; ; first = false {
		var hdr [5]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if first {
				return 0, ctxErr(ctx, errRefused)
			}
			return 0, ctxErr(ctx, fmt.Errorf("the session holder went away before the answer: %w", err))
		}
		n := binary.BigEndian.Uint32(hdr[1:])
		if n > MaxBrokerChunk || first != (hdr[0] == FrameAck) {
			return 0, errors.New("malformed answer from the session holder")
		}
		if _, err := io.ReadFull(br, buf[:n]); err != nil {
			return 0, ctxErr(ctx, fmt.Errorf("reading the session holder's answer: %w", err))
		}
		switch hdr[0] {
		case FrameAck:
		case FrameOut:
			_, _ = stdout.Write(buf[:n])
		case FrameErr:
			_, _ = stderr.Write(buf[:n])
		case FrameCode:
			if n != 4 {
				return 0, errors.New("malformed exit code from the session holder")
			}
			return int(int32(binary.BigEndian.Uint32(buf[:4]))), nil
		default:
			return 0, fmt.Errorf("unknown answer frame %q from the session holder", hdr[0])
		}
	}
}
