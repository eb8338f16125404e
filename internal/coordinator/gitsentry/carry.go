package gitsentry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// MaxCarriedFile bounds one file --with-changes copies; a larger one is
// left out with a note (commit it, or copy it in from a shell). A
// variable for the tests.
var MaxCarriedFile int64 = 1 << 30

// carryChanges copies the host working tree's changes against the commit
// the new clone in dir has checked out (the host's HEAD) into the clone's
// working tree: files of that commit the host modified (content, type or
// executable bit) or deleted, and files it lacks that git does not ignore
// (untracked, or only added to the host's index). Only the clone's working
// tree changes: its index stays at the commit, so git in the sandbox shows
// them as uncommitted changes, as on the host.
//
// Host git only lists (ls-files: reads the index and the ignore rules,
// runs no filter, hook or fsmonitor, writes nothing; hostgit hardens it).
// The contents are read by lazaret itself, confined to the workspace
// (os.Root) and never through a symlink: a path whose parent on the host
// is not a real directory counts as deleted, and a symlink is copied as a
// link (its target is resolved only inside the sandbox). Nothing is ever
// written on the host. Submodules' changes, nested repositories, special
// files and files over MaxCarriedFile are left out, each with a note.
func carryChanges(ctx context.Context, g *hostgit.Git, repo *gitrepo.HostRepo, dir string) (gitrepo.Carried, error) {
	var c gitrepo.Carried
	head, err := lsStage(ctx, g, dir)
	if err != nil {
		return c, err
	}
	hostIndex, err := lsStage(ctx, g, repo.TopLevel)
	if err != nil {
		return c, err
	}
	others, err := splitZ(g.ListUntracked(ctx, repo.TopLevel))
	if err != nil {
		return c, err
	}
	hr, err := os.OpenRoot(repo.TopLevel)
	if err != nil {
		return c, err
	}
	defer hr.Close()
	cr, err := os.OpenRoot(dir)
	if err != nil {
		return c, err
	}
	defer cr.Close()
	t := &carrier{host: hr, clone: cr, dirs: map[string]bool{}, c: &c, subs: gitlinks(head, hostIndex)}
	if len(t.subs) > 0 {
		t.note("changes inside submodules are not carried (%s): each is at the commit HEAD records", strings.Join(escapeAll(t.subs), ", "))
	}
	if err := t.carryTracked(head); err != nil {
		return c, err
	}
	var fresh []string
	for p, mode := range hostIndex {
		if _, ok := head[p]; !ok && mode != modeGitlink {
			fresh = append(fresh, p)
		}
	}
	for _, p := range append(fresh, others...) {
		if err := t.carryNew(p); err != nil {
			return c, err
		}
	}
	return c, nil
}

const (
	modeGitlink = "160000"
	modeSymlink = "120000"
)

// lsStage returns path → mode of the index of the working tree at dir.
func lsStage(ctx context.Context, g *hostgit.Git, dir string) (map[string]string, error) {
	recs, err := splitZ(g.ListIndex(ctx, dir))
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(recs))
	for _, r := range recs {
		meta, p, ok := strings.Cut(r, "\t")
		if !ok {
			return nil, fmt.Errorf("ls-files --stage: unexpected record %q", r)
		}
		mode, _, _ := strings.Cut(meta, " ")
		m[p] = mode
	}
	return m, nil
}

// splitZ splits the NUL-terminated output of a host git call.
func splitZ(out []byte, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	var recs []string
	for _, r := range bytes.Split(out, []byte{0}) {
		if len(r) > 0 {
			recs = append(recs, string(r))
		}
	}
	return recs, nil
}

