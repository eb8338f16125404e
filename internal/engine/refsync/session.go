package refsync

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// A sync session is one long-lived exec running a small loop in
// the sandbox, so that a sync does not pay for starting an exec (most of
// a sync's time otherwise). Per request the host writes the number of
// exclude lines and the ^<oid> lines; the sandbox answers with two
// length-prefixed sections, the branch list and the bundle (empty when
// nothing is new):
//
//	<n>\n <n bytes of for-each-ref output> <m>\n <m bytes of bundle>
//
// Everything that comes back is parsed as hostile, exactly as the
// one-shot export is. Any protocol error ends the session (its stream
// position is then unknown); the next sync starts a new one, and the sync
// falls back to a one-shot export meanwhile.
const sessionScript = `d=$(mktemp -d) || exit 1
while IFS= read -r n; do
  case "$n" in ''|*[!0-9]*) exit 1;; esac
  : > "$d/ex"
  i=0
  while [ "$i" -lt "$n" ]; do IFS= read -r l || exit 1; printf '%s\n' "$l" >> "$d/ex"; i=$((i+1)); done
  git -C /workspace for-each-ref --format='%(objectname) %(refname)' refs/heads/ > "$d/refs" 2>/dev/null || : > "$d/refs"
  rm -f "$d/bundle"
  git -C /workspace bundle create --quiet "$d/bundle" --branches --stdin < "$d/ex" 2>/dev/null || : > "$d/bundle"
  wc -c < "$d/refs"; cat "$d/refs"
  wc -c < "$d/bundle"; cat "$d/bundle"
done`

const (
	sessionTimeout = 60 * time.Second
	maxRefSection  = 4 << 20
)

type syncSession struct {
	p      *Proc
	out    *bufio.Reader
	cancel context.CancelFunc
}

func (s *Syncer) openSession() (*syncSession, error) {
	ctx, cancel := context.WithCancel(context.Background())
	p, err := s.Sandbox.Start(ctx, []string{"sh", "-c", sessionScript})
	if err != nil {
		cancel()
		return nil, err
	}
	return &syncSession{p: p, out: bufio.NewReaderSize(p.Stdout, 64<<10), cancel: cancel}, nil
}

func (ss *syncSession) close() {
	ss.cancel()
	_ = ss.p.Stdin.Close()
	_ = ss.p.Wait()
}

// closeSession ends the session, if any.
func (s *Syncer) closeSession() {
	if s.sess != nil {
		s.sess.close()
		s.sess = nil
	}
}

// readSize reads a decimal length line (wc -c output) no larger than max.
func readSize(br *bufio.Reader, max int64) (int64, error) {
	line, err := readLine(br)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil || n < 0 || n > max {
		return 0, fmt.Errorf("bad section length %q", line)
	}
	return n, nil
}

// exportSession is export over the session.
func (s *Syncer) exportSession(ctx context.Context, known []string) (*exported, error) {
	if s.sess == nil {
		ss, err := s.openSession()
		if err != nil {
			return nil, err
		}
		s.sess = ss
	}
	ss := s.sess
	// A sandbox that stops answering (the agent killed or stopped the
	// loop) must not hang the sync: the watchdog kills the exec, which
	// ends the reads below.
	watchdog := time.AfterFunc(sessionTimeout, ss.cancel)
	defer watchdog.Stop()
	ex, err := s.sessionRequest(ctx, ss, known)
	if err != nil {
		s.closeSession()
		return nil, fmt.Errorf("sync session: %w", err)
	}
	return ex, nil
}

func (s *Syncer) sessionRequest(ctx context.Context, ss *syncSession, known []string) (*exported, error) {
	var req strings.Builder
	fmt.Fprintf(&req, "%d\n", len(known))
	for _, oid := range known {
		req.WriteString("^" + oid + "\n")
	}
	if _, err := io.WriteString(ss.p.Stdin, req.String()); err != nil {
		return nil, err
	}
	n, err := readSize(ss.out, maxRefSection)
	if err != nil {
		return nil, err
	}
	section := make([]byte, n, n+1)
	if _, err := io.ReadFull(ss.out, section); err != nil {
		return nil, err
	}
	refs, skipped, err := ReadRefList(bufio.NewReader(bytes.NewReader(append(section, '\n'))), s.Repo.OIDLen())
	if err != nil {
		return nil, err
	}
	ex := newExported(refs, skipped)
	limit := s.MaxPack
	if limit <= 0 {
		limit = DefaultMaxPack
	}
	m, err := readSize(ss.out, limit+maxRefSection)
	if err != nil {
		return nil, err
	}
	if m == 0 {
		return ex, nil
	}
	lr := &io.LimitedReader{R: ss.out, N: m}
	br := bufio.NewReader(lr)
	h, err := ReadBundleHeader(br, s.Repo.ObjectFormat)
	if err != nil {
		return nil, err
	}
	if err := s.importPack(ctx, br); err != nil {
		return nil, err
	}
	// index-pack stops at the pack's end; anything after it inside the
	// announced length is skipped so the next answer starts in place.
	if _, err := io.Copy(io.Discard, lr); err != nil {
		return nil, err
	}
	ex.addBundle(h)
	return ex, nil
}
