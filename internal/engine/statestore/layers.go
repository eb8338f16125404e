package statestore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/vault"
)

// Layers of a profile's shared State Anchor (persist = "profile").
//
// The profile's layer of a persistent dir is <root>/N/N_changes. No
// sandbox writes it: each running sandbox has a layer of its own,
// <root>/.layers/<id>/N/{upper,work,merged}, mounted with the profile's
// layer (and the pending layers it stacks) as lower dirs. Every sandbox
// holds the profile's lock shared (<root>.lock) and a registration
// (<root>.active/<id>.json, flocked for its life) while anything of it is
// mounted. When a sandbox ends its layer becomes pending (or is dropped
// when it holds no change); whoever then gets the profile's lock
// exclusively (no sandbox of the profile has anything mounted) folds the
// pending layers whose parent is the profile's head, in order: a
// fast-forward. A layer whose parent is not the head (the profile's layer
// changed since it began) stays pending for the user (`lazaret state`).
const (
	// LayersDir is the dir of the sandboxes' layers in the root (a
	// name OverlayName never makes: it begins with a dot).
	LayersDir = ".layers"
	layerFile = "layer.json"
	headFile  = "head.json"
	activeDir = "active"
)

// Layer states.
const (
	LayerActive  = "active"  // a sandbox writes it
	LayerPending = "pending" // its sandbox ended; waiting to be folded or for the user
	LayerFolding = "folding" // being folded into the profile's layer
)

// Layer is the record of one sandbox's layer (<root>/.layers/<id>/layer.json).
type Layer struct {
	ID        string `json:"id"`
	Domain    string `json:"domain"`
	Workspace string `json:"workspace"`
	Container string `json:"container"`
	// Parent is what the layer was begun on: the ID of the pending layer
	// right below it, or the profile's head ("" before the first fold).
	Parent string `json:"parent"`
	// Generation is the profile layer's generation when it began.
	Generation int       `json:"generation"`
	State      string    `json:"state"`
	Dirs       []string  `json:"dirs"`
	Driver     string    `json:"driver,omitempty"`
	Started    time.Time `json:"started"`
	Ended      time.Time `json:"ended,omitzero"`
}

// Head is the profile layer's history (<root>/.layers/head.json): its
// generation counts the layers folded into it, Head is the last one.
type Head struct {
	Generation int       `json:"generation"`
	Head       string    `json:"head,omitempty"`
	FoldedAt   time.Time `json:"folded_at,omitzero"`
	FoldedFrom string    `json:"folded_from,omitempty"` // the workspace of the last fold
}

// NewLayerID returns a new layer's ID: sortable by start time, and naming
// the domain it began in.
func NewLayerID(domainHash string) string {
	h := domainHash
	if len(h) > 12 {
		h = h[:12]
	}
	return fmt.Sprintf("%d-%s", time.Now().UnixNano(), h)
}

// LayerDir is the dir of layer id under root.
func LayerDir(root, id string) string { return filepath.Join(root, LayersDir, id) }

// LayerPaths returns the upper, work and merged dirs of container dir
// dir in layer id.
func LayerPaths(root, id, dir string) (upper, work, merged string) {
	b := filepath.Join(LayerDir(root, id), domain.OverlayName(dir))
	return filepath.Join(b, "upper"), filepath.Join(b, "work"), filepath.Join(b, "merged")
}

// ProfileLayer is the profile's layer of dir: <root>/N/N_changes.
func ProfileLayer(root, dir string) string {
	changes, _, _ := Store{Root: root}.OverlayPaths(dir)
	return changes
}

// openLayers opens <root>/.layers through the vault.
func openLayers(root string, create bool) (*vault.Dir, error) {
	return vault.Open(root, LayersDir, create, 0o700)
}

