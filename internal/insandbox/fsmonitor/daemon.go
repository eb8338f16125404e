package fsmonitor

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Watch mask: everything that changes a directory's entries or a file's
// content, mode or times. IN_DONT_FOLLOW: a symlink is never watched
// through (git tracks the link itself).
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_ATTRIB |
	unix.IN_CLOSE_WRITE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

// Limits. Past maxWatches the daemon gives up (every answer "/"); past
// maxChanged remembered paths it forgets them and answers "/" to older
// tokens; an answer of more than maxReport paths is sent as "/".
const (
	maxWatches = 200_000
	maxChanged = 100_000
	maxReport  = 20_000
)

// Daemon watches one work tree. Its zero value is not usable; see New.
type Daemon struct {
	root     string // absolute, clean
	instance string

	mu       sync.Mutex
	fd       int
	wds      map[int32]string // watch → directory relative to root ("" is root)
	dirs     map[string]int32 // the reverse
	rootWD   int32
	seq      uint64
	fullSeq  uint64            // tokens older than this get "/"
	changed  map[string]uint64 // path → seq of its last change
	disabled string            // why every answer is "/" for good
	pending  map[string]bool   // files created since the last link check
	buf      []byte
	closed   bool

	// Logf, if set, receives the few notable events (giving up, overflow).
	Logf func(format string, args ...any)
}

// New starts watching the tree at root: every directory but the top
// level's .git (git's own files, written on every status; a mount of its
// own in the sandbox). Each directory is watched before it is listed, so
// an entry created during the walk is either listed or reported.
func New(root string) (*Daemon, error) {
	root = filepath.Clean(root)
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("fsmonitor root %q is not absolute", root)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		unix.Close(fd)
		return nil, err
	}
	d := &Daemon{root: root, instance: hex.EncodeToString(id[:]), fd: fd,
		wds: map[int32]string{}, dirs: map[string]int32{}, changed: map[string]uint64{}, pending: map[string]bool{},
		buf: make([]byte, 64<<10), rootWD: -1}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.addWatch(""); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("watching %s: %w", root, err)
	}
	d.rootWD = d.dirs[""]
	d.walk("", true)
	if d.disabled != "" {
		d.logf("fsmonitor: disabled: %s", d.disabled)
	}
	return d, nil
}

func (d *Daemon) logf(format string, args ...any) {
	if d.Logf != nil {
		d.Logf(format, args...)
	}
}

func join(rel, name string) string {
	if rel == "" {
		return name
	}
	return rel + "/" + name
}

func (d *Daemon) abs(rel string) string {
	if rel == "" {
		return d.root
	}
	return d.root + "/" + rel
}

func (d *Daemon) disable(why string) {
	if d.disabled == "" {
		d.disabled = why
		d.logf("fsmonitor: disabled (every answer is a full scan): %s", why)
	}
}

// markFull makes every token issued so far get "/".
func (d *Daemon) markFull() {
	d.seq++
	d.fullSeq = d.seq
	clear(d.changed)
}

func (d *Daemon) record(p string) {
	d.seq++
	d.changed[p] = d.seq
	if len(d.changed) > maxChanged {
		d.markFull()
	}
}

func (d *Daemon) addWatch(rel string) error {
	if len(d.wds) >= maxWatches {
		d.disable("more than the watch limit of directories")
		return errors.New("too many directories")
	}
	wd, err := unix.InotifyAddWatch(d.fd, d.abs(rel), watchMask)
	if err != nil {
		return err
	}
	w := int32(wd)
	if old, ok := d.wds[w]; ok && old != rel && d.dirs[old] == w {
		delete(d.dirs, old)
	}
	d.wds[w] = rel
	d.dirs[rel] = w
	return nil
}

// walk watches every directory under rel (rel itself is watched) and, if
// checkLinks, gives up on the first regular file with more than one link:
// a change made through another name of it would be reported under that
// name only.
func (d *Daemon) walk(rel string, checkLinks bool) {
	entries, err := os.ReadDir(d.abs(rel))
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			// Gone already: its removal is an event of the parent.
			d.markFull()
			return
		}
		// Unreadable: what lies below it is not watched.
		d.disable(fmt.Sprintf("listing %s: %v", rel, err))
		return
	}
	for _, e := range entries {
		if d.disabled != "" {
			return
		}
		p := join(rel, e.Name())
		if rel == "" && e.Name() == ".git" {
			continue
		}
		switch {
		case e.IsDir():
			if err := d.addWatch(p); err != nil {
				if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) {
					d.disable(fmt.Sprintf("watching %s: %v", p, err))
					return
				}
				d.markFull()
				continue
			}
			d.walk(p, checkLinks)
		case e.Type().IsRegular() && checkLinks:
			d.checkLinks(p)
		}
	}
}

func (d *Daemon) checkLinks(p string) {
	var st unix.Stat_t
	if err := unix.Lstat(d.abs(p), &st); err != nil {
		return
	}
	if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink > 1 {
		d.disable("hard-linked file " + p)
	}
}

// removeSubtree stops watching rel and everything under it (a directory
// moved away: its watches would report under the old names).
func (d *Daemon) removeSubtree(rel string) {
	for p, wd := range d.dirs {
		if p == rel || strings.HasPrefix(p, rel+"/") {
			_, _ = unix.InotifyRmWatch(d.fd, uint32(wd))
			delete(d.dirs, p)
			delete(d.wds, wd)
		}
	}
}

// drain reads and applies every queued event. It runs before each answer:
// gVisor and Linux queue an inotify event before the system call that
// caused it returns, so an answer covers every change that completed
// before the query.
func (d *Daemon) drain() {
	d.readQueue()
	d.checkPending()
}

