package refsync

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
)

// DefaultMaxPack bounds the pack one sync may import (the agent could
// otherwise fill the host disk through the host repository).
const DefaultMaxPack = 2 << 30

// ExportScript runs in the sandbox: list the branch tips, an empty line,
// then a bundle of what the host does not have yet (the host's known tips
// arrive on stdin as ^<oid> lines). When nothing is new, git refuses to
// write an empty bundle and the stream simply ends after the ref list.
const ExportScript = `git -C /workspace for-each-ref --format='%(objectname) %(refname)' refs/heads/ || exit
echo
exec git -C /workspace bundle create --quiet - --branches --stdin`

// Syncer brings the agent clone's branches into the host repository.
type Syncer struct {
	Git     *hostgit.Git
	Repo    *gitrepo.HostRepo
	Map     gitrepo.RefMap
	Sandbox Sandbox
	MaxPack int64
	Log     *slog.Logger
	// Audit records skipped branches and flagged commits (nil: only
	// logged).
	Audit AuditFunc

	// WriteSkipped receives the names of the skipped branches, one per
	// line, escaped, whenever the list changes (see gitrepo.SkippedRefsFile);
	// nil: not written.
	WriteSkipped func(list string) error

	skippedSeen  map[string]bool // skipped ref lines already audited
	lastSkipped  string          // what StatusFile holds
	wroteSkipped bool

	// RefsDir is the clone's git dir on the host, for the fingerprint
	// that lets SyncIfChanged skip a sync (empty: never skipped).
	RefsDir string

	mu          sync.Mutex   // one sync at a time
	sess        *syncSession // the sync session, when one is open
	syncedPrint string       // refs fingerprint at the start of the last complete sync
	syncedAt    time.Time    // when it was taken
}

// Close ends the sync session.
func (s *Syncer) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeSession()
}

func (s *Syncer) logger() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.New(slog.DiscardHandler)
}

// hostRefs returns the host refs the sync owns, name → oid.
func (s *Syncer) hostRefs(ctx context.Context) (map[string]string, error) {
	out, err := s.Git.ForEachRef(ctx, s.Repo.Common(), s.Map.AgentRef(), strings.TrimSuffix(s.Map.SideRefPrefix(), "/"))
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if oid, name, ok := strings.Cut(l, " "); ok {
			m[name] = oid
		}
	}
	return m, nil
}

// SyncResult says what one sync did.
type SyncResult struct {
	Updated  []string // host refs created or moved
	Deleted  []string
	Imported bool     // a pack was imported
	Skipped  []string // sandbox ref lines not synced (name refused)
}

// Sync runs one sync: ask the sandbox for its branch tips and the objects
// the host lacks, verify and import them, then move the host refs in one
// transaction. The host's HEAD, index and working tree are never touched:
// only refs under refs/heads/lazaret/agent-<p> and refs/lazaret/<p>/ move,
// and never one that is checked out in a host worktree.
func (s *Syncer) Sync(ctx context.Context) (*SyncResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	print, at := s.notePrint()
	s.syncedPrint = "" // until this sync completes
	out, err := s.sync(ctx)
	if err == nil {
		s.syncedPrint, s.syncedAt = print, at
	}
	return out, err
}

func (s *Syncer) sync(ctx context.Context) (*SyncResult, error) {
	host, err := s.hostRefs(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading host refs: %w", err)
	}
	// Tips the host already has, so the bundle carries only new objects.
	var known []string
	for _, oid := range host {
		known = append(known, oid)
	}
	if head, err := s.Repo.Head(ctx, s.Git); err == nil {
		known = append(known, head)
	}
	slices.Sort(known)
	known = slices.Compact(known)
	res, err := s.exportAny(ctx, known)
	if errors.Is(err, errMissingExclude) && len(known) > 0 {
		// A tip the host knows is unknown in the clone (the host repository
		// was pruned, or the agent rewrote its alternates): fall back to a
		// bundle of everything.
		res, err = s.exportAny(ctx, nil)
	}
	if err != nil {
		return nil, err
	}
	out, err := s.apply(ctx, host, res)
	if errors.Is(err, errIncomplete) && len(known) > 0 && !res.imported {
		// The session cannot tell a refused empty bundle from a bad
		// exclude; a tip the host lacks with no pack is the latter.
		if res, err = s.exportAny(ctx, nil); err != nil {
			return nil, err
		}
		out, err = s.apply(ctx, host, res)
	}
	s.auditSkipped(ctx, res.skipped)
	s.writeSkipped(res.skipped)
	if out != nil {
		out.Skipped = res.skipped
	}
	return out, err
}