// WriteLayer writes l's record, making its dir (and, with dirs, its
// upper, work and merged dirs) when missing.
func WriteLayer(root string, l Layer, mkdirs bool) error {
	d, err := openLayers(root, true)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := os.MkdirAll(d.Join(l.ID), 0o755); err != nil {
		return err
	}
	if mkdirs {
		for _, dir := range l.Dirs {
			for _, sub := range []string{"upper", "work", "merged"} {
				if err := os.MkdirAll(d.Join(l.ID, domain.OverlayName(dir), sub), 0o755); err != nil {
					return err
				}
			}
		}
	}
	return WriteJSON(d.Join(l.ID, layerFile), l)
}

// ReadLayers returns the layers under root, oldest first. A layer dir
// without a record (a start cut short before it mounted anything) is
// returned with only its ID.
func ReadLayers(root string) ([]Layer, error) {
	d, err := openLayers(root, false)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer d.Close()
	ents, err := os.ReadDir(d.Path())
	if err != nil {
		return nil, err
	}
	var out []Layer
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		l := Layer{ID: e.Name()}
		if _, err := ReadJSON(d.Join(e.Name(), layerFile), &l); err != nil {
			return nil, err
		}
		l.ID = e.Name()
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// LayerIsEmpty reports whether layer id holds no change in any dir.
func LayerIsEmpty(root string, l Layer) (bool, error) {
	d, err := openLayers(root, false)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	defer d.Close()
	for _, dir := range l.Dirs {
		empty, err := LayerEmpty(d.Join(l.ID, domain.OverlayName(dir), "upper"))
		if err != nil || !empty {
			return false, err
		}
	}
	return true, nil
}

// ReadHead returns the profile layer's history; none yet is the zero Head.
func ReadHead(root string) (Head, error) {
	var h Head
	d, err := openLayers(root, false)
	if errors.Is(err, os.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return h, err
	}
	defer d.Close()
	_, err = ReadJSON(d.Join(headFile), &h)
	return h, err
}

// WriteHead replaces the profile layer's history.
func WriteHead(root string, h Head) error {
	d, err := openLayers(root, true)
	if err != nil {
		return err
	}
	defer d.Close()
	return WriteJSON(d.Join(headFile), h)
}

// Chain returns the pending layers that fast-forward the profile's layer
// from h, in the order they fold (each one's parent is the one before;
// the first's is h's head). Where two layers were begun on the same one,
// a layer cut short while folding comes first, else the one that ended
// first; the other is not in the chain (it stays for the user). A
// sandbox that starts stacks this chain over the profile's layer.
func Chain(h Head, layers []Layer) []Layer {
	var out []Layer
	parent := h.Head
	for {
		var next *Layer
		for i := range layers {
			l := &layers[i]
			if l.Parent != parent || (l.State != LayerPending && l.State != LayerFolding) {
				continue
			}
			switch {
			case next == nil:
				next = l
			case (l.State == LayerFolding) != (next.State == LayerFolding):
				if l.State == LayerFolding {
					next = l
				}
			case l.Ended.Before(next.Ended):
				next = l
			}
		}
		if next == nil {
			return out
		}
		out = append(out, *next)
		parent = next.ID
	}
}

// Holder is the content of a sandbox's registration: who holds the
// layer, and the image mount it holds (released by whoever finds it
// dead).
type Holder struct {
	Layer     string `json:"layer"`
	Domain    string `json:"domain"`
	Workspace string `json:"workspace"`
	Container string `json:"container"`
	PID       int    `json:"pid"`
	ImageID   string `json:"image_id,omitempty"`
}

// Registration is a sandbox's registration of its layer, flocked for as
// long as it holds anything mounted: the lock ends with its process, so a
// crashed coordinator's registration is found dead, never blocking.
type Registration struct {
	fd   int
	path string
}

func activePath(root string) string { return SideFile(root, activeDir) }

// Register records h in <root>.active/<layer>.json and locks it.
func Register(root string, h Holder) (*Registration, error) {
	dir := activePath(root)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	path := filepath.Join(dir, h.Layer+".json")
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("registering layer %s: %w", h.Layer, err)
	}
	// Blocking: a scan may hold it for a moment (it finds it empty and
	// leaves it alone).
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		unix.Close(fd)
		return nil, err
	}
	r := &Registration{fd: fd, path: path}
	if err := r.Update(h); err != nil {
		r.Release()
		return nil, err
	}
	return r, nil
}

