package refsync

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func writeRef(t *testing.T, gitDir, name, oid string) {
	t.Helper()
	p := filepath.Join(gitDir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	// As git does: a lock file renamed over the ref.
	if err := os.WriteFile(p+".lock", []byte(oid+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".lock", p); err != nil {
		t.Fatal(err)
	}
}

func ageTree(t *testing.T, dir string, by time.Duration) {
	t.Helper()
	old := time.Now().Add(-by)
	_ = filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			err = os.Chtimes(p, old, old)
		}
		return err
	})
}

// TestSyncIfChangedSkipsOnlyUnchangedRefs: an unchanged, settled refs tree
// skips the sync; a ref renamed into place, a new branch directory or an
// in-place write changes the fingerprint (control: the skip is taken only
// for the unchanged tree).
func TestSyncIfChangedSkipsOnlyUnchangedRefs(t *testing.T) {
	gitDir := t.TempDir()
	writeRef(t, gitDir, "HEAD", "ref: refs/heads/main")
	writeRef(t, gitDir, "refs/heads/main", "1111")
	ageTree(t, gitDir, time.Hour)
	s := &Syncer{RefsDir: gitDir}
	s.syncedPrint, s.syncedAt = s.notePrint()
	if s.syncedPrint == "" {
		t.Fatal("no fingerprint")
	}
	// Unchanged and settled: skipped (Sync itself would fail here: no repo).
	if err := s.SyncIfChanged(context.Background()); err != nil {
		t.Fatalf("unchanged refs were not skipped: %v", err)
	}
	changes := map[string]func(){
		"commit on main": func() { writeRef(t, gitDir, "refs/heads/main", "2222") },
		"new branch dir": func() { writeRef(t, gitDir, "refs/heads/feat/x", "3333") },
		"in-place write": func() {
			if err := os.WriteFile(filepath.Join(gitDir, "refs/heads/main"), []byte("4444\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"packed-refs": func() { writeRef(t, gitDir, "packed-refs", "5555 refs/heads/y") },
	}
	for name, change := range changes {
		ageTree(t, gitDir, time.Hour)
		before, _, _ := refsPrint(gitDir)
		change()
		after, newest, err := refsPrint(gitDir)
		if err != nil {
			t.Fatal(err)
		}
		if after == before {
			t.Errorf("%s: fingerprint unchanged", name)
		}
		if !newest.After(time.Now().Add(-time.Minute)) {
			t.Errorf("%s: newest mtime %v is not the change's", name, newest)
		}
	}
	// A fresh change, even with the same fingerprint, is never skipped
	// within the clock's tick: the recorded start is too close.
	s.syncedPrint, s.syncedAt = s.notePrint()
	p, newest, _ := refsPrint(gitDir)
	if p == s.syncedPrint && newest.Before(s.syncedAt.Add(-mtimeSlack)) {
		t.Fatal("a just-changed tree counts as settled")
	}
}
