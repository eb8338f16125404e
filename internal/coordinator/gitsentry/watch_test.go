package gitsentry

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestRefWatcher(t *testing.T) {
	d := t.TempDir()
	os.MkdirAll(filepath.Join(d, "refs", "heads"), 0o755)
	w, err := newRefWatcher(d)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{}, 100)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.run(ctx, func() { ch <- struct{}{} })
	expect := func(what string, want bool) {
		t.Helper()
		select {
		case <-ch:
			if !want {
				t.Errorf("%s: notified", what)
			}
		case <-time.After(300 * time.Millisecond):
			if want {
				t.Errorf("%s: not notified", what)
			}
		}
		for len(ch) > 0 {
			<-ch
		}
	}
	os.WriteFile(filepath.Join(d, "index"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(d, "refs", "heads", "x.lock"), []byte("x"), 0o644)
	expect("index and a lock file", false)
	os.Rename(filepath.Join(d, "refs", "heads", "x.lock"), filepath.Join(d, "refs", "heads", "x"))
	expect("ref update (lock renamed into place)", true)
	os.MkdirAll(filepath.Join(d, "refs", "heads", "feature"), 0o755)
	expect("new ref directory", true)
	time.Sleep(50 * time.Millisecond)
	os.WriteFile(filepath.Join(d, "refs", "heads", "feature", "a"), []byte("x"), 0o644)
	expect("ref in a new directory", true)
	os.WriteFile(filepath.Join(d, "packed-refs"), []byte("x"), 0o644)
	expect("packed-refs", true)
	cancel()
}
