// Package statestore is the State Anchor's layout on the host, shared by
// the coordinator's component (internal/coordinator/stateanchor), which
// mounts the overlays, and the CLI's state commands (internal/cli/statecmd),
// which inspect and reset them: where a domain's or a profile's overlays
// are, their image records, the profile lock, persistent dir validation and
// mountinfo parsing.
package statestore

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
)

// ErrBadDir is wrapped by every validation error of a persistent dir.
var ErrBadDir = errors.New("invalid persistent dir")

// forbidden are container directories that the runtime or lazaret itself
// mounts: an overlay over them (or below them) would hide or fight those
// mounts.
var forbidden = []string{"/proc", "/sys", "/dev", "/run", "/tmp", "/workspace"}

// ValidateDir checks one persistent dir: absolute, clean, not /, not one of
// the runtime's or lazaret's own mount points or below them, and free of
// characters that fuse-overlayfs's option syntax or podman's --mount syntax
// would misread.
func ValidateDir(dir string) error {
	switch {
	case dir == "":
		return fmt.Errorf("%w: empty", ErrBadDir)
	case !strings.HasPrefix(dir, "/"):
		return fmt.Errorf("%w %q: not absolute", ErrBadDir, dir)
	case filepath.Clean(dir) != dir:
		return fmt.Errorf("%w %q: not clean (want %q)", ErrBadDir, dir, filepath.Clean(dir))
	case dir == "/":
		return fmt.Errorf("%w %q: the root cannot be persistent", ErrBadDir, dir)
	}
	for _, r := range dir {
		if r < 0x20 || r == 0x7f || r == ',' || r == ':' || r == '=' || r == '\\' {
			return fmt.Errorf("%w %q: contains %q", ErrBadDir, dir, r)
		}
	}
	for _, f := range forbidden {
		if Within(dir, f) {
			return fmt.Errorf("%w %q: %s is managed by the runtime or lazaret", ErrBadDir, dir, f)
		}
	}
	return nil
}

// ValidateDirs checks every dir with ValidateDir and that no two are equal
// or nest (an overlay inside another overlay's merged view would copy up
// the inner one's mount point and mask it). It also refuses two dirs that
// flatten to the same overlay name (/a_b and /a/b).
func ValidateDirs(dirs []string) error {
	names := map[string]string{}
	for i, d := range dirs {
		if err := ValidateDir(d); err != nil {
			return err
		}
		for _, e := range dirs[:i] {
			if Within(d, e) || Within(e, d) {
				return fmt.Errorf("%w %q: nests with %q", ErrBadDir, d, e)
			}
		}
		n := domain.OverlayName(d)
		if prev, ok := names[n]; ok {
			return fmt.Errorf("%w %q: same overlay name %q as %q", ErrBadDir, d, n, prev)
		}
		names[n] = d
	}
	return nil
}

// Within reports whether p is dir or below it; both are clean absolute paths.
func Within(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}
