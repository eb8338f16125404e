package statestore

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lazaret-dev/lazaret/internal/atomicfile"
)

// RecordFile is the name of the per-directory record inside its overlay dir.
const RecordFile = "image.json"

// HoldFile (beside the overlay root, SideFile) marks an image mount that this domain holds and has not
// released; after a crash the next start releases it once.
const HoldFile = "image-mount.json"

// Record is what a persistent dir's overlay was last mounted with.
type Record struct {
	Dir         string    `json:"dir"`
	Image       string    `json:"image"`
	ImageID     string    `json:"image_id"`
	ImageDigest string    `json:"image_digest,omitempty"`
	MountedAt   time.Time `json:"mounted_at"`
	// Driver is the overlay implementation the changes were made with:
	// "overlay" (kernel) or "fuse-overlayfs". The two mark opaque
	// directories with different xattrs, so a changes dir stays with the
	// driver it began with. Empty in records of the first version, which
	// always used fuse-overlayfs.
	Driver string `json:"driver,omitempty"`
	// PreviousImageID is the image the changes were made on before the
	// last image update, for `lazaret state`.
	PreviousImageID string `json:"previous_image_id,omitempty"`
}

// Hold is the content of HoldFile.
type Hold struct {
	ImageID string `json:"image_id"`
}

// ReadRecord returns the record in overlayDir; a missing record is
// (nil, nil).
func ReadRecord(overlayDir string) (*Record, error) {
	var r Record
	ok, err := ReadJSON(filepath.Join(overlayDir, RecordFile), &r)
	if !ok {
		return nil, err
	}
	return &r, nil
}

func ReadJSON(path string, v any) (bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return true, nil
}

// WriteJSON replaces path atomically: a crash leaves the old or the new
// content, never a torn file.
func WriteJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
