// Package fdprobe is a test helper: a process that reports what it
// inherited (descriptors, terminal, session, environment) and whether it
// can inject keystrokes into a terminal with TIOCSTI. Tests run it as a
// child (a test binary re-executed with Arg) to check what lazaret hands to
// the processes it starts.
package fdprobe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Arg, as a test binary's first argument, makes Main run the probe.
const Arg = "lazaret-fdprobe"

// Marker starts the line of the probe's JSON report.
const Marker = "FDPROBE "

// InjectByte is what the probe pushes into every terminal it can reach.
const InjectByte = '\x07'

// FD is one open descriptor of the probe.
type FD struct {
	Num    int    `json:"num"`
	Target string `json:"target"` // readlink of /proc/self/fd/<num>
	// Cloexec descriptors were opened by the probe itself (the Go runtime
	// keeps a few); an inherited descriptor is never close-on-exec.
	Cloexec bool `json:"cloexec"`
	TTY     bool `json:"tty"`
	// Injected is true when TIOCSTI on it succeeded.
	Injected bool   `json:"injected"`
	Err      string `json:"err,omitempty"` // TIOCSTI's error on a tty
}

// Report is what the probe found.
type Report struct {
	PID    int      `json:"pid"`
	SID    int      `json:"sid"`
	FDs    []FD     `json:"fds"`
	DevTTY string   `json:"dev_tty"` // open("/dev/tty")'s error; "" when it opened
	TTYInj bool     `json:"tty_injected"`
	Env    []string `json:"env"`
}

// Leaked returns the inherited descriptors above 2.
func (r Report) Leaked() []FD {
	var out []FD
	for _, f := range r.FDs {
		if f.Num > 2 && !f.Cloexec {
			out = append(out, f)
		}
	}
	return out
}

// Targets maps the probe's inherited descriptors to their targets.
func (r Report) Targets() map[int]string {
	out := map[int]string{}
	for _, f := range r.FDs {
		if !f.Cloexec {
			out[f.Num] = f.Target
		}
	}
	return out
}

// Injected reports whether any TIOCSTI succeeded.
func (r Report) Injected() bool {
	if r.TTYInj {
		return true
	}
	for _, f := range r.FDs {
		if f.Injected {
			return true
		}
	}
	return false
}

// Main runs the probe and exits when os.Args[1] is Arg; call it first in
// TestMain (or in a test function, with args taken from flag.Args()).
func Main(args []string) {
	if len(args) < 1 || args[0] != Arg {
		return
	}
	r, err := Collect()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fdprobe:", err)
		os.Exit(3)
	}
	_ = Write(os.Stdout, r)
	os.Exit(0)
}

// Write prints r as one Marker line.
func Write(w io.Writer, r Report) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s%s\n", Marker, b)
	return err
}

// Collect lists the probe's descriptors (without the one it lists them
// through) and tries TIOCSTI on each terminal among them and on /dev/tty.
func Collect() (Report, error) {
	r := Report{PID: os.Getpid(), Env: os.Environ()}
	r.SID, _ = unix.Getsid(0)
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return r, err
	}
	defer d.Close()
	self := int(d.Fd())
	names, err := d.Readdirnames(-1)
	if err != nil {
		return r, err
	}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd == self {
			continue
		}
		f := FD{Num: fd}
		f.Target, _ = os.Readlink("/proc/self/fd/" + n)
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
			f.Cloexec = fl&unix.FD_CLOEXEC != 0
		}
		if _, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
			f.TTY = true
		}
		if err := inject(fd); err == nil {
			f.Injected = true
		} else if f.TTY {
			f.Err = err.Error()
		}
		r.FDs = append(r.FDs, f)
	}
	sort.Slice(r.FDs, func(i, j int) bool { return r.FDs[i].Num < r.FDs[j].Num })
	tty, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		r.DevTTY = err.Error()
	} else {
		r.TTYInj = inject(tty) == nil
		unix.Close(tty)
	}
	return r, nil
}

// inject pushes InjectByte into the input queue of the terminal fd.
func inject(fd int) error {
	b := byte(InjectByte)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCSTI, uintptr(unsafe.Pointer(&b)))
	if errno != 0 {
		return errno
	}
	return nil
}

// Parse finds the report in a probe's output.
func Parse(out []byte) (Report, error) {
	var r Report
	for _, line := range bytes.Split(out, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte(Marker)); ok {
			return r, json.Unmarshal(rest, &r)
		}
	}
	return r, errors.New("no probe report in the output")
}

// Run runs cmd (a process that ends up running the probe, its stderr
// passed through) and returns the probe's report.
func Run(cmd *exec.Cmd) (Report, error) {
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return Report{}, err
	}
	r, err := Parse(out)
	if err != nil {
		return r, fmt.Errorf("%w: %q", err, out)
	}
	return r, nil
}
