// Package client is lazaret-escalate's logic, separate from main so tests
// can run it in-process. It deliberately imports only the standard library
// and the small wire, session and trust packages.
package escclient

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/session"
	"github.com/lazaret-dev/lazaret/internal/engine/trust"
	"github.com/lazaret-dev/lazaret/internal/version"
	"github.com/lazaret-dev/lazaret/internal/wire/escrelay"
	"github.com/lazaret-dev/lazaret/internal/wire/escwire"
)

// Defaults inside the sandbox, overridable for tests.
const (
	DefaultSocket = "/run/lazaret/escalate.sock"
	DefaultTLSDir = "/run/lazaret/tls"
	EnvSocket     = escrelay.EnvSocket
	EnvTLSDir     = escrelay.EnvTLSDir
	// EnvTrace, when set to 1, makes the client print its phase timings to
	// stderr (for bench/escalation).
	EnvTrace = "LAZARET_ESCALATE_TRACE"
	// EnvCwd overrides the reported working directory (tests run outside
	// /workspace). The cwd is the agent's claim either way; the coordinator
	// confines it to the workspace.
	EnvCwd = "LAZARET_ESCALATE_CWD"
)

// Exit codes of the client itself (a host command's own code passes
// through unchanged).
const (
	ExitDenied  = 126 // denied by the human or the policy
	ExitUsage   = 2   // bad command line
	ExitFailure = 125 // could not ask: missing socket, certificate, session, or rejected
	ExitTimeout = 124 // --timeout elapsed before the command finished
)

const usage = `usage: lazaret-escalate [--reason TEXT] [--timeout D] -- CMD [ARG...]
       lazaret-escalate --shell 'CMD STRING' --reason TEXT [--timeout D]
       lazaret-escalate --propose net HOST[:PORT] [--why TEXT]
       lazaret-escalate --propose exec [--why TEXT] -- CMD [ARG...]
       lazaret-escalate --wait ID [--timeout D]
       lazaret-escalate --denials

Asks the human at the lazaret terminal to run one command on the host (some
commands are approved automatically by the auto_approve configuration).
Prints the command's output and exits with its exit code; 126 when denied.

--propose asks for a policy rule: a host the sandbox may reach, or an
auto_approve entry. A checker reviews it and the user decides; it prints
the proposal's id (exit 0) or why it was refused (exit 126). --wait ID
waits for the decision: exit 0 approved, 1 denied. --denials lists this
sandbox's recent network denials.
`

// Main runs the client and returns the exit code.
func Main(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return MainContext(context.Background(), args, getenv, stdout, stderr)
}

// MainContext is Main for the broker: cancelling ctx abandons the request
// (the connection to the coordinator is closed, which withdraws a prompt
// or kills the command).
func MainContext(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	var tr *trace
	if getenv(EnvTrace) == "1" {
		tr = newTrace()
		defer tr.flush(stderr)
	}
	fs := flag.NewFlagSet("lazaret-escalate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	reason := fs.String("reason", "", "why the command is needed (shown to the human)")
	shell := fs.String("shell", "", "a command string (never run by a shell; parsed into words)")
	timeout := fs.Duration("timeout", 0, "give up after this long (waiting for approval included)")
	showVersion := fs.Bool("version", false, "print the version")
	lf := loopFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		fmt.Fprintf(stderr, "lazaret-escalate: %v\n%s", err, usage)
		return ExitUsage
	}
	if *showVersion {
		fmt.Fprintln(stdout, "lazaret-escalate", version.Version)
		return 0
	}
	argv := fs.Args()
	if lf.any() {
		r, msg := lf.request(fs, *shell, *reason)
		if msg != "" {
			fmt.Fprintf(stderr, "lazaret-escalate: %s\n%s", msg, usage)
			return ExitUsage
		}
		r.args = args
		return runReported(ctx, getenv, r, *timeout, stdout, stderr)
	}
	switch {
	case *shell != "" && len(argv) > 0:
		fmt.Fprintf(stderr, "lazaret-escalate: give either --shell or a command after --, not both\n%s", usage)
		return ExitUsage
	case *shell == "" && len(argv) == 0:
		fmt.Fprint(stderr, usage)
		return ExitUsage
	case *shell != "" && strings.TrimSpace(*reason) == "":
		fmt.Fprintln(stderr, "lazaret-escalate: --shell needs --reason TEXT")
		return ExitUsage
	case len(argv) > 0 && argv[0] == "":
		fmt.Fprintln(stderr, "lazaret-escalate: empty command name")
		return ExitUsage
	}

	tr.mark("flags")
	if tr != nil {
		ctx = context.WithValue(ctx, traceKey{}, tr)
	}
	return runReported(ctx, getenv, request{argv: argv, command: *shell, reason: *reason, args: args}, *timeout, stdout, stderr)
}

