package statestore

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestRecordRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if r, err := ReadRecord(dir); r != nil || err != nil {
		t.Fatalf("missing record: %v %v", r, err)
	}
	want := Record{Dir: "/usr", Image: "img", ImageID: "abc", ImageDigest: "sha256:d", MountedAt: time.Unix(5, 0).UTC(), PreviousImageID: "old"}
	if err := WriteJSON(filepath.Join(dir, RecordFile), want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadRecord(dir)
	if err != nil || *got != want {
		t.Fatalf("got %+v %v", got, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
	if err := os.WriteFile(filepath.Join(dir, RecordFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRecord(dir); err == nil {
		t.Error("torn record accepted")
	}
}
