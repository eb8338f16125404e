package statestore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrExposed is wrapped by every CheckClosed refusal: another user could
// reach (or redirect) the path to the State Anchor's upper dirs.
var ErrExposed = errors.New("the State Anchor's upper dirs are not closed to other users")

// ExposedError is a CheckClosed refusal: the directory it names, its mode,
// what is wrong and the exact fix. Error() is one line.
type ExposedError struct {
	Dir     string
	Mode    uint32 // permission and sticky/setgid bits, as stat gives them
	Problem string
	Fix     string
}

func (e *ExposedError) Error() string {
	return fmt.Sprintf("%s: %s (mode %04o) %s; fix: %s", ErrExposed, e.Dir, e.Mode&0o7777, e.Problem, e.Fix)
}

func (e *ExposedError) Unwrap() error { return ErrExposed }

// getuid is the user the check is for (tests replace it).
var getuid = os.Getuid

// CheckClosed verifies, before anything below it is created or sealed,
// that no other user of the host can reach the State Anchor's upper dirs
// below the overlay root: an upper dir keeps what the agent made, setuid
// files owned by the user included (rootless podman maps the sandbox's
// root to the user). The rule, on the path from / down to root (the vault,
// a directory below dataRoot):
//
//   - closed: some directory on it is the user's and gives group and
//     others no search permission (mode & 011 == 0): nobody else (root
//     aside) gets past it. The directories below the vault (each
//     persistent dir's overlay dir, its changes, work and merged dirs) are
//     0755 or the image's modes by design and never count: the closing
//     point must be the vault or above it;
//   - owned: every directory on it is the user's or root's, and from
//     dataRoot down the user's: another user owning one could chmod it
//     open, or swap what lies below it;
//   - not replaceable: no directory on it is writable by group or others,
//     except a sticky one above dataRoot (/tmp): there nobody else can
//     rename the user's entry, and the next directory's owner is checked;
//   - no symlinks: dataRoot is resolved as the configuration names it, then
//     the resolved path is walked one directory descriptor at a time
//     without following anything, so a symlink planted (or swapped in)
//     anywhere is refused, never followed.
//
// A path that ends before root (a first start) is fine when what exists
// obeys the rule: lazaret creates the rest 0700, the vault 000. A refusal is
// an *ExposedError naming one directory, its mode and the exact fix.
func CheckClosed(dataRoot, root string) error {
	w, err := newWalk(dataRoot, root)
	if err != nil {
		return err
	}
	defer w.close()
	for i := range w.elems {
		done, err := w.step(i)
		if err != nil || done {
			return err
		}
	}
	if w.closed {
		return nil
	}
	return w.exposed()
}

// walk is one CheckClosed: the resolved path's elements, the index of the
// data root's, and what the walk has seen.
type walk struct {
	elems  []string // path elements below "/"
	first  int      // index of the data root's own element in elems
	fd     int      // O_PATH descriptor of the last directory reached
	path   string   // its path
	closed bool     // a directory so far closes the path
	open   []opened // lazaret's directories (data root and below) others can search
	uid    uint32
}

type opened struct {
	path string
	mode uint32
}

func newWalk(dataRoot, root string) (*walk, error) {
	dr, err := filepath.Abs(dataRoot)
	if err != nil {
		return nil, err
	}
	rel, err := filepath.Rel(dr, filepath.Clean(root))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("overlay root %s is not below data_root %s", root, dataRoot)
	}
	resolved, err := resolveExisting(dr)
	if err != nil {
		return nil, fmt.Errorf("data_root %s: %w", dataRoot, err)
	}
	w := &walk{uid: uint32(getuid()), path: "/"}
	if resolved != "/" {
		w.elems = strings.Split(strings.TrimPrefix(resolved, "/"), "/")
	}
	w.first = len(w.elems) - 1
	if rel != "." {
		w.elems = append(w.elems, strings.Split(rel, "/")...)
	}
	if w.fd, err = unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("opening /: %w", err)
	}
	// "/" itself is on the path: root's, never group- or other-writable.
	var st unix.Stat_t
	if err := unix.Fstat(w.fd, &st); err != nil {
		w.close()
		return nil, err
	}
	if err := w.judge("/", st, -1); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

func (w *walk) close() {
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}

// step opens element i below the last directory without following a
// symlink and judges it; done reports that the path ends here (what is
// missing, lazaret creates closed).
func (w *walk) step(i int) (done bool, err error) {
	name := w.elems[i]
	p := filepath.Join(w.path, name)
	fd, err := unix.Openat(w.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return true, nil
	case errors.Is(err, unix.EACCES) && w.closed:
		// A closing directory the user cannot search either (a sealed
		// vault's parent never is; a 000 profile dir, say): nobody else
		// gets past it.
		return true, nil
	case err != nil:
		return true, fmt.Errorf("checking the path to the State Anchor: %s: %w", p, err)
	}
	unix.Close(w.fd)
	w.fd, w.path = fd, p
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return true, fmt.Errorf("checking the path to the State Anchor: %s: %w", p, err)
	}
	return false, w.judge(p, st, i)
}

