package domainlock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestLockExclusiveAndNeverUnlinked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	l1, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l1.Close()
	l2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if ok, err := l1.TryLock(); !ok || err != nil {
		t.Fatalf("first lock: %v %v", ok, err)
	}
	if ok, err := l2.TryLock(); ok || err != nil {
		t.Fatalf("second lock while held: %v %v", ok, err)
	}
	got := make(chan error, 1)
	go func() { got <- l2.Lock(context.Background()) }()
	select {
	case <-got:
		t.Fatal("blocking lock returned while held")
	case <-time.After(100 * time.Millisecond):
	}
	if err := l1.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("lock file: %v %v", fi, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l1.Lock(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
}

// TestLockRefusesSymlink: a symlink planted at the lock path is refused
// (O_NOFOLLOW); the same target opened directly is accepted (control).
func TestLockRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.lock")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if l, err := Open(target); err != nil {
		t.Fatalf("control: %v", err)
	} else {
		l.Close()
	}
	if _, err := Open(link); !errors.Is(err, ErrInsecureLock) {
		t.Fatalf("symlink accepted: %v", err)
	}
	fifo := filepath.Join(dir, "dir.lock")
	if err := os.Mkdir(fifo, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(fifo); err == nil {
		t.Fatal("directory accepted")
	}
}

// TestLockRefusesOtherOwner needs root to make a file of another user.
func TestLockRefusesOtherOwner(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to create a file owned by another user")
	}
	path := filepath.Join(t.TempDir(), "x.lock")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if l, err := Open(path); err != nil {
		t.Fatalf("control: %v", err)
	} else {
		l.Close()
	}
	if err := os.Chown(path, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); !errors.Is(err, ErrInsecureLock) {
		t.Fatalf("foreign lock accepted: %v", err)
	}
}
