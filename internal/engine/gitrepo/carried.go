package gitrepo

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lazaret-dev/lazaret/internal/atomicfile"
)

// Carried is what --with-changes (with_changes in a profile) brought into
// a new agent clone: the host working tree's changes against HEAD, copied
// into the clone's working tree (never into either side's index or HEAD).
// The coordinator writes it when it builds the clone; the CLI that
// started the sandbox reads it for the start banner.
type Carried struct {
	// Modified: files of HEAD whose content, type or executable bit
	// differs in the host working tree.
	Modified int `json:"modified"`
	// Untracked: files HEAD lacks, not ignored (untracked in the host, or
	// only added to its index).
	Untracked int `json:"untracked"`
	// Deleted: files of HEAD the host working tree no longer has.
	Deleted int `json:"deleted"`
	// NotCarried says why nothing was carried ("" when the changes were).
	NotCarried string `json:"not_carried,omitempty"`
	// Notes are one-line notices about files left out (escaped by the
	// reader: they hold file names).
	Notes []string `json:"notes,omitempty"`
}

// Summary is the start banner's text, without the "lazaret: " prefix.
func (c Carried) Summary(source string) string {
	if c.NotCarried != "" {
		return fmt.Sprintf("uncommitted changes not carried into the agent's clone (%s): %s", source, c.NotCarried)
	}
	if c.Modified+c.Untracked+c.Deleted == 0 {
		return fmt.Sprintf("no uncommitted changes to carry into the agent's clone (%s)", source)
	}
	noun := "files"
	if c.Modified+c.Untracked+c.Deleted == 1 {
		noun = "file"
	}
	if c.Deleted > 0 {
		return fmt.Sprintf("carried %d modified, %d untracked and %d deleted %s into the agent's clone (%s)",
			c.Modified, c.Untracked, c.Deleted, noun, source)
	}
	return fmt.Sprintf("carried %d modified and %d untracked %s into the agent's clone (%s)", c.Modified, c.Untracked, noun, source)
}

// CarriedFile is where the coordinator records Carried for the clone it
// built last.
func CarriedFile(domainRoot string) string {
	return filepath.Join(domainRoot, "gitsentry", "carried.json")
}

// WriteCarried records c for the domain (replacing the previous record).
func WriteCarried(domainRoot string, c Carried) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	path := CarriedFile(domainRoot)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o600)
}

// RemoveCarried forgets the record (a clone built without carrying).
func RemoveCarried(domainRoot string) {
	_ = os.Remove(CarriedFile(domainRoot))
}

// ReadCarried returns the record, if there is one.
func ReadCarried(domainRoot string) (Carried, bool) {
	var c Carried
	data, err := os.ReadFile(CarriedFile(domainRoot))
	if err != nil || json.Unmarshal(data, &c) != nil {
		return Carried{}, false
	}
	return c, true
}
