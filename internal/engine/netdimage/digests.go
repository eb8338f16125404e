package netdimage

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/statestore"
)

// DigestCacheName is the file, in the user's lazaret runtime dir, where
// the binaries' SHA-256 sums are remembered by identity.
const DigestCacheName = "netd-image-digests.json"

// fileID is what changes when a file's content can have changed: a
// rewrite moves the change time (set by the kernel, which no unprivileged
// process can set back), a new file renamed into place is another inode.
type fileID struct {
	Dev, Ino     uint64
	Size         int64
	Mtime, Ctime int64 // nanoseconds
}

type digestEntry struct {
	ID     fileID `json:"id"`
	SHA256 string `json:"sha256"`
}

// digests remembers the SHA-256 of files by identity, so that naming the
// sidecar's image does not read its ~14 MB of binaries at every start and
// again at every teardown that leaves a spare (≈ 13 ms of CPU each on the
// development machine, beside podman's start: docs/PERFORMANCE.md). A
// file changed within racyWindow of its hashing is not remembered: file
// times are only as fine as the kernel's clock tick, so a second write in
// the same tick would leave the same identity (git's "racy clean" case).
type digests struct {
	path    string // "" remembers nothing
	entries map[string]digestEntry
	changed bool
	now     func() time.Time
}

const racyWindow = 2 * time.Second

func loadDigests(path string) *digests {
	d := &digests{path: path, entries: map[string]digestEntry{}, now: time.Now}
	if path != "" {
		// Unreadable or malformed: start afresh, the sums are recomputed.
		if _, err := statestore.ReadJSON(path, &d.entries); err != nil || d.entries == nil {
			d.entries = map[string]digestEntry{}
		}
	}
	return d
}

func identify(path string) (fileID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, fmt.Errorf("%s: no stat data", path)
	}
	return fileID{Dev: st.Dev, Ino: st.Ino, Size: st.Size,
		Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}, nil
}

// sum is path's SHA-256, remembered or computed.
func (d *digests) sum(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	id, err := identify(abs)
	if err != nil {
		return "", err
	}
	if e, ok := d.entries[abs]; ok && e.ID == id && e.SHA256 != "" {
		return e.SHA256, nil
	}
	sum, err := fileSHA256(abs)
	if err != nil {
		return "", err
	}
	after, err := identify(abs)
	racy := err != nil || after != id ||
		d.now().Sub(time.Unix(0, max(id.Mtime, id.Ctime))) < racyWindow
	if racy {
		delete(d.entries, abs)
	} else {
		d.entries[abs] = digestEntry{ID: id, SHA256: sum}
	}
	d.changed = true
	return sum, nil
}

// save writes the remembered sums back when they changed. A failure only
// costs the next start the hashing.
func (d *digests) save() {
	if d.path == "" || !d.changed {
		return
	}
	for p := range d.entries {
		if _, err := os.Lstat(p); err != nil {
			delete(d.entries, p) // a build directory since removed
		}
	}
	_ = statestore.WriteJSON(d.path, d.entries)
}
