package domain

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

func checkOwner(path string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: cannot read owner", path)
	}
	if int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%s: owned by uid %d, not %d", path, st.Uid, os.Getuid())
	}
	return nil
}
