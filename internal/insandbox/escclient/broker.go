package escclient

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/session"
	"github.com/lazaret-dev/lazaret/internal/engine/trust"
)

// The escalation broker: a long-running mode of this binary inside the
// sandbox (`lazaret-escalate-go __broker SOCKET`, started by the
// coordinator), so that each escalation does not pay a Go program's
// start-up under gVisor. The in-sandbox `lazaret-escalate` is a small
// static C program (cmd/lazaret-escalate) that forwards its argv, its
// working directory and its LAZARET_* environment variables to the broker,
// which runs Main on them and streams the output back; the broker holds
// nothing of its own (docs/SECURITY.md).
//
// Wire format, on a UNIX stream socket, one request per connection:
//
//	request: "LZB1", u32 big-endian length N (≤ MaxBrokerRequest), then N
//	         bytes of NUL-terminated strings, each a one-byte tag ('a'
//	         argument, 'c' working directory, 'e' NAME=VALUE) and its text;
//	answer:  frames of a one-byte type, a u32 big-endian length and the
//	         data: FrameAck (empty, sent before the coordinator is
//	         contacted), FrameOut/FrameErr (at most MaxBrokerChunk bytes),
//	         FrameCode (4 bytes, the exit code, int32 big-endian, last).
//
// A front end that gets no FrameAck falls back to running the Go client
// itself: nothing was asked of the coordinator. After the acknowledgement
// it never retries, so no request is made twice.
const (
	BrokerMagic = "LZB1"
	// MaxBrokerRequest bounds the request (the coordinator takes at most
	// 64 KiB once signed and encoded; a larger one is refused there).
	MaxBrokerRequest = 256 << 10
	// MaxBrokerChunk bounds the data of one answer frame.
	MaxBrokerChunk = 64 << 10
	// maxBrokerStrings bounds the strings of one request.
	maxBrokerStrings = 16 << 10
	// DefaultBrokerSocket is where the coordinator starts the broker (a
	// tmpfs, empty at every start of the sandbox).
	DefaultBrokerSocket = "/run/lazaret/escalate-broker/sock"
	// BrokerVerb is the hidden first argument that selects broker mode.
	BrokerVerb = "__broker"
	// maxBrokerConns bounds the requests served at once; beyond it a
	// connection is closed unacknowledged and the front end falls back to
	// the Go client.
	maxBrokerConns = 64
	// brokerReadTimeout bounds the wait for a request after accept.
	brokerReadTimeout = 10 * time.Second
)

// Answer frame types.
const (
	FrameAck  = 'k'
	FrameOut  = 'o'
	FrameErr  = 'e'
	FrameCode = 'x'
)

// ErrBrokerRequest is wrapped by every request decoding error.
var ErrBrokerRequest = errors.New("malformed broker request")

// BrokerRequest is what the front end forwards.
type BrokerRequest struct {
	Cwd  string
	Args []string // argv, including argv[0]
	// Env holds the forwarded LAZARET_* variables (the first of a
	// duplicated name wins, as with getenv).
	Env map[string]string
}

// Getenv looks a variable up among the forwarded ones only. The working
// directory is reported as LAZARET_ESCALATE_CWD unless the front end's
// environment sets that itself.
func (r *BrokerRequest) Getenv(name string) string {
	if name == EnvCwd {
		if v := r.Env[EnvCwd]; v != "" {
			return v
		}
		return r.Cwd
	}
	return r.Env[name]
}

// ErrTooLong is a request whose arguments and LAZARET_ variables exceed
// MaxBrokerRequest.
var ErrTooLong = errors.New("the command is too long for host escalation")

func tooLong(n int) error {
	return fmt.Errorf("%w (%d bytes of arguments; at most %d)", ErrTooLong, n, MaxBrokerRequest)
}

// ReadBrokerRequest reads one framed request.
func ReadBrokerRequest(r io.Reader) (*BrokerRequest, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrBrokerRequest, err)
	}
	if string(hdr[:4]) != BrokerMagic {
		return nil, fmt.Errorf("%w: bad magic", ErrBrokerRequest)
	}
	n := binary.BigEndian.Uint32(hdr[4:])
	if n > MaxBrokerRequest {
		return nil, fmt.Errorf("%w: %w", ErrBrokerRequest, tooLong(int(n)))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, fmt.Errorf("%w: body: %v", ErrBrokerRequest, err)
	}
	return ParseBrokerRequest(body)
}

