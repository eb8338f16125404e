package fdsafe_test

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func clearCloexec(f *os.File) error {
	_, err := unix.FcntlInt(f.Fd(), unix.F_SETFD, 0)
	return err
}

func cloexec(t *testing.T, f *os.File) bool {
	t.Helper()
	fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fl&unix.FD_CLOEXEC != 0
}
