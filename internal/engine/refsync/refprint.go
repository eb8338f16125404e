package refsync

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A refs fingerprint lets a session that ends skip the ref sync it waits
// for (ctl.TypeGitSync) when nothing in the clone's refs changed since
// the last complete sync: that sync is a process in the sandbox and costs
// a few hundred milliseconds. The fingerprint is only ever a reason NOT
// to skip: what is synced is always read from the sandbox.

// maxPrintEntries bounds the walk; past it the refs count as changed.
const maxPrintEntries = 20000

// mtimeSlack covers the kernel's coarse file timestamps (one tick, at most
// 10 ms at HZ=100): a file changed after a fingerprint was taken has an
// mtime no earlier than that moment less one tick.
const mtimeSlack = 50 * time.Millisecond

// refsPrint stats HEAD, packed-refs, the git dir and everything under
// refs/ (a ref update renames into its directory, changing that
// directory's mtime; an in-place write changes the file's). It returns
// the fingerprint and the newest mtime it saw.
func refsPrint(gitDir string) (string, time.Time, error) {
	var b strings.Builder
	var newest time.Time
	n := 0
	add := func(rel string, fi fs.FileInfo) {
		st, _ := fi.Sys().(*syscall.Stat_t)
		var ino uint64
		if st != nil {
			ino = st.Ino
		}
		fmt.Fprintf(&b, "%s\x00%d\x00%d\x00%d\n", rel, fi.ModTime().UnixNano(), fi.Size(), ino)
		if fi.ModTime().After(newest) {
			newest = fi.ModTime()
		}
		n++
	}
	for _, name := range []string{".", "HEAD", "packed-refs"} {
		fi, err := os.Lstat(filepath.Join(gitDir, name))
		if err == nil {
			add(name, fi)
		} else if !os.IsNotExist(err) {
			return "", time.Time{}, err
		}
	}
	err := filepath.WalkDir(filepath.Join(gitDir, "refs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n > maxPrintEntries {
			return fmt.Errorf("more than %d entries under refs", maxPrintEntries)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(gitDir, p)
		add(rel, fi)
		return nil
	})
	if err != nil {
		return "", time.Time{}, err
	}
	return b.String(), newest, nil
}

// SyncIfChanged syncs unless the clone's refs are provably unchanged
// since the start of the last complete sync: same fingerprint, and every
// timestamp in it older than that start by more than the clock's tick.
func (s *Syncer) SyncIfChanged(ctx context.Context) error {
	if s.RefsDir != "" {
		s.mu.Lock()
		last, at := s.syncedPrint, s.syncedAt
		s.mu.Unlock()
		if last != "" {
			print, newest, err := refsPrint(s.RefsDir)
			if err == nil && print == last && newest.Before(at.Add(-mtimeSlack)) {
				return nil
			}
		}
	}
	_, err := s.Sync(ctx)
	return err
}

// notePrint is called at the start of a sync (under s.mu); record keeps
// it once the sync completed.
func (s *Syncer) notePrint() (string, time.Time) {
	if s.RefsDir == "" {
		return "", time.Time{}
	}
	at := time.Now()
	print, _, err := refsPrint(s.RefsDir)
	if err != nil {
		return "", time.Time{}
	}
	return print, at
}
