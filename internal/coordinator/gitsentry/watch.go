package gitsentry

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// refWatcher reports changes to the clone's refs through inotify on the
// host side of the clone (the sandbox's writes land on the host file
// system, so the host kernel sees them). It watches <clone>/.git itself
// (HEAD, packed-refs) and every directory under .git/refs. It only
// triggers a sync: what is synced is read from the sandbox, never from
// these files.
type refWatcher struct {
	gitDir string
	f      *os.File
	wds    map[int32]string // watch descriptor → directory relative to gitDir
}

const watchMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_DELETE |
	unix.IN_CLOSE_WRITE | unix.IN_DELETE_SELF | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

// maxWatches bounds how many directories one clone may make us watch.
const maxWatches = 4096

func newRefWatcher(gitDir string) (*refWatcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	// A non-blocking descriptor in an *os.File uses the runtime poller, so
	// Close from another goroutine ends a pending Read.
	w := &refWatcher{gitDir: gitDir, f: os.NewFile(uintptr(fd), "inotify"), wds: map[int32]string{}}
	if err := w.add("."); err != nil {
		w.f.Close()
		return nil, err
	}
	_ = w.addTree("refs")
	return w, nil
}

func (w *refWatcher) add(rel string) error {
	if len(w.wds) >= maxWatches {
		return errors.New("too many ref directories to watch")
	}
	wd, err := unix.InotifyAddWatch(int(w.f.Fd()), filepath.Join(w.gitDir, rel), watchMask)
	if err != nil {
		return err
	}
	w.wds[int32(wd)] = rel
	return nil
}

// addTree watches rel and the directories below it. Symlinks are not
// followed (IN_DONT_FOLLOW, and WalkDir does not descend into them).
func (w *refWatcher) addTree(rel string) error {
	return filepath.WalkDir(filepath.Join(w.gitDir, rel), func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		r, _ := filepath.Rel(w.gitDir, p)
		return w.add(r)
	})
}

// relevant reports whether an event on name in directory dir can change a
// branch tip.
func relevant(dir, name string) bool {
	if strings.HasSuffix(name, ".lock") {
		return false
	}
	if dir == "." {
		return name == "HEAD" || name == "packed-refs" || name == "refs"
	}
	return true
}

// run reads events until ctx ends, calling notify (non-blocking) on every
// relevant change.
func (w *refWatcher) run(ctx context.Context, notify func()) {
	go func() {
		<-ctx.Done()
		w.f.Close()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return
		}
		hit := false
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			if off+unix.SizeofInotifyEvent+int(ev.Len) > n {
				break
			}
			nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			name := strings.TrimRight(string(nameBytes), "\x00")
			off += unix.SizeofInotifyEvent + int(ev.Len)
			dir, ok := w.wds[ev.Wd]
			if !ok {
				continue
			}
			if ev.Mask&unix.IN_IGNORED != 0 {
				delete(w.wds, ev.Wd)
				continue
			}
			if ev.Mask&unix.IN_ISDIR != 0 && ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
				if dir != "." || name == "refs" {
					_ = w.addTree(filepath.Join(dir, name))
				}
			}
			if relevant(dir, name) {
				hit = true
			}
		}
		if hit {
			notify()
		}
	}
}

// watchLoop syncs on every notification (coalesced), and every interval
// in case an event was lost, until ctx ends.
func watchLoop(ctx context.Context, kick <-chan struct{}, interval time.Duration, sync func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
			// Let a burst of ref writes (commit, rebase) settle.
			time.Sleep(debounce)
			select {
			case <-kick:
			default:
			}
		case <-t.C:
		}
		sync(ctx)
	}
}

// Retry policy of the watcher.
const (
	debounce             = 20 * time.Millisecond
	pollInterval         = 10 * time.Second
	fallbackPollInterval = 500 * time.Millisecond
)
