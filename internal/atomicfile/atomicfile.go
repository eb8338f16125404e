// Package atomicfile writes a file so that a reader sees the old
// contents or the new, never a part: a temporary file beside it, synced,
// then renamed over it.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces name with data, mode applied before the rename (so the
// file is never visible with a wider mode).
func Write(name string, data []byte, mode os.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(mode); err == nil {
		if _, err = f.Write(data); err == nil {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}
