package keeper

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lazaret-dev/lazaret/internal/atomicfile"
)

// Info describes one kept session: the keeper's info file beside its
// socket, read by `lazaret attach` and `lazaret ps`.
type Info struct {
	// ID names the keeper (its socket is ID.sock); Session is the
	// session's LAZARET_SESSION_ID, once its CLI has started.
	ID        string `json:"id"`
	Session   string `json:"session,omitempty"`
	Profile   string `json:"profile"`
	Workspace string `json:"workspace"`
	// Backend is the session's backend: "" local, "kubernetes" a
	// lazaret-kube session (each CLI lists and attaches its own).
	Backend  string    `json:"backend,omitempty"`
	Command  []string  `json:"command"`
	PID      int       `json:"pid"`
	Started  time.Time `json:"started"`
	Attached bool      `json:"attached"`
	// Socket is the keeper's socket (filled in by List).
	Socket string `json:"socket"`
}

// ShortID is what the user types and reads: the session's id (or, before
// it started, the keeper's) cut to 12 characters.
func (i Info) ShortID() string {
	id := i.Session
	if id == "" {
		id = i.ID
	}
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}

// Matches reports whether prefix names this session (a prefix of the
// session's id or of the keeper's).
func (i Info) Matches(prefix string) bool {
	return prefix != "" && (strings.HasPrefix(i.Session, prefix) || strings.HasPrefix(i.ID, prefix))
}

// Paths of one keeper in dir.
func socketPath(dir, id string) string { return filepath.Join(dir, id+".sock") }
func infoPath(dir, id string) string   { return filepath.Join(dir, id+".json") }

// LogPath is the keepers' log, one file for all (kept across sessions,
// so a session's end can still be read about after its keeper left).
func LogPath(dir string) string { return filepath.Join(dir, "keepers.log") }

// writeInfo replaces the info file atomically (mode 0600).
func writeInfo(dir string, i Info) error {
	b, err := json.Marshal(i)
	if err != nil {
		return err
	}
	return atomicfile.Write(infoPath(dir, i.ID), b, 0o600)
}

// List returns the kept sessions of dir, oldest first. A keeper that no
// longer runs (killed before it could clean up) is skipped and its files
// removed.
func List(dir string) ([]Info, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []Info
	for _, n := range names {
		b, err := os.ReadFile(n)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		var i Info
		if err != nil || json.Unmarshal(b, &i) != nil || filepath.Base(n) != i.ID+".json" {
			continue
		}
		if !keeperRuns(i) {
			_ = os.Remove(socketPath(dir, i.ID))
			_ = os.Remove(n)
			continue
		}
		i.Socket = socketPath(dir, i.ID)
		out = append(out, i)
	}
	sortByStart(out)
	return out, nil
}

// keeperRuns reports whether i's keeper process is alive: its pid runs
// this keeper (a reused pid runs something else).
func keeperRuns(i Info) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%s/cmdline", strconv.Itoa(i.PID)))
	if err != nil {
		return false
	}
	args := strings.Split(string(b), "\x00")
	return len(args) > 3 && args[1] == Verb && args[2] == "--id" && args[3] == i.ID
}

func sortByStart(l []Info) {
	sort.SliceStable(l, func(a, b int) bool { return l[a].Started.Before(l[b].Started) })
}