// exportAny asks the sandbox through the sync session, and through a
// one-shot exec when the session fails.
func (s *Syncer) exportAny(ctx context.Context, known []string) (*exported, error) {
	res, err := s.exportSession(ctx, known)
	if err == nil {
		return res, nil
	}
	s.logger().Debug("refsync: sync session failed, one-shot export", "err", err)
	return s.export(ctx, known)
}

// errIncomplete: a sandbox tip whose history the host does not have.
var errIncomplete = errors.New("sandbox history incomplete on the host")

var errMissingExclude = errors.New("sandbox could not bundle against the host's tips")

// exported is what the sandbox reported after the import of its pack.
type exported struct {
	refs     map[string]string // clone ref → oid
	imported bool
	skipped  []string // ref lines whose names lazaret refuses
}

func (s *Syncer) export(ctx context.Context, known []string) (*exported, error) {
	var stdin strings.Builder
	for _, oid := range known {
		stdin.WriteString("^" + oid + "\n")
	}
	// Cancelled on a parse or import error, so a hostile stream is cut
	// off instead of drained.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p, err := s.Sandbox.Start(ctx, []string{"sh", "-c", ExportScript})
	if err != nil {
		return nil, err
	}
	go func() {
		_, _ = io.WriteString(p.Stdin, stdin.String())
		_ = p.Stdin.Close()
	}()
	res, perr := s.readExport(ctx, bufio.NewReaderSize(p.Stdout, 64<<10))
	if perr != nil {
		cancel()
	}
	// Drain whatever is left so the exec ends, then reap it.
	_, _ = io.Copy(io.Discard, p.Stdout)
	werr := p.Wait()
	if perr != nil {
		return nil, perr
	}
	if werr != nil && !res.imported {
		// The bundle step failing with refs present and nothing imported is
		// the "empty bundle" case, or a bad exclude; tell them apart by
		// whether the tips are already on the host (apply checks that).
		if len(known) > 0 && strings.Contains(p.Stderr.String(), "bad object") {
			return nil, errMissingExclude
		}
		if len(res.refs) == 0 && res.listFailed {
			return nil, fmt.Errorf("exec in %s: %w: %s", s.sandboxName(), werr, strings.TrimSpace(p.Stderr.String()))
		}
	}
	return &res.exported, nil
}

func newExported(refs []CloneRef, skipped []string) *exported {
	ex := &exported{refs: map[string]string{}, skipped: skipped}
	for _, r := range refs {
		ex.refs[r.Name] = r.OID
	}
	return ex
}

// addBundle records an imported bundle: it was made after the ref list,
// so its tips are the newer ones.
func (ex *exported) addBundle(h *BundleHeader) {
	ex.imported = true
	ex.skipped = append(ex.skipped, h.Skipped...)
	for _, r := range h.Refs {
		ex.refs[r.Name] = r.OID
	}
}

type readResult struct {
	exported
	listFailed bool
}

func (s *Syncer) readExport(ctx context.Context, br *bufio.Reader) (readResult, error) {
	var rr readResult
	refs, skipped, err := ReadRefList(br, s.Repo.OIDLen())
	if err != nil {
		if errors.Is(err, io.EOF) {
			rr.listFailed = true
			return rr, nil
		}
		return rr, fmt.Errorf("sandbox stream: %w", err)
	}
	rr.exported = *newExported(refs, skipped)
	h, err := ReadBundleHeader(br, s.Repo.ObjectFormat)
	if errors.Is(err, errNoBundle) {
		return rr, nil
	}
	if err != nil {
		return rr, fmt.Errorf("sandbox stream: %w", err)
	}
	if err := s.importPack(ctx, br); err != nil {
		return rr, err
	}
	rr.addBundle(h)
	return rr, nil
}

