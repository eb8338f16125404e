package refsync

import (
	"bytes"
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/engine/audit"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// What the ref sync records in the audit trail: branches it did not bring
// over (their names are refused), and synced commits whose message or
// identity holds text that does not show as itself on a terminal (control
// characters such as ESC [8m, bidi overrides such as U+202E, zero-width
// and other invisible characters; internal/visible's rule), the means to
// make `git log` say something else than what the commit holds.

// AuditFunc appends an entry to the domain's audit trail.
type AuditFunc func(context.Context, audit.Entry) (uint64, error)

// maxAuditedCommits bounds how many new commits one sync inspects.
const maxAuditedCommits = 10000

// maxAuditedCommitSize bounds one commit object read for the audit.
const maxAuditedCommitSize = 8 << 20

// maxAuditText bounds the text an audit entry keeps of a field.
const maxAuditText = 256

// hiddenText reports whether s has a character that does not show as
// itself: invalid UTF-8, a control character (newline and tab allowed in
// multi-line text), DEL, or a code point visible.Hidden names.
func hiddenText(s string, multiline bool) bool {
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return true
			}
		case multiline && (r == '\n' || r == '\t'):
		case r < 0x20 || r == 0x7f || visible.Hidden(r):
			return true
		}
	}
	return false
}

// commitText is what a commit shows of itself: identities and message.
type commitText struct {
	author, committer, message string
}

// parseCommit reads the author and committer identities (name and email,
// without the date) and the message of a raw commit object.
func parseCommit(raw []byte) commitText {
	var c commitText
	head, msg, _ := bytes.Cut(raw, []byte("\n\n"))
	c.message = string(msg)
	for _, l := range strings.Split(string(head), "\n") {
		k, v, _ := strings.Cut(l, " ")
		if i := strings.LastIndexByte(v, '>'); i >= 0 {
			v = v[:i+1]
		}
		switch k {
		case "author":
			c.author = v
		case "committer":
			c.committer = v
		}
	}
	return c
}

// flaggedFields returns the fields of c with hidden text.
func (c commitText) flaggedFields() map[string]string {
	out := map[string]string{}
	if hiddenText(c.author, false) {
		out["author"] = c.author
	}
	if hiddenText(c.committer, false) {
		out["committer"] = c.committer
	}
	if hiddenText(c.message, true) {
		out["message"] = c.message
	}
	return out
}

// newCommits lists the commits reachable from tips that no host ref
// reaches yet (run before the refs move), at most maxAuditedCommits.
func (s *Syncer) newCommits(ctx context.Context, tips []string) ([]string, error) {
	out, err := s.Git.NewCommits(ctx, s.Repo.Common(), maxAuditedCommits, strings.NewReader(strings.Join(tips, "\n")+"\n"))
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

// auditCommits records every commit of oids whose identity or message
// holds hidden text, one entry per commit.
func (s *Syncer) auditCommits(ctx context.Context, oids []string) error {
	if len(oids) == 0 || s.Audit == nil {
		return nil
	}
	out, err := s.Git.CatFileBatch(ctx, s.Repo.Common(), strings.NewReader(strings.Join(oids, "\n")+"\n"))
	if err != nil {
		return err
	}
	objs, err := hostgit.ParseBatch(out, len(oids), "commit", maxAuditedCommitSize)
	if err != nil {
		return err
	}
	for i, raw := range objs {
		flagged := parseCommit(raw).flaggedFields()
		if len(flagged) == 0 {
			continue
		}
		fields := map[string]string{"commit": oids[i], "container": s.sandboxName()}
		for k, v := range flagged {
			fields[k] = truncateUTF8(v, maxAuditText)
		}
		s.audit(ctx, audit.KindGitCommitFlagged, fields)
	}
	return nil
}

// auditSkipped records each refused branch once per sandbox (tip change
// included), and logs it.
func (s *Syncer) auditSkipped(ctx context.Context, lines []string) {
	for _, l := range lines {
		oid, name := SkippedRef(l)
		if s.skippedSeen == nil {
			s.skippedSeen = map[string]bool{}
		}
		if s.skippedSeen[l] {
			continue
		}
		s.skippedSeen[l] = true
		s.logger().Warn("refsync: not syncing a branch whose name lazaret refuses",
			"ref", visible.Escape(name, visible.GoForm), "oid", oid)
		s.audit(ctx, audit.KindGitRefSkipped, map[string]string{
			"ref": truncateUTF8(name, maxAuditText), "oid": oid, "container": s.sandboxName(),
			"reason": "name refused (printable ASCII, git's ref rules, no quotes)",
		})
	}
}

func (s *Syncer) audit(ctx context.Context, kind audit.Kind, fields map[string]string) {
	if s.Audit == nil {
		return
	}
	e := audit.Entry{Time: time.Now(), Kind: kind, Profile: s.Map.Profile, Fields: fields}
	// The last sync runs while the sandbox tears down, with its context
	// already cancelled; what it found must still reach the trail.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := s.Audit(actx, e); err != nil {
		s.logger().Error("refsync: audit", "kind", kind, "err", err)
	}
}

// truncateUTF8 cuts s to at most n bytes on a character boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// writeSkipped keeps SkippedRefsFile in step with the last sync.
func (s *Syncer) writeSkipped(lines []string) {
	if s.WriteSkipped == nil {
		return
	}
	var b strings.Builder
	for _, l := range lines {
		_, name := SkippedRef(l)
		b.WriteString(visible.Escape(name, visible.GoForm) + "\n")
	}
	if s.wroteSkipped && b.String() == s.lastSkipped {
		return
	}
	if err := s.WriteSkipped(b.String()); err != nil {
		s.logger().Warn("refsync: writing the skipped branch list", "err", err)
		return
	}
	s.lastSkipped, s.wroteSkipped = b.String(), true
}
