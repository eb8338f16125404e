package statestore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/vault"
)

// ErrProfileBusy is returned when another workspace's sandbox of the same
// profile uses the profile's State Anchor: two overlays on one upper dir
// corrupt it, so a profile's shared overlay has one user at a time.
var ErrProfileBusy = errors.New("the profile's State Anchor is in use")

// Store is where the State Anchor of one domain keeps its overlays.
type Store struct {
	// Root is the overlay root: {data_root}/{profile}/overlay when shared
	// by the profile's workspaces, <domain_root>/overlay otherwise.
	Root string
	// Shared is true for the profile's overlay (persist = "profile").
	Shared bool
	// Legacy is true for a domain that keeps its own changes, made before
	// persistence was per profile, under persist = "profile".
	Legacy bool
	// DataRoot is the data_root Root lies below (CheckClosed walks the
	// path from it); "" in a Store made by hand.
	DataRoot string
}

// ProfileRoot is the State Anchor root shared by a profile's workspaces.
func ProfileRoot(a *domain.Anchor) string { return filepath.Join(a.ProfileDir(), "overlay") }

// Locate returns the Store of domain a for the profile's persist mode
// (an empty mode is the domain's own, as before persist existed). A
// domain that already has changes of its own (from persist = "workspace",
// or made before the State Anchor was per profile) keeps using them: they
// are never lost or merged behind the user's back; `lazaret state reset`
// in that workspace discards them and the domain joins the profile's.
//
// An attempt's (`lazaret fork`) is always its own: its changes stay in
// the attempt until `lazaret attempts keep` makes them the profile's.
func Locate(a *domain.Anchor, persist string) Store {
	own := DomainRoot(a)
	if persist != config.PersistProfile || a.Attempt != "" {
		return Store{Root: own, DataRoot: a.DataRoot}
	}
	if hasChanges(own) {
		return Store{Root: own, Legacy: true, DataRoot: a.DataRoot}
	}
	return Store{Root: ProfileRoot(a), Shared: true, DataRoot: a.DataRoot}
}

// hasChanges reports whether root holds a changes dir of any persistent
// dir (<root>/<name>/<name>_changes). Listing the root seals it (the
// layout before the vault gets mode 000 here too).
func hasChanges(root string) bool {
	names, err := vault.Names(root)
	if err != nil {
		return false
	}
	for _, n := range names {
		if strings.HasPrefix(n, ".") {
			continue
		}
		if changesIn(root, n) {
			return true
		}
	}
	return false
}

// changesIn reports whether root/name/name_changes is a directory.
func changesIn(root, name string) bool {
	d, err := vault.Open(root, name, false, 0)
	if err != nil {
		return false
	}
	defer d.Close()
	fi, err := os.Lstat(d.Join(name + "_changes"))
	return err == nil && fi.IsDir()
}

// HasChanges reports whether dir has a changes dir in the Store.
func (s Store) HasChanges(dir string) bool {
	return changesIn(s.Root, domain.OverlayName(dir))
}

// Has reports whether dir has an overlay dir in the Store.
func (s Store) Has(dir string) bool {
	d, err := vault.Open(s.Root, domain.OverlayName(dir), false, 0)
	if err != nil {
		return false
	}
	d.Close()
	return true
}

// Record returns the record of dir in the Store; none is (nil, nil).
func (s Store) Record(dir string) (*Record, error) {
	d, err := vault.Open(s.Root, domain.OverlayName(dir), false, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return ReadRecord(d.Path())
}

// OverlayDir is the overlay dir of the container directory dir. The
// Store's root is a vault (internal/vault, mode 000): the path is for
// podman unshare and for messages; lazaret opens it with vault.Open.
func (s Store) OverlayDir(dir string) string { return filepath.Join(s.Root, domain.OverlayName(dir)) }

// OverlayPaths returns the changes, work and merged dirs of dir.
func (s Store) OverlayPaths(dir string) (changes, work, merged string) {
	base, name := s.OverlayDir(dir), domain.OverlayName(dir)
	return filepath.Join(base, name+"_changes"), filepath.Join(base, name+"_work"), filepath.Join(base, name+"_merged")
}

// Files of a shared root: the lock its user holds, and who that is. They
// live beside the root (SideFile), not in it: the root is a vault that the
// user's processes, lazaret's flock included, cannot search.
const (
	lockFile  = "lock"
	ownerFile = "owner.json"
)

// SideFile is the file name beside root: <parent>/overlay.<name>.
func SideFile(root, name string) string {
	return filepath.Join(filepath.Dir(root), filepath.Base(root)+"."+name)
}

// owner is the content of ownerFile: the domain that holds (or last held)
// the profile's State Anchor.
type owner struct {
	Domain    string `json:"domain"`
	Workspace string `json:"workspace"`
	Container string `json:"container"`
	PID       int    `json:"pid"`
}

// ProfileLock is the exclusive Hold of a profile's State Anchor.
type ProfileLock struct {
	fd   int
	root string
}

// LockProfile takes the profile's State Anchor under root for domain a,
// without waiting. The lock is an flock on <root>/.lock, so it ends with
// the process that holds it; a crashed holder's container may still run
// on its overlays, so a holder recorded in owner.json whose container
// still exists keeps the profile busy too.
func LockProfile(ctx context.Context, pc *podman.Client, root string, a *domain.Anchor) (*ProfileLock, error) {
	path := SideFile(root, lockFile)
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("profile lock %s: %w", path, err)
	}
	l := &ProfileLock{fd: fd, root: root}
	var prev owner
	if _, err := ReadJSON(SideFile(root, ownerFile), &prev); err != nil {
		prev = owner{}
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		l.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, busyError(a, prev, "is running")
		}
		return nil, fmt.Errorf("profile lock %s: %w", path, err)
	}
	if prev.Domain != "" && prev.Domain != a.Hash && prev.Container != "" {
		exists, err := pc.ContainerExists(ctx, prev.Container)
		if err != nil || exists {
			l.Close()
			if err != nil {
				return nil, fmt.Errorf("profile lock: checking container %s: %w", prev.Container, err)
			}
			return nil, busyError(a, prev, "was left running by a crashed coordinator")
		}
	}
	me := owner{Domain: a.Hash, Workspace: a.Workspace, Container: a.Container(), PID: os.Getpid()}
	if err := WriteJSON(SideFile(root, ownerFile), me); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func busyError(a *domain.Anchor, o owner, state string) error {
	who := "another workspace's sandbox"
	if o.Workspace != "" {
		who = fmt.Sprintf("the sandbox of %q (container %s)", o.Workspace, o.Container)
	}
	return fmt.Errorf("%w: profile %s's persistent dirs are used by %s, which %s; one sandbox per profile at a time shares them: stop it (`lazaret stop` in that directory), or set persist = \"workspace\" in [profiles.%s] to give each workspace its own copy",
		ErrProfileBusy, a.Profile, who, state, a.Profile)
}

// Release clears the owner record and unlocks. Idempotent.
func (l *ProfileLock) Release() error {
	if l == nil || l.fd < 0 {
		return nil
	}
	err := os.Remove(SideFile(l.root, ownerFile))
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	l.Close()
	return err
}

// Close unlocks without clearing the owner record.
func (l *ProfileLock) Close() {
	if l != nil && l.fd >= 0 {
		unix.Close(l.fd)
		l.fd = -1
	}
}

// DomainRoot is <domain_root>/overlay, the parent of every OverlayDir.
func DomainRoot(a *domain.Anchor) string { return filepath.Dir(a.OverlayDir("/x")) }
