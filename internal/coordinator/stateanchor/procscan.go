package stateanchor

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/lazaret-dev/lazaret/internal/engine/statestore"
)

// daemon is a running fuse-overlayfs found by its command line.
type daemon struct {
	PID        int
	MountPoint string
}

// fuseDaemons lists the fuse-overlayfs processes of the current user whose
// mount point (their last argument) is dir or below it. podman unshare
// does not make a PID namespace, so these processes are visible in the
// host's /proc. Zombies have an empty command line and are skipped.
func fuseDaemons(procRoot, dir string) ([]daemon, error) {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, err
	}
	uid := os.Getuid()
	var out []daemon
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		fi, err := os.Stat(filepath.Join(procRoot, e.Name()))
		if err != nil {
			continue // exited meanwhile
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != uid {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join(procRoot, e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if mp, ok := fuseMountPoint(cmdline); ok && statestore.Within(mp, dir) {
			out = append(out, daemon{PID: pid, MountPoint: mp})
		}
	}
	return out, nil
}

// fuseMountPoint returns the mount point of a fuse-overlayfs command line
// (NUL-separated argv): the last argument, when argv[0]'s base name is
// fuse-overlayfs and the mount point is a clean absolute path.
func fuseMountPoint(cmdline []byte) (string, bool) {
	args := bytes.Split(bytes.TrimRight(cmdline, "\x00"), []byte{0})
	if len(args) < 2 || filepath.Base(string(args[0])) != "fuse-overlayfs" {
		return "", false
	}
	mp := string(args[len(args)-1])
	if mp == "" || mp[0] != '/' || filepath.Clean(mp) != mp {
		return "", false
	}
	return mp, true
}

// signal sends sig to pid, treating an exited process as success.
func signal(pid int, sig syscall.Signal) error {
	err := syscall.Kill(pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