// judge applies the rule to directory p (element i; -1 for "/").
func (w *walk) judge(p string, st unix.Stat_t, i int) error {
	mode := st.Mode & 0o7777
	mine := i >= w.first
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
	case unix.S_IFLNK:
		return &ExposedError{Dir: p, Mode: mode, Problem: "is a symlink, on the path to the State Anchor's upper dirs (lazaret follows none below data_root)",
			Fix: "replace it with the directory it points to, or set data_root to a real path"}
	default:
		return &ExposedError{Dir: p, Mode: mode, Problem: "is not a directory", Fix: "move it away, or set data_root elsewhere"}
	}
	if st.Uid != w.uid && (mine || st.Uid != 0) {
		return &ExposedError{Dir: p, Mode: mode,
			Problem: fmt.Sprintf("is owned by uid %d, not by you (uid %d): that user can open it, or replace what lies below it, the State Anchor's upper dirs included", st.Uid, w.uid),
			Fix:     "set data_root to a directory of your own (`lazaret doctor` checks it)"}
	}
	if mode&0o022 != 0 && !(mode&unix.S_ISVTX != 0 && !mine) {
		fix := "chmod go-w " + shellQuote(p)
		if st.Uid != w.uid {
			fix = "set data_root to a directory of your own, below no directory others can write"
		}
		return &ExposedError{Dir: p, Mode: mode, Problem: "is writable by group or others: they can replace the path to the State Anchor's upper dirs", Fix: fix}
	}
	if st.Uid == w.uid && mode&0o011 == 0 {
		w.closed = true
	}
	if mine && mode&0o011 != 0 {
		w.open = append(w.open, opened{p, mode})
	}
	return nil
}

// exposed is the refusal of a path no directory closes: it names the
// vault (the last element; it exists, or the walk would have ended early)
// and restores lazaret's modes on its own directories that others can
// search: the vault 000, the others 0700.
func (w *walk) exposed() error {
	vault := w.open[len(w.open)-1]
	fix := "chmod 000 " + shellQuote(vault.path)
	if rest := w.open[:len(w.open)-1]; len(rest) > 0 {
		var ps []string
		for _, o := range rest {
			ps = append(ps, shellQuote(o.path))
		}
		fix = "chmod 0700 " + strings.Join(ps, " ") + " && " + fix
	}
	var above []string
	for _, o := range w.open[:len(w.open)-1] {
		above = append(above, fmt.Sprintf("%s %04o", o.path, o.mode))
	}
	problem := "lets other users reach the upper dirs below it (the agent's files, setuid ones included, owned by you), and no directory above it closes the path"
	if len(above) > 0 {
		problem += " (" + strings.Join(above, ", ") + ")"
	}
	return &ExposedError{Dir: vault.path, Mode: vault.mode, Problem: problem, Fix: fix}
}

// resolveExisting resolves the symlinks of the longest existing prefix of
// the absolute path p and joins the rest.
func resolveExisting(p string) (string, error) {
	rest := ""
	for cur := p; ; cur = filepath.Dir(cur) {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, os.ErrNotExist) || cur == "/" {
			return "", err
		}
		rest = filepath.Join(filepath.Base(cur), rest)
	}
}

// shellQuote quotes p for a POSIX shell when it needs it.
func shellQuote(p string) string {
	safe := p != ""
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+,:@%=", r)) {
			safe = false
			break
		}
	}
	if safe {
		return p
	}
	return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
}

// OverlayRoots lists the overlay roots that exist under dataRoot: every
// profile's (<data_root>/<profile>/overlay, configured or not any more)
// and every domain's own (<data_root>/domains/<hash>/overlay). Listing
// needs no search of the roots themselves (vaults).
func OverlayRoots(dataRoot string) []string {
	var roots []string
	add := func(parent string) {
		ents, err := os.ReadDir(parent)
		if err != nil {
			return
		}
		for _, e := range ents {
			if !e.IsDir() || (parent == dataRoot && e.Name() == "domains") {
				continue
			}
			r := filepath.Join(parent, e.Name(), "overlay")
			if _, err := os.Lstat(r); err == nil {
				roots = append(roots, r)
			}
		}
	}
	add(dataRoot)
	add(filepath.Join(dataRoot, "domains"))
	return roots
}