// runReported runs r within timeout (0: none) and turns a failure into
// its message and exit code.
func runReported(ctx context.Context, getenv func(string) string, r request, timeout time.Duration, stdout, stderr io.Writer) int {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	code, err := run(ctx, getenv, r, stdout, stderr)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			fmt.Fprintf(stderr, "lazaret-escalate: no answer within %v\n", timeout)
			return ExitTimeout
		}
		fmt.Fprintf(stderr, "lazaret-escalate: %v\n", err)
		return ExitFailure
	}
	return code
}

type request struct {
	argv    []string
	command string
	reason  string
	// kind, proposal, target and proposalID are a proposal loop's
	// request (escwire.Request's fields of the same names).
	kind, proposal, target, proposalID string
	// args is the client's whole command line (what a holder is given).
	args []string
}

// delegatedKey carries the session holder's key to run.
type delegatedKey struct{}

// loadClientConfig reads the TLS material; the broker replaces it with a
// cache (brokerConfigCache).
var loadClientConfig = trust.ClientConfig

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

func run(ctx context.Context, getenv func(string) string, r request, stdout, stderr io.Writer) (int, error) {
	tr := traceFrom(ctx)
	del, _ := ctx.Value(delegatedKey{}).(*session.Delegated)
	if del == nil && getenv(session.EnvDelegatedKey) == "" && getenv(EnvSessionSocket) != "" {
		// A session whose key its holder keeps: the holder asks.
		return viaHolder(ctx, getenv(EnvSessionSocket), getenv, r, stdout, stderr)
	}
	if del == nil {
		var err error
		if del, err = session.FromEnv(getenv); err != nil {
			return 0, err
		}
	}
	tr.mark("env")
	tlsDir := orDefault(getenv(EnvTLSDir), DefaultTLSDir)
	cfg, leaf, err := loadClientConfig(tlsDir)
	if err != nil {
		return 0, fmt.Errorf("%w (is escalation enabled for this sandbox? looked in %s)", err, tlsDir)
	}
	tr.mark("certs")
	if len(leaf.URIs) != 1 {
		return 0, fmt.Errorf("%s/%s: no sandbox identity in the certificate", tlsDir, trust.ClientFile)
	}
	profile, _, err := trust.ParseSAN(leaf.URIs[0])
	if err != nil {
		return 0, fmt.Errorf("%s/%s: %w", tlsDir, trust.ClientFile, err)
	}
	cwd := getenv(EnvCwd)
	if cwd == "" {
		if cwd, err = os.Getwd(); err != nil {
			cwd = "/"
		}
	}
	// Signed once the coordinator answered the handshake, not before: a
	// request made while no coordinator is linked (a cluster session's
	// relay holds it, the laptop asleep) would otherwise reach it with a
	// timestamp outside the replay window. A second try gets a fresh id,
	// nonce and timestamp.
	sign := func() ([]byte, error) {
		req := &escwire.Request{
			RequestID: escwire.RandomID(), SessionID: del.SessionID, Profile: profile, Cwd: cwd,
			Argv: r.argv, Command: r.command, Justification: r.reason,
			Kind: r.kind, Proposal: r.proposal, Target: r.target, ProposalID: r.proposalID,
			Timestamp: time.Now().UnixMilli(), Nonce: escwire.RandomID(), Delegation: del.Delegation,
		}
		if err := req.Sign(del.Key); err != nil {
			return nil, err
		}
		tr.mark("sign")
		return req.Encode()
	}
	sock := orDefault(getenv(EnvSocket), DefaultSocket)
	code, err := exchange(ctx, sock, cfg, sign, stdout, stderr)
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		// The coordinator's certificate is not from the CA loaded above:
		// a cluster session's coordinator that started again (a new
		// Trust Anchor) while this request waited, whose bundle its
		// relay has written since. Once, with that bundle.
		if cfg2, leaf2, lerr := loadClientConfig(tlsDir); lerr == nil && !leaf2.Equal(leaf) {
			code, err = exchange(ctx, sock, cfg2, sign, stdout, stderr)
		}
	}
	return code, err
}

