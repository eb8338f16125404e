package store

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The owner record is a sidecar file, <path>.owner, written by the process
// holding bbolt's flock on the database right after it gets the lock and
// removed when it closes. A process that cannot get the lock reads it to
// say who holds the store without opening the database. It records the
// process start time beside the pid, so a record left by a process that
// died (its lock died with it) or whose pid was reused is recognised as
// stale.

// owner is the content of the owner record.
type owner struct {
	PID   int
	Start uint64 // process start time, clock ticks since boot (/proc/<pid>/stat field 22)
	Role  string
}

func ownerPath(dbPath string) string { return dbPath + ".owner" }

// writeOwner records the current process as the store's owner. It replaces
// the file atomically so a reader never sees half a record.
func writeOwner(dbPath, role string) error {
	start, err := procStart(os.Getpid())
	if err != nil {
		return fmt.Errorf("owner record: %w", err)
	}
	// Temporary records left by a process killed mid-write are stale:
	// only the lock holder writes them, and that is us now.
	if old, _ := filepath.Glob(ownerPath(dbPath) + "-*"); len(old) > 0 {
		for _, o := range old {
			os.Remove(o)
		}
	}
	text := fmt.Sprintf("pid %d\nstart %d\nrole %s\n", os.Getpid(), start, role)
	tmp, err := os.CreateTemp(filepath.Dir(dbPath), filepath.Base(dbPath)+".owner-*")
	if err != nil {
		return fmt.Errorf("owner record: %w", err)
	}
	_, werr := tmp.WriteString(text)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("owner record: %w", err)
	}
	if err := os.Rename(tmp.Name(), ownerPath(dbPath)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("owner record: %w", err)
	}
	return nil
}

// removeOwner deletes the owner record if it is still this process's.
func removeOwner(dbPath string) {
	o, err := readOwner(dbPath)
	if err == nil && o.PID == os.Getpid() {
		os.Remove(ownerPath(dbPath))
	}
}

func readOwner(dbPath string) (owner, error) {
	f, err := os.Open(ownerPath(dbPath))
	if err != nil {
		return owner{}, err
	}
	defer f.Close()
	var o owner
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		switch k {
		case "pid":
			o.PID, _ = strconv.Atoi(v)
		case "start":
			o.Start, _ = strconv.ParseUint(v, 10, 64)
		case "role":
			o.Role = v
		}
	}
	if o.PID <= 0 {
		return owner{}, fmt.Errorf("%s: no pid", ownerPath(dbPath))
	}
	return o, nil
}

// alive reports whether the recorded process still runs (same pid and
// start time).
func (o owner) alive() bool {
	start, err := procStart(o.PID)
	return err == nil && start == o.Start
}

// procStart reads the start time of pid from /proc/<pid>/stat.
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may contain spaces
	// or parentheses: fields after it start after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); start time is field 22.
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// lockHolder finds the pid holding a FLOCK on the file at path in
// /proc/locks, for when the owner record is missing or stale (for example
// a holder that is not lazaret). It returns 0 when it cannot tell.
func lockHolder(path string) int {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0
	}
	// Lines look like: "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"
	// (major:minor in hex, inode in decimal).
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "FLOCK" {
			continue
		}
		if f[3] == "WRITE" && f[5] == want {
			pid, _ := strconv.Atoi(f[4])
			return pid
		}
	}
	return 0
}

// InUseError is returned by Open when another process holds the store's
// lock past the timeout.
type InUseError struct {
	Path string
	PID  int    // 0 when the holder could not be identified
	Role string // "coordinator", "lazaret audit", ...; empty when unknown
}

func (e *InUseError) Error() string {
	switch {
	case e.PID > 0 && e.Role != "":
		return fmt.Sprintf("state store %s is in use by %s pid %d", e.Path, e.Role, e.PID)
	case e.PID > 0:
		return fmt.Sprintf("state store %s is in use by pid %d", e.Path, e.PID)
	}
	return fmt.Sprintf("state store %s is in use by another process", e.Path)
}

// inUse builds the InUseError for path from the owner record, falling back
// to /proc/locks when the record is missing or stale.
func inUse(path string) *InUseError {
	e := &InUseError{Path: path}
	if o, err := readOwner(path); err == nil && o.alive() {
		e.PID, e.Role = o.PID, o.Role
		return e
	}
	e.PID = lockHolder(path)
	return e
}