// gitlinks are the submodule paths of either index.
func gitlinks(idx ...map[string]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range idx {
		for p, mode := range m {
			if mode == modeGitlink && !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out
}

func escapeAll(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = visible.Escape(p, visible.GoForm)
	}
	return out
}

// carrier copies one clone's worth of changes.
type carrier struct {
	host, clone *os.Root
	dirs        map[string]bool // host directories known to be real ones
	subs        []string
	c           *gitrepo.Carried
}

func (t *carrier) note(format string, args ...any) {
	t.c.Notes = append(t.c.Notes, fmt.Sprintf(format, args...))
}

// carryTracked brings the host's modifications and deletions of HEAD's
// files.
func (t *carrier) carryTracked(head map[string]string) error {
	for p, mode := range head {
		if mode == modeGitlink || t.skip(p) {
			continue
		}
		hi, err := t.hostLstat(p)
		if err != nil || hi.IsDir() {
			// Gone, or no longer a file (its content, if any, is
			// untracked and comes with the others).
			if err := t.clone.RemoveAll(p); err != nil {
				return err
			}
			t.c.Deleted++
			continue
		}
		same, err := t.same(p, hi)
		if err != nil {
			return err
		}
		if !same {
			ok, err := t.copy(p, hi)
			if err != nil {
				return err
			}
			if ok {
				t.c.Modified++
			}
		}
	}
	return nil
}

// carryNew brings a file HEAD lacks.
func (t *carrier) carryNew(p string) error {
	if strings.HasSuffix(p, "/") {
		t.note("%s is a nested repository: not carried", visible.Escape(p, visible.GoForm))
		return nil
	}
	if t.skip(p) {
		return nil
	}
	hi, err := t.hostLstat(p)
	if err != nil || hi.IsDir() {
		return nil // added to the index, then removed from the tree
	}
	ok, err := t.copy(p, hi)
	if ok {
		t.c.Untracked++
	}
	return err
}

// skip: a path lazaret never writes (a .git component, a name that is not
// a plain relative path) or one inside a submodule.
func (t *carrier) skip(p string) bool {
	if !fs.ValidPath(p) {
		t.note("%s: not a plain relative path, not carried", visible.Escape(p, visible.GoForm))
		return true
	}
	for _, c := range strings.Split(p, "/") {
		if strings.EqualFold(c, ".git") {
			t.note("%s: a .git entry, not carried", visible.Escape(p, visible.GoForm))
			return true
		}
	}
	for _, s := range t.subs {
		if strings.HasPrefix(p, s+"/") {
			return true
		}
	}
	return false
}

// hostLstat is Lstat of the host's p whose every parent is a real
// directory (not a symlink): what git would see at p.
func (t *carrier) hostLstat(p string) (fs.FileInfo, error) {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if ok, seen := t.dirs[d]; seen {
			if !ok {
				return nil, fs.ErrNotExist
			}
			break
		}
		fi, err := t.host.Lstat(d)
		t.dirs[d] = err == nil && fi.IsDir()
		if !t.dirs[d] {
			return nil, fs.ErrNotExist
		}
	}
	return t.host.Lstat(p)
}

// same reports whether the clone's p (as checked out) equals the host's.
func (t *carrier) same(p string, hi fs.FileInfo) (bool, error) {
	ci, err := t.clone.Lstat(p)
	if err != nil || ci.Mode().Type() != hi.Mode().Type() {
		return false, nil
	}
	switch {
	case hi.Mode()&fs.ModeSymlink != 0:
		a, err1 := t.host.Readlink(p)
		b, err2 := t.clone.Readlink(p)
		return err1 == nil && err2 == nil && a == b, nil
	case !hi.Mode().IsRegular():
		return false, nil
	}
	if hi.Size() != ci.Size() || hi.Mode()&0o100 != ci.Mode()&0o100 {
		return false, nil
	}
	hf, err := t.openHost(p, hi)
	if err != nil {
		return false, nil
	}
	defer hf.Close()
	cf, err := t.clone.Open(p)
	if err != nil {
		return false, err
	}
	defer cf.Close()
	return sameContent(hf, cf)
}

