// Package fsmonitor is the Git Sentry's file system monitor for the agent
// clone: a daemon inside the sandbox watches /workspace with inotify, and
// git's core.fsmonitor hook (protocol version 2) asks it which paths
// changed since the token git saved in its index, so `git status` stops
// lstat'ing every tracked file (one gVisor round trip each).
//
// It is correct only while nothing outside the sandbox changes the tree:
// gVisor's inotify sees the sandbox's own changes, not the host's. That
// holds for the branch-mode clone while the sandbox runs (docs/GITSENTRY.md)
// and never for direct mode, where it is not used.
//
// Whenever the daemon cannot vouch for the whole tree (not running yet,
// dead, restarted, queue overflow, a directory created, removed or
// renamed, a hard link, a token it did not issue, a work tree it does not
// watch) the answer is "/": everything may have changed, git scans it all.
package fsmonitor

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/wire/fsmonproto"
)

// HookVersion is the fsmonitor hook protocol this package speaks.
const HookVersion = fsmonproto.HookVersion

// tokenPrefix starts every token the daemon issues; FallbackToken is what
// the hook gives git when it could not ask the daemon. The daemon never
// accepts it, so the next query after a fallback is a full scan again.
const (
	tokenPrefix   = "lzfsm:"
	FallbackToken = tokenPrefix + "none"
)

// Limits on what crosses the socket. Requests come from any process in
// the sandbox; answers are read by the hook.
const (
	MaxRequestField = 4096
	MaxAnswer       = 64 << 20
)

// Token is a parsed daemon token: the daemon instance that issued it and
// its event sequence number at the time.
type Token struct {
	Instance string
	Seq      uint64
}

func (t Token) String() string {
	return tokenPrefix + t.Instance + ":" + strconv.FormatUint(t.Seq, 10)
}

// ParseToken parses a token git passes to the hook. Anything that is not
// exactly a token this package formats is an error (the daemon answers it
// with "/").
func ParseToken(s string) (Token, error) {
	rest, ok := strings.CutPrefix(s, tokenPrefix)
	if !ok {
		return Token{}, errors.New("not a lazaret fsmonitor token")
	}
	inst, seq, ok := strings.Cut(rest, ":")
	if !ok || len(inst) != 16 || !isLowerHex(inst) {
		return Token{}, errors.New("bad token instance")
	}
	if seq == "" || len(seq) > 20 || (len(seq) > 1 && seq[0] == '0') {
		return Token{}, errors.New("bad token sequence")
	}
	for i := 0; i < len(seq); i++ {
		if seq[i] < '0' || seq[i] > '9' {
			return Token{}, errors.New("bad token sequence")
		}
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil {
		return Token{}, errors.New("bad token sequence")
	}
	return Token{Instance: inst, Seq: n}, nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Request is one query: the hook's working directory (git runs the hook
// in the work tree's top level) and the token git passed.
type Request struct {
	Dir   string
	Token string
}

func validField(s string) bool {
	return len(s) <= MaxRequestField && !strings.ContainsAny(s, "\n\x00")
}

// EncodeRequest is the request line pair the hook sends.
func EncodeRequest(r Request) ([]byte, error) {
	if !validField(r.Dir) || !validField(r.Token) {
		return nil, errors.New("request field too long or with a newline or NUL")
	}
	return []byte(r.Dir + "\n" + r.Token + "\n"), nil
}

// ReadRequest reads one request from br, bounded.
func ReadRequest(br *bufio.Reader) (Request, error) {
	dir, err := readField(br)
	if err != nil {
		return Request{}, err
	}
	tok, err := readField(br)
	if err != nil {
		return Request{}, err
	}
	return Request{Dir: dir, Token: tok}, nil
}

func readField(br *bufio.Reader) (string, error) {
	var b []byte
	for {
		c, err := br.ReadByte()
		if err != nil {
			return "", err
		}
		if c == '\n' {
			return string(b), nil
		}
		if c == 0 || len(b) >= MaxRequestField {
			return "", errors.New("bad request field")
		}
		b = append(b, c)
	}
}

// Answer is what git reads from the hook: the new token, NUL, then every
// changed path followed by NUL; Full answers "/" (everything).
type Answer struct {
	Token string
	Full  bool
	Paths []string
}

// Bytes is the answer in git's hook format.
func (a Answer) Bytes() []byte {
	var b strings.Builder
	b.WriteString(a.Token)
	b.WriteByte(0)
	if a.Full {
		b.WriteString("/\x00")
		return []byte(b.String())
	}
	for _, p := range a.Paths {
		b.WriteString(p)
		b.WriteByte(0)
	}
	return []byte(b.String())
}

// FullAnswer is the answer that makes git check everything.
func FullAnswer(token string) []byte { return Answer{Token: token, Full: true}.Bytes() }

// WriteFrame writes an answer as the daemon sends it: its length in
// decimal, a newline, then the bytes.
func WriteFrame(w io.Writer, payload []byte) error {
	if _, err := fmt.Fprintf(w, "%d\n", len(payload)); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// ReadFrame reads a whole framed answer; a short or oversized one is an
// error, so a daemon that dies mid-answer never hands git part of a list.
// The payload must also look like an answer: a token, then NUL-terminated
// paths.
func ReadFrame(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\n")
	if line == "" || len(line) > 9 || (len(line) > 1 && line[0] == '0') {
		return nil, errors.New("bad answer length")
	}
	n, err := strconv.Atoi(line)
	if err != nil || n < 0 || n > MaxAnswer {
		return nil, errors.New("bad answer length")
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(br, buf); err != nil {
		return nil, err
	}
	if err := checkAnswer(buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// checkAnswer: a non-empty token, and NUL-terminated non-empty entries.
func checkAnswer(b []byte) error {
	if len(b) == 0 || b[len(b)-1] != 0 {
		return errors.New("answer not NUL-terminated")
	}
	if b[0] == 0 {
		return errors.New("answer with an empty token")
	}
	for i := 1; i < len(b); i++ {
		if b[i] == 0 && b[i-1] == 0 {
			return errors.New("answer with an empty path")
		}
	}
	return nil
}
