package fdprobe

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// Leaks are descriptors of the kinds a terminal emulator or an IDE leaves
// open in the programs it starts: a terminal (the slave of a real pty), a
// file and the write end of a pipe.
type Leaks struct {
	Master, Slave *os.File
	File          *os.File
	PipeR, PipeW  *os.File
	targets       map[string]string // readlink target → what it is
}

// OpenLeaks opens the leaks; the file is created in dir.
func OpenLeaks(dir string) (*Leaks, error) {
	l := &Leaks{targets: map[string]string{}}
	var err error
	if l.Master, l.Slave, err = pty.Open(); err != nil {
		return nil, fmt.Errorf("opening a pty: %w", err)
	}
	if l.File, err = os.Create(filepath.Join(dir, "leaked-file")); err != nil {
		l.Close()
		return nil, err
	}
	if l.PipeR, l.PipeW, err = os.Pipe(); err != nil {
		l.Close()
		return nil, err
	}
	for what, f := range map[string]*os.File{"pty": l.Slave, "file": l.File, "pipe": l.PipeW} {
		t, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
		if err != nil {
			l.Close()
			return nil, err
		}
		l.targets[t] = what
	}
	return l, nil
}

// Files are the leaks to hand to a child as exec.Cmd.ExtraFiles: the child
// inherits them without close-on-exec, as fds 3, 4 and 5.
func (l *Leaks) Files() []*os.File { return []*os.File{l.Slave, l.File, l.PipeW} }

// ClearCloexec makes the leaks inheritable by every child this process
// starts, as if this process had inherited them itself.
func (l *Leaks) ClearCloexec() error {
	for _, f := range l.Files() {
		if _, err := unix.FcntlInt(f.Fd(), unix.F_SETFD, 0); err != nil {
			return fmt.Errorf("clearing close-on-exec: %w", err)
		}
	}
	return nil
}

// Found names the leaks among a process's descriptors (number → target,
// as read from /proc/<pid>/fd).
func (l *Leaks) Found(fds map[int]string) []string {
	var out []string
	for fd, t := range fds {
		if what, ok := l.targets[t]; ok {
			out = append(out, fmt.Sprintf("fd %d: %s (%s)", fd, what, t))
		}
	}
	sort.Strings(out)
	return out
}

// FoundIn is Found for a probe's report.
func (l *Leaks) FoundIn(r Report) []string { return l.Found(r.Targets()) }

// EchoBefore reads the terminal's output from the master until end (which
// the caller writes to the slave after the attack) and returns what came
// before it: the echo of any byte injected into the terminal's input.
func (l *Leaks) EchoBefore(end string) (string, error) {
	if _, err := l.Slave.WriteString(end); err != nil {
		return "", err
	}
	var got []byte
	buf := make([]byte, 256)
	for !bytes.Contains(got, []byte(end)) {
		n, err := l.Master.Read(buf)
		if err != nil {
			return string(got), err
		}
		got = append(got, buf[:n]...)
	}
	return string(got[:bytes.Index(got, []byte(end))]), nil
}

// Close closes every leak.
func (l *Leaks) Close() {
	for _, f := range []*os.File{l.Master, l.Slave, l.File, l.PipeR, l.PipeW} {
		if f != nil {
			f.Close()
		}
	}
}

// Targets maps the descriptors of process pid to their targets.
func Targets(pid int) (map[int]string, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if t, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
			out[fd] = t
		}
	}
	return out, nil
}