func (d *Daemon) readQueue() {
	for !d.closed {
		n, err := unix.Read(d.fd, d.buf)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if !errors.Is(err, unix.EAGAIN) {
				d.disable(fmt.Sprintf("reading inotify: %v", err))
			}
			return
		}
		if n <= 0 {
			return
		}
		d.apply(d.buf[:n])
	}
}

// checkPending checks the files created (or renamed into place) since
// the last drain for hard links, once the queue is empty: a name created
// by link(2) is reported as created, and a later write through it would
// be reported under that name only. A name that is gone already was
// renamed or unlinked, and the event saying which is queued by now (see
// drain): reading it settles the name (a rename moves the check to the
// new name, as with `sed -i`; a file created and unlinked before it could
// be checked makes everything reported as changed).
func (d *Daemon) checkPending() {
	for round := 0; len(d.pending) > 0; round++ {
		vanished := false
		for p := range d.pending {
			var st unix.Stat_t
			if err := unix.Lstat(d.abs(p), &st); err != nil {
				vanished = true
				continue
			}
			if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink > 1 {
				d.disable("hard-linked file " + p)
			}
			delete(d.pending, p)
		}
		if !vanished {
			return
		}
		if round == 2 {
			d.markFull()
			clear(d.pending)
			return
		}
		d.readQueue()
	}
}

// apply handles a buffer of raw inotify events.
func (d *Daemon) apply(b []byte) {
	const hdr = unix.SizeofInotifyEvent
	for len(b) >= hdr {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		n := hdr + int(ev.Len)
		if n > len(b) {
			d.markFull()
			return
		}
		name := string(b[hdr:n])
		if i := strings.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		d.event(ev.Wd, ev.Mask, name)
		b = b[n:]
	}
}

func (d *Daemon) event(wd int32, mask uint32, name string) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		d.logf("fsmonitor: inotify queue overflow")
		d.markFull()
		return
	}
	if mask&unix.IN_UNMOUNT != 0 {
		d.disable("file system unmounted")
		return
	}
	rel, ok := d.wds[wd]
	if !ok {
		return // a watch already removed
	}
	if mask&unix.IN_IGNORED != 0 {
		delete(d.wds, wd)
		if d.dirs[rel] == wd {
			delete(d.dirs, rel)
		}
		if wd == d.rootWD {
			d.disable("the work tree's watch was removed")
		}
		return
	}
	if mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
		if wd == d.rootWD {
			d.disable("the work tree was removed or moved")
		}
		// Otherwise the parent reports it as a directory event.
		return
	}
	if name == "" {
		return // the watched directory's own attributes: not git's business
	}
	if rel == "" && name == ".git" {
		return
	}
	p := join(rel, name)
	if mask&unix.IN_ISDIR != 0 {
		if mask&(unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_DELETE|unix.IN_MOVED_FROM) == 0 {
			d.record(p)
			return
		}
		// A directory appeared, vanished or moved: git 2.39's hook
		// protocol cannot invalidate a whole cone reliably (untracked
		// cache included), so the next answer is "/".
		d.markFull()
		if mask&(unix.IN_MOVED_FROM|unix.IN_DELETE) != 0 {
			d.removeSubtree(p)
		}
		if mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
			if err := d.addWatch(p); err != nil {
				if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) {
					d.disable(fmt.Sprintf("watching %s: %v", p, err))
				}
				return
			}
			d.walk(p, true)
		}
		return
	}
	d.record(p)
	switch {
	case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		d.pending[p] = true
	case mask&unix.IN_MOVED_FROM != 0:
		delete(d.pending, p) // checked under the name it moved to
	case mask&unix.IN_DELETE != 0 && d.pending[p]:
		delete(d.pending, p)
		d.markFull() // created and deleted before it could be checked
	}
}

// Query answers one hook request.
func (d *Daemon) Query(r Request) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.drain()
	tok := Token{Instance: d.instance, Seq: d.seq}.String()
	if d.disabled != "" || r.Dir != d.root {
		return FullAnswer(tok)
	}
	t, err := ParseToken(r.Token)
	if err != nil || t.Instance != d.instance || t.Seq > d.seq || t.Seq < d.fullSeq {
		return FullAnswer(tok)
	}
	var paths []string
	for p, s := range d.changed {
		if s > t.Seq {
			paths = append(paths, p)
		}
	}
	if len(paths) > maxReport {
		return FullAnswer(tok)
	}
	sort.Strings(paths)
	return Answer{Token: tok, Paths: paths}.Bytes()
}

// Run drains events as they come until Close, so the kernel's queue does
// not overflow between queries.
func (d *Daemon) Run() {
	for {
		fds := []unix.PollFd{{Fd: int32(d.fd), Events: unix.POLLIN}}
		_, err := unix.Poll(fds, 1000)
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return
		}
		if err == nil && fds[0].Revents != 0 {
			d.drain()
		}
		d.mu.Unlock()
		if err != nil && !errors.Is(err, unix.EINTR) {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// Serve answers hook requests on ln until it fails.
func (d *Daemon) Serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go d.serveConn(c)
	}
}

func (d *Daemon) serveConn(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req, err := ReadRequest(bufio.NewReader(io.LimitReader(c, 2*MaxRequestField+2)))
	if err != nil {
		return
	}
	_ = WriteFrame(c, d.Query(req))
}

// Listen listens on the UNIX socket path, replacing a stale socket left by
// a daemon that died, and refusing if a live one answers there.
func Listen(path string) (net.Listener, error) {
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("%s: a daemon is already listening", path)
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	// Any user of the sandbox may ask (connecting needs write access).
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}