func sameContent(a, b io.Reader) (bool, error) {
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, erra := io.ReadFull(a, ba)
		nb, errb := io.ReadFull(b, bb)
		if !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		doneA := erra == io.EOF || erra == io.ErrUnexpectedEOF
		doneB := errb == io.EOF || errb == io.ErrUnexpectedEOF
		if doneA || doneB {
			return doneA && doneB, nil
		}
		if erra != nil {
			return false, erra
		}
		if errb != nil {
			return false, errb
		}
	}
}

// openHost opens the host's regular file p without following a symlink
// and without blocking (a FIFO swapped in), and checks it is the file hi
// describes.
func (t *carrier) openHost(p string, hi fs.FileInfo) (*os.File, error) {
	f, err := t.host.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || !os.SameFile(fi, hi) {
		f.Close()
		return nil, fmt.Errorf("%s changed while it was read", p)
	}
	return f, nil
}

// copy puts the host's p into the clone in place of whatever the
// checkout left there, and reports whether it did (false: left out, with
// a note).
func (t *carrier) copy(p string, hi fs.FileInfo) (bool, error) {
	shown := visible.Escape(p, visible.GoForm)
	switch {
	case hi.Mode()&fs.ModeSymlink != 0:
		target, err := t.host.Readlink(p)
		if err != nil {
			t.note("%s: %v, not carried", shown, err)
			return false, nil
		}
		if err := t.clonePlace(p); err != nil {
			return false, err
		}
		return true, t.clone.Symlink(target, p)
	case !hi.Mode().IsRegular():
		t.note("%s is not a regular file or a symlink: not carried", shown)
		return false, nil
	case hi.Size() > MaxCarriedFile:
		t.note("%s is larger than %d MiB: not carried (commit it, or copy it in from a shell)", shown, MaxCarriedFile>>20)
		return false, nil
	}
	hf, err := t.openHost(p, hi)
	if err != nil {
		t.note("%s: %v, not carried", shown, err)
		return false, nil
	}
	defer hf.Close()
	if err := t.clonePlace(p); err != nil {
		return false, err
	}
	perm := fs.FileMode(0o666)
	if hi.Mode()&0o100 != 0 {
		perm = 0o777 // as git checks out an executable (umask applies)
	}
	cf, err := t.clone.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return false, err
	}
	if _, err := io.Copy(cf, hf); err != nil {
		cf.Close()
		return false, fmt.Errorf("copying %s into the agent clone: %w", shown, err)
	}
	return true, cf.Close()
}

// clonePlace makes p's parents real directories in the clone (replacing
// a file or symlink the checkout put there: the host has a directory) and
// removes what is at p, so the next create is the new entry itself.
func (t *carrier) clonePlace(p string) error {
	parts := strings.Split(p, "/")
	for i := 1; i < len(parts); i++ {
		d := strings.Join(parts[:i], "/")
		fi, err := t.clone.Lstat(d)
		if err == nil && fi.IsDir() {
			continue
		}
		if err == nil {
			if err := t.clone.Remove(d); err != nil {
				return err
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := t.clone.Mkdir(d, 0o777); err != nil {
			return err
		}
	}
	if err := t.clone.RemoveAll(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// carryInto carries the host's changes into the clone being built at tmp
// when it starts at the host's HEAD, and records the outcome either way.
func carryInto(ctx context.Context, g *hostgit.Git, repo *gitrepo.HostRepo, a *domain.Anchor, tmp, start, head string, m gitrepo.RefMap) error {
	var c gitrepo.Carried
	if start != head {
		c.NotCarried = fmt.Sprintf("the agent clone starts at %s's tip %.12s, not at your HEAD %.12s (%s starts it again from HEAD)",
			m.AgentBranch(), start, head, "lazaret reset-branch")
	} else {
		var err error
		if c, err = carryChanges(ctx, g, repo, tmp); err != nil {
			return fmt.Errorf("carrying the host's uncommitted changes into the agent clone: %w", err)
		}
	}
	return gitrepo.WriteCarried(a.Root(), c)
}
