//go:build unix

package config

import (
	"io/fs"
	"os"
	"syscall"
)

// checkFileOwner refuses a configuration file that another user could
// have written: it decides what is mounted into sandboxes and which host
// commands run without asking. Owned by the current user or root, and
// not writable by others.
func checkFileOwner(fi fs.FileInfo) error {
	if fi.Mode().Perm()&0o002 != 0 {
		return securityErrf("is writable by every user (mode %v); run chmod o-w on it", fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() && st.Uid != 0 {
		return securityErrf("is owned by uid %d, not by you (uid %d) or root", st.Uid, os.Getuid())
	}
	return nil
}
