package limits

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/coordinator/procwatch"
)

// memfdName is the runsc Sentry's memory file: every page of the
// sandbox's application memory, its tmpfs files included. Its allocated
// blocks are the memory the sandbox holds of the host (measured: it grows
// with an allocation inside and falls at once when that is freed).
const memfdName = "/memfd:runsc-memory (deleted)"

// sentry is the sandbox's host processes: the runsc Sentry (podman's
// State.Pid of the container) and its gofer, each held by a pidfd so that
// a signal never reaches a process that took a recycled pid.
type sentry struct {
	pid   int
	memfd *os.File // the Sentry's memory file, opened through /proc/PID/fd
	statm *os.File // /proc/PID/statm, read again at offset 0 each poll
	page  int64
	buf   [128]byte

	mu    sync.Mutex
	procs []*proc // the Sentry first, then the gofer
}

// proc is one host process held by a pidfd.
type proc struct {
	pid  int
	name string
	fd   int
}

// openSentry finds the Sentry pid (already identified by the caller) and
// its gofer. goferPid is the gofer runsc recorded (0: find it by scanning
// the Sentry's siblings).
func openSentry(p procwatch.Process, goferPid int) (*sentry, error) {
	s := &sentry{pid: p.PID, page: int64(os.Getpagesize())}
	sp, err := openProc(p.PID, "runsc-sandbox")
	if err != nil {
		return nil, err
	}
	// The pidfd is open: if the pid was recycled between the caller's
	// identification and now, the start time differs.
	if !p.Alive() {
		unix.Close(sp.fd)
		return nil, fmt.Errorf("the sandbox process %d has exited", p.PID)
	}
	s.procs = append(s.procs, sp)
	if err := s.openMemory(); err != nil {
		s.close()
		return nil, err
	}
	// Without the gofer a pause still holds: the Sentry makes every
	// write of the sandbox (directfs), the gofer only opens files.
	if g, err := findGofer(p.PID, goferPid); err == nil {
		s.procs = append(s.procs, g)
	}
	return s, nil
}

func openProc(pid int, want string) (*proc, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd of %s (pid %d): %w", want, pid, err)
	}
	if arg0 := argv0(pid); arg0 != want {
		unix.Close(fd)
		return nil, fmt.Errorf("pid %d is %q, not %s", pid, arg0, want)
	}
	return &proc{pid: pid, name: want, fd: fd}, nil
}

// argv0 is the first word of pid's command line (runsc names its
// processes runsc-sandbox and runsc-gofer).
func argv0(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	a, _, _ := bytes.Cut(data, []byte{0})
	return string(a)
}

// openMemory opens the Sentry's memory file and its statm.
func (s *sentry) openMemory() error {
	dir := fmt.Sprintf("/proc/%d/fd", s.pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if l, err := os.Readlink(p); err != nil || l != memfdName {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("the sandbox's memory file: %w", err)
		}
		s.memfd = f
		break
	}
	if s.memfd == nil {
		return fmt.Errorf("the sandbox process %d has no %s", s.pid, memfdName)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/statm", s.pid))
	if err != nil {
		return err
	}
	s.statm = f
	return nil
}

// used is the sandbox's memory: the memory file's allocated blocks and
// the Sentry's own anonymous resident memory (statm's resident minus
// shared; the memory file's pages the Sentry maps are shared).
func (s *sentry) used() (int64, error) {
	fi, err := s.memfd.Stat()
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, errors.New("memory file: no stat")
	}
	n, err := s.statm.ReadAt(s.buf[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	f := strings.Fields(string(s.buf[:n]))
	if len(f) < 3 {
		return 0, fmt.Errorf("statm: %q", s.buf[:n])
	}
	res, err1 := strconv.ParseInt(f[1], 10, 64)
	shared, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("statm: %q", s.buf[:n])
	}
	return st.Blocks*512 + max(res-shared, 0)*s.page, nil
}

// signal sends sig to the Sentry and the gofer (or only the Sentry).
func (s *sentry) signal(sig unix.Signal, sentryOnly bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for i, p := range s.procs {
		if sentryOnly && i > 0 {
			break
		}
		if err := unix.PidfdSendSignal(p.fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("%s %d: %w", p.name, p.pid, err))
		}
	}
	return errors.Join(errs...)
}

func (s *sentry) pause() error  { return s.signal(unix.SIGSTOP, false) }
func (s *sentry) resume() error { return s.signal(unix.SIGCONT, false) }

// kill ends the Sentry (and with it the sandbox); the gofer is resumed
// so that it can see its Sentry gone and exit.
func (s *sentry) kill() error {
	err := s.signal(unix.SIGKILL, true)
	return errors.Join(err, s.signal(unix.SIGCONT, false))
}

func (s *sentry) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.procs {
		unix.Close(p.fd)
	}
	s.procs = nil
	if s.memfd != nil {
		s.memfd.Close()
	}
	if s.statm != nil {
		s.statm.Close()
	}
}

// findGofer opens the Sentry's gofer: the pid runsc recorded, else the
// Sentry's sibling (both are children of the container's conmon) named
// runsc-gofer. Either must be the Sentry's sibling.
func findGofer(sentryPid, recorded int) (*proc, error) {
	parent := ppid(sentryPid)
	if parent <= 1 {
		return nil, fmt.Errorf("the sandbox process %d has no parent", sentryPid)
	}
	candidates := []int{recorded}
	if recorded <= 0 {
		candidates = siblings(parent)
	}
	for _, pid := range candidates {
		if pid <= 0 || pid == sentryPid || ppid(pid) != parent {
			continue
		}
		p, err := openProc(pid, "runsc-gofer")
		if err != nil {
			continue
		}
		if ppid(pid) != parent { // the pidfd now holds it: check again
			unix.Close(p.fd)
			continue
		}
		return p, nil
	}
	return nil, fmt.Errorf("no runsc-gofer beside the sandbox process %d", sentryPid)
}

// ppid is pid's parent (0 when it cannot be read).
func ppid(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// siblings lists the children of parent (one /proc scan, at start only).
func siblings(parent int) []int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", parent, parent))
	if err == nil {
		var out []int
		for _, w := range strings.Fields(string(data)) {
			if n, err := strconv.Atoi(w); err == nil {
				out = append(out, n)
			}
		}
		return out
	}
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && ppid(n) == parent {
			out = append(out, n)
		}
	}
	return out
}

// runscState is what the limits need of runsc's state file of the
// container (the pinned runsc writes it under its root).
type runscState struct {
	GoferPid int `json:"goferPid"`
	Sandbox  *struct {
		Pid int `json:"pid"`
	} `json:"sandbox"`
}

// recordedGofer reads the gofer's pid from runsc's state of container id
// under root; 0 when it cannot, or when the state names another Sentry.
func recordedGofer(root, id string, sentryPid int) int {
	f, err := os.Open(filepath.Join(root, id+"_sandbox:"+id+".state"))
	if err != nil {
		return 0
	}
	defer f.Close()
	var st runscState
	if json.NewDecoder(io.LimitReader(f, 4<<20)).Decode(&st) != nil || st.Sandbox == nil || st.Sandbox.Pid != sentryPid {
		return 0
	}
	return st.GoferPid
}