// ParseBrokerRequest decodes a request body (after magic and length).
func ParseBrokerRequest(body []byte) (*BrokerRequest, error) {
	if len(body) > MaxBrokerRequest {
		return nil, fmt.Errorf("%w: %w", ErrBrokerRequest, tooLong(len(body)))
	}
	if len(body) == 0 || body[len(body)-1] != 0 {
		return nil, fmt.Errorf("%w: not NUL-terminated", ErrBrokerRequest)
	}
	r := &BrokerRequest{Env: map[string]string{}}
	haveCwd := false
	parts := bytes.Split(body[:len(body)-1], []byte{0})
	if len(parts) > maxBrokerStrings {
		return nil, fmt.Errorf("%w: %d strings", ErrBrokerRequest, len(parts))
	}
	for _, p := range parts {
		if len(p) == 0 {
			return nil, fmt.Errorf("%w: string without a tag", ErrBrokerRequest)
		}
		text := string(p[1:])
		switch p[0] {
		case 'a':
			r.Args = append(r.Args, text)
		case 'c':
			if haveCwd {
				return nil, fmt.Errorf("%w: two working directories", ErrBrokerRequest)
			}
			haveCwd, r.Cwd = true, text
		case 'e':
			name, value, ok := strings.Cut(text, "=")
			if !ok || !strings.HasPrefix(name, "LAZARET_") {
				return nil, fmt.Errorf("%w: environment entry %q", ErrBrokerRequest, truncate(name))
			}
			if _, dup := r.Env[name]; !dup {
				r.Env[name] = value
			}
		default:
			return nil, fmt.Errorf("%w: unknown tag %q", ErrBrokerRequest, p[0])
		}
	}
	if !haveCwd || r.Cwd == "" {
		return nil, fmt.Errorf("%w: no working directory", ErrBrokerRequest)
	}
	if len(r.Args) == 0 {
		return nil, fmt.Errorf("%w: no arguments", ErrBrokerRequest)
	}
	return r, nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// EncodeBrokerRequest is the front end's encoding: the C front end's
// (cmd/lazaret-escalate) and the Go fallback's (frontend.go). Strings
// containing NUL cannot be encoded.
func EncodeBrokerRequest(r *BrokerRequest, env []string) ([]byte, error) {
	b := []byte(BrokerMagic + "\x00\x00\x00\x00")
	add := func(tag byte, s string) error {
		if strings.IndexByte(s, 0) >= 0 {
			return fmt.Errorf("%w: NUL in %q", ErrBrokerRequest, truncate(s))
		}
		b = append(append(append(b, tag), s...), 0)
		return nil
	}
	if err := add('c', r.Cwd); err != nil {
		return nil, err
	}
	for _, a := range r.Args {
		if err := add('a', a); err != nil {
			return nil, err
		}
	}
	for _, kv := range env {
		if err := add('e', kv); err != nil {
			return nil, err
		}
	}
	if len(b)-8 > MaxBrokerRequest {
		return nil, tooLong(len(b) - 8)
	}
	binary.BigEndian.PutUint32(b[4:8], uint32(len(b)-8))
	return b, nil
}

// frameWriter writes answer frames, each in one write; after a failed
// write (the front end went away) it writes nothing more.
type frameWriter struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

func (f *frameWriter) frame(typ byte, p []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	buf := make([]byte, 5, 5+len(p))
	buf[0] = typ
	binary.BigEndian.PutUint32(buf[1:], uint32(len(p)))
	_, f.err = f.w.Write(append(buf, p...))
	return f.err
}

func (f *frameWriter) code(c int) error {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(int32(c)))
	return f.frame(FrameCode, b[:])
}

// stream is an io.Writer sending FrameOut or FrameErr frames.
type stream struct {
	f   *frameWriter
	typ byte
}

func (s stream) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n := min(len(p)-done, MaxBrokerChunk)
		if err := s.f.frame(s.typ, p[done:done+n]); err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

// Broker serves front-end connections.
type Broker struct {
	// Run handles one request; MainContext when nil.
	Run func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int
	// Log receives connection-level failures; nil discards them.
	Log func(format string, args ...any)
	// Delegated, when set, is the key every request is signed with (the
	// session holder's); the forwarded variables' delegation is ignored.
	Delegated *session.Delegated
	// Peer, when set, must accept a connection's peer before its request
	// is read; a refused peer is closed unacknowledged.
	Peer func(net.Conn) error

	warm warmPool // a connection handshaken ahead of the next request
}