// Update rewrites the registration (in place: the lock is on this inode).
func (r *Registration) Update(h Holder) error {
	data := []byte(fmt.Sprintf(`{"layer":%q,"domain":%q,"workspace":%q,"container":%q,"pid":%d,"image_id":%q}`+"\n",
		h.Layer, h.Domain, h.Workspace, h.Container, h.PID, h.ImageID))
	if err := unix.Ftruncate(r.fd, 0); err != nil {
		return err
	}
	if _, err := unix.Pwrite(r.fd, data, 0); err != nil {
		return err
	}
	return unix.Fsync(r.fd)
}

// Release removes the registration and unlocks. Idempotent.
func (r *Registration) Release() {
	if r == nil || r.fd < 0 {
		return
	}
	_ = os.Remove(r.path)
	unix.Close(r.fd)
	r.fd = -1
}

// Close unlocks without removing (a registration left for the next
// start to find dead).
func (r *Registration) Close() {
	if r != nil && r.fd >= 0 {
		unix.Close(r.fd)
		r.fd = -1
	}
}

// Registered is one registration found by Registrations.
type Registered struct {
	Holder
	// Alive: its holder's lock is held. A dead one is locked by the
	// caller until Release or Close.
	Alive bool
	reg   *Registration
}

// Release removes a dead registration (its layer has been dealt with).
func (r *Registered) Release() { r.reg.Release() }

// Close unlocks a dead registration without removing it.
func (r *Registered) Close() { r.reg.Close() }

// Registrations lists the registrations of root's layers. One being
// written (empty) is skipped.
func Registrations(root string) ([]*Registered, error) {
	dir := activePath(root)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Registered
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") || e.Type()&os.ModeType != 0 {
			continue
		}
		r, err := readRegistration(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		if r != nil {
			out = append(out, r)
		}
	}
	return out, nil
}

func readRegistration(path string) (*Registered, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	reg := &Registration{fd: fd, path: path}
	var h Holder
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		reg.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			_, _ = ReadJSON(path, &h)
			return &Registered{Holder: h, Alive: true, reg: &Registration{fd: -1}}, nil
		}
		return nil, err
	}
	// Dead (or being written: empty, skipped).
	ok, rerr := ReadJSON(path, &h)
	if !ok || rerr != nil || h.Layer == "" {
		reg.Close()
		return nil, nil
	}
	return &Registered{Holder: h, reg: reg}, nil
}

// ShareProfile takes the profile's lock under root shared, waiting up to
// wait while it is held exclusively (a fold, which is one rename per
// changed entry, or a `lazaret state reset`).
func ShareProfile(root string, wait time.Duration) (*ProfileLock, error) {
	return lockProfileFile(root, unix.LOCK_SH, wait)
}

// TryExclusive takes the profile's lock under root exclusively when no
// one holds it; (nil, nil) otherwise.
func TryExclusive(root string) (*ProfileLock, error) {
	l, err := lockProfileFile(root, unix.LOCK_EX, 0)
	if errors.Is(err, errLockBusy) {
		return nil, nil
	}
	return l, err
}

var errLockBusy = errors.New("profile lock busy")

func lockProfileFile(root string, how int, wait time.Duration) (*ProfileLock, error) {
	path := SideFile(root, lockFile)
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("profile lock %s: %w", path, err)
	}
	deadline := time.Now().Add(wait)
	for {
		err := unix.Flock(fd, how|unix.LOCK_NB)
		if err == nil {
			return &ProfileLock{fd: fd, root: root}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			unix.Close(fd)
			return nil, fmt.Errorf("profile lock %s: %w", path, err)
		}
		if !time.Now().Before(deadline) {
			unix.Close(fd)
			if wait > 0 {
				return nil, fmt.Errorf("%w: profile lock %s held exclusively for over %s (a fold or `lazaret state reset`)", ErrProfileBusy, path, wait)
			}
			return nil, errLockBusy
		}
		time.Sleep(20 * time.Millisecond)
	}
}