// Exchange sends one request line over mTLS on the UNIX socket sock and
// relays the response frames; it returns the exit code to use.
func Exchange(ctx context.Context, sock string, cfg *tls.Config, line []byte, stdout, stderr io.Writer) (int, error) {
	return exchange(ctx, sock, cfg, func() ([]byte, error) { return line, nil }, stdout, stderr)
}

// exchange is Exchange with the request line made by line once the
// handshake is done.
func exchange(ctx context.Context, sock string, cfg *tls.Config, line func() ([]byte, error), stdout, stderr io.Writer) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	tr := traceFrom(ctx)
	var warm *warmConn
	if p := warmFrom(ctx); p != nil {
		warm = p.take(sock, cfg)
	}
	var raw *blockingConn
	var conn *tls.Conn
	if warm != nil {
		raw, conn = warm.raw, warm.tls
	} else {
		var err error
		if raw, err = dialBlocking(ctx, sock); err != nil {
			return 0, fmt.Errorf("cannot reach the coordinator on %s: %w", sock, err)
		}
	}
	defer raw.release()
	stop := context.AfterFunc(ctx, func() { _ = raw.Close() })
	defer stop()
	tr.mark("connect")
	if warm == nil {
		conn = tls.Client(raw, cfg)
		if err := conn.HandshakeContext(ctx); err != nil {
			return 0, fmt.Errorf("TLS handshake with the coordinator: %w", err)
		}
	}
	tr.mark("handshake")
	defer tr.mark("answer")
	req, err := line()
	if err != nil {
		return 0, err
	}
	if _, err := conn.Write(req); err != nil {
		return 0, ctxErr(ctx, fmt.Errorf("sending the request: %w", err))
	}
	dec := json.NewDecoder(bufio.NewReader(conn))
	for {
		var f escwire.Frame
		if err := dec.Decode(&f); err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				// TLS 1.3 reports a refused client certificate only here.
				return 0, errors.New("the coordinator closed the connection without an answer (request rejected)")
			}
			return 0, fmt.Errorf("reading the answer: %w", err)
		}
		switch f.Type {
		case escwire.FrameStdout:
			_, _ = stdout.Write(f.Data)
		case escwire.FrameStderr:
			_, _ = stderr.Write(f.Data)
		case escwire.FramePending:
			fmt.Fprintf(stderr, "lazaret-escalate: %s\n", f.Message)
		case escwire.FrameExit:
			return f.Code, nil
		case escwire.FrameDenied:
			fmt.Fprintf(stderr, "lazaret-escalate: %s\n", f.Message)
			return ExitDenied, nil
		case escwire.FrameError:
			return 0, errors.New(f.Message)
		default:
			return 0, fmt.Errorf("unknown answer frame %q", f.Type)
		}
	}
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// trace records phase timings (LAZARET_ESCALATE_TRACE=1) and writes them
// to stderr in one write when the client is done, so that tracing adds no
// system call (a trap into the gVisor Sentry) between the phases it times.
// Lines: "trace begin <unix µs>" (wall clock on entry, so the caller can
// split off the process start-up), "trace <phase> <µs since the previous
// mark>" and "trace end <unix µs>".
type trace struct {
	buf  []byte
	last time.Time
}

type traceKey struct{}

func newTrace() *trace {
	now := time.Now()
	t := &trace{last: now}
	t.line("begin", now.UnixMicro())
	return t
}

func traceFrom(ctx context.Context) *trace {
	t, _ := ctx.Value(traceKey{}).(*trace)
	return t
}

func (t *trace) line(what string, v int64) {
	t.buf = append(t.buf, "trace "...)
	t.buf = append(t.buf, what...)
	t.buf = append(t.buf, ' ')
	t.buf = strconv.AppendInt(t.buf, v, 10)
	t.buf = append(t.buf, '\n')
}

// mark records the time since the previous mark as phase.
func (t *trace) mark(phase string) {
	if t == nil {
		return
	}
	now := time.Now()
	t.line(phase, now.Sub(t.last).Microseconds())
	t.last = now
}

// flush records the end and writes the trace to w.
func (t *trace) flush(w io.Writer) {
	t.line("end", time.Now().UnixMicro())
	_, _ = w.Write(t.buf)
}