// Serve accepts connections on ln until ctx ends or ln fails.
func (b *Broker) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	sem := make(chan struct{}, maxBrokerConns)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		if !waitSlot(ctx, sem) {
			// Still too busy: unacknowledged, the front end runs the Go
			// client.
			_ = conn.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			b.handle(ctx, conn)
		}()
	}
}

// brokerSlotWait is how long a connection beyond maxBrokerConns waits for
// one to end: hundreds of requests at once (measured: 300 from one
// session) are served in turn, not failed over to the Go client.
const brokerSlotWait = 10 * time.Second

// waitSlot takes a slot of sem, waiting up to brokerSlotWait.
func waitSlot(ctx context.Context, sem chan struct{}) bool {
	select {
	case sem <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(brokerSlotWait)
	defer t.Stop()
	select {
	case sem <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

func (b *Broker) logf(format string, args ...any) {
	if b.Log != nil {
		b.Log(format, args...)
	}
}

// handle serves one connection: read the request, acknowledge it, run
// the client logic with the forwarded argv and variables, stream its
// output and send its exit code. The front end closing the connection
// cancels the request (the TLS connection to the coordinator is closed,
// as when the Go client itself is killed).
func (b *Broker) handle(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	if b.Peer != nil {
		if err := b.Peer(conn); err != nil {
			b.logf("refused a connection: %v", err)
			return
		}
	}
	_ = conn.SetReadDeadline(time.Now().Add(brokerReadTimeout))
	// The front end sends nothing after its request, so a buffer cannot
	// take anything that belongs to the watch below.
	req, err := ReadBrokerRequest(bufio.NewReaderSize(conn, 4096))
	if err != nil {
		b.logf("broker: %v", err)
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	fw := &frameWriter{w: conn}
	if err := fw.frame(FrameAck, nil); err != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// The front end sends nothing more: any return is its end.
		var one [1]byte
		_, _ = conn.Read(one[:])
		cancel()
	}()
	run := b.Run
	if run == nil {
		run = MainContext
	}
	ctx = withWarm(ctx, &b.warm)
	if b.Delegated != nil {
		ctx = context.WithValue(ctx, delegatedKey{}, b.Delegated)
	}
	code := run(ctx, req.Args, req.Getenv, stream{fw, FrameOut}, stream{fw, FrameErr})
	_ = fw.code(code)
	// After the answer, so the handshake never competes with it.
	b.warm.refill()
}

// BrokerMain listens on sock (mode 0666, so any user of the sandbox can
// ask: every request still carries its own signature and delegation) and
// serves until killed; it returns an exit code.
func BrokerMain(sock string, stderr io.Writer) int {
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, "lazaret-escalate: "+format+"\n", args...) }
	if fi, err := os.Lstat(sock); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			logf("broker: %s exists and is not a socket", sock)
			return ExitFailure
		}
		_ = os.Remove(sock)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		logf("broker: %v", err)
		return ExitFailure
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		logf("broker: %v", err)
		return ExitFailure
	}
	loadClientConfig = (&configCache{}).load
	b := &Broker{Log: logf}
	if err := b.Serve(context.Background(), ln); err != nil {
		logf("broker: %v", err)
		return ExitFailure
	}
	return 0
}

// configCache spares the broker reading and parsing the TLS bundle on
// every request: one stat instead. The parsed configuration is reused only
// while the bundle is the very same file (device, inode, size, change and
// modification times): the Trust Anchor replaces it by an atomic rename,
// so a rotation is seen by the very next request, as with the one-shot
// client; and never once its certificate has expired.
type configCache struct {
	mu   sync.Mutex
	key  [6]int64
	cfg  *tls.Config
	leaf *x509.Certificate
}

func (c *configCache) load(dir string) (*tls.Config, *x509.Certificate, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, trust.BundleFile), &st); err != nil {
		return trust.ClientConfig(dir)
	}
	key := [6]int64{int64(st.Dev), int64(st.Ino), st.Size, st.Mtim.Nano(), st.Ctim.Nano(), 1}
	c.mu.Lock()
	if c.cfg != nil && key == c.key && time.Now().Before(c.leaf.NotAfter) {
		cfg, leaf := c.cfg, c.leaf
		c.mu.Unlock()
		return cfg, leaf, nil
	}
	c.mu.Unlock()
	cfg, leaf, err := trust.ClientConfig(dir)
	if err != nil {
		return nil, nil, err
	}
	// If the file was replaced after the stat, the key is the old file's
	// and the next request parses again.
	c.mu.Lock()
	c.key, c.cfg, c.leaf = key, cfg, leaf
	c.mu.Unlock()
	return cfg, leaf, nil
}