// importPack feeds the pack to `git index-pack --strict` in the host
// repository: every object is parsed and fsck-checked (bad trees such as a
// path named .git, malformed commits, broken links within the pack) before
// the pack is kept. --fix-thin completes deltas against the host's objects.
func (s *Syncer) importPack(ctx context.Context, r io.Reader) error {
	limit := s.MaxPack
	if limit <= 0 {
		limit = DefaultMaxPack
	}
	lr := &io.LimitedReader{R: r, N: limit + 1}
	err := s.Git.IndexPack(ctx, s.Repo.Common(), lr)
	if lr.N <= 0 {
		return fmt.Errorf("sandbox pack larger than %d bytes: refused", limit)
	}
	if err != nil {
		return fmt.Errorf("verifying the sandbox's objects: %w", err)
	}
	return nil
}

// apply moves the host refs to the sandbox's tips after checking that each
// tip is a commit whose history is complete in the host repository.
func (s *Syncer) apply(ctx context.Context, host map[string]string, ex *exported) (*SyncResult, error) {
	want := map[string]string{} // host ref → oid
	for cloneRef, oid := range ex.refs {
		hr, err := s.Map.HostRef(cloneRef)
		if err != nil {
			continue
		}
		want[hr] = oid
	}
	var updates, deletes []string
	for hr, oid := range want {
		if host[hr] != oid {
			updates = append(updates, hr)
		}
	}
	for hr := range host {
		// The agent deleting its own branch does not delete the work under
		// review; its other branches are mirrored.
		if _, ok := want[hr]; !ok && hr != s.Map.AgentRef() {
			deletes = append(deletes, hr)
		}
	}
	if len(updates)+len(deletes) == 0 {
		return &SyncResult{Imported: ex.imported}, nil
	}
	slices.Sort(updates)
	slices.Sort(deletes)
	var newCommits []string // reachable from no host ref before this sync
	checkedOut, err := s.Repo.CheckedOutBranches(ctx, s.Git)
	if err != nil {
		return nil, err
	}
	updates = slices.DeleteFunc(updates, func(hr string) bool {
		if checkedOut[hr] {
			s.logger().Warn("refsync: not moving a branch checked out on the host", "ref", hr)
			return true
		}
		return false
	})
	if len(updates) > 0 {
		tips := make([]string, len(updates))
		for i, hr := range updates {
			tips[i] = want[hr]
		}
		if err := s.checkCommits(ctx, tips); err != nil {
			return nil, err
		}
		if newCommits, err = s.newCommits(ctx, tips); err != nil {
			return nil, err
		}
	}
	var tx strings.Builder
	for _, hr := range updates {
		if old, ok := host[hr]; ok {
			fmt.Fprintf(&tx, "update %s %s %s\n", hr, want[hr], old)
		} else {
			fmt.Fprintf(&tx, "create %s %s\n", hr, want[hr])
		}
	}
	for _, hr := range deletes {
		fmt.Fprintf(&tx, "delete %s %s\n", hr, host[hr])
	}
	// core.logAllRefUpdates=always keeps a reflog for refs outside
	// refs/heads too, so a tip the agent rewrote stays reachable.
	if err := s.Git.UpdateRefs(ctx, s.Repo.Common(), "lazaret: sync from sandbox "+s.sandboxName(), strings.NewReader(tx.String())); err != nil {
		return nil, fmt.Errorf("updating host refs: %w", err)
	}
	if err := s.auditCommits(ctx, newCommits); err != nil {
		s.logger().Error("refsync: inspecting the synced commits for the audit trail", "err", err)
	}
	return &SyncResult{Updated: updates, Deleted: deletes, Imported: ex.imported}, nil
}

// checkCommits verifies that every tip is a commit and that everything
// reachable from the tips is present in the host repository (the check
// git fetch runs after receiving a pack).
func (s *Syncer) checkCommits(ctx context.Context, tips []string) error {
	in := strings.Join(tips, "\n") + "\n"
	out, err := s.Git.CatFileTypes(ctx, s.Repo.Common(), strings.NewReader(in))
	if err != nil {
		return err
	}
	for i, t := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if t != "commit" {
			return fmt.Errorf("%w: branch tip %s is not a commit on the host (%s)", errIncomplete, tips[min(i, len(tips)-1)], t)
		}
	}
	if err := s.Git.CheckConnected(ctx, s.Repo.Common(), strings.NewReader(in)); err != nil {
		return fmt.Errorf("%w: %w", errIncomplete, err)
	}
	return nil
}
