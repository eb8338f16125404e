package netdimage

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestDigestsRememberedByIdentity: a file's sum is remembered and used
// while its identity holds (the planted wrong sum comes back: the file
// was not read), and recomputed once the file is replaced or rewritten
// (the controls: the real sums come back).
func TestDigestsRememberedByIdentity(t *testing.T) {
	dir := t.TempDir()
	bin, cache := filepath.Join(dir, "lazaret-netd"), filepath.Join(dir, DigestCacheName)
	if err := os.WriteFile(bin, []byte("build one"), 0o755); err != nil {
		t.Fatal(err)
	}
	later := func() time.Time { return time.Now().Add(time.Hour) } // past the racy window
	d := loadDigests(cache)
	d.now = later
	if got, err := d.sum(bin); err != nil || got != sha("build one") {
		t.Fatalf("first sum %q, %v", got, err)
	}
	d.save()

	d = loadDigests(cache)
	d.now = later
	e := d.entries[bin]
	if e.SHA256 != sha("build one") {
		t.Fatalf("not remembered across a save: %+v", d.entries)
	}
	e.SHA256 = "planted"
	d.entries[bin] = e
	if got, _ := d.sum(bin); got != "planted" {
		t.Fatalf("remembered sum not used: %q", got)
	}

	// A new file renamed into place (what an install does).
	tmp := bin + ".new"
	if err := os.WriteFile(tmp, []byte("build two"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.sum(bin); got != sha("build two") {
		t.Errorf("after a replacement: %q", got)
	}
	// Rewritten in place, same size.
	e = d.entries[bin]
	e.SHA256 = "planted"
	d.entries[bin] = e
	if err := os.WriteFile(bin, []byte("build 3!!"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(bin, old, old); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.sum(bin); got != sha("build 3!!") {
		t.Errorf("after a rewrite in place: %q", got)
	}
}

// TestDigestsRacyNotRemembered: a file changed within the racy window
// of its hashing is hashed but not remembered, since a second write in
// the same clock tick would keep its identity.
func TestDigestsRacyNotRemembered(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "lazaret-netd")
	if err := os.WriteFile(bin, []byte("fresh"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := loadDigests(filepath.Join(dir, DigestCacheName))
	if got, _ := d.sum(bin); got != sha("fresh") {
		t.Fatalf("sum %q", got)
	}
	if _, ok := d.entries[bin]; ok {
		t.Error("a file written just now was remembered")
	}
	// The control: the same file, an hour later, is remembered.
	d.now = func() time.Time { return time.Now().Add(time.Hour) }
	d.sum(bin)
	if _, ok := d.entries[bin]; !ok {
		t.Error("control: an old file was not remembered")
	}
}

// TestDigestsPruneAndMalformed: entries of removed files go at the next
// save; a malformed cache is started afresh.
func TestDigestsPruneAndMalformed(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, DigestCacheName)
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte(p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d := loadDigests(cache)
	d.now = func() time.Time { return time.Now().Add(time.Hour) }
	d.sum(a)
	d.sum(b)
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	d.save()
	if got := loadDigests(cache).entries; len(got) != 1 || got[a].SHA256 != sha(a) {
		t.Errorf("after a save with b removed: %+v", got)
	}
	if fi, err := os.Stat(cache); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("cache file: %v %v", fi, err)
	}
	if err := os.WriteFile(cache, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	d = loadDigests(cache)
	if got, err := d.sum(a); err != nil || got != sha(a) || len(d.entries) > 1 {
		t.Errorf("with a malformed cache: %q %v %+v", got, err, d.entries)
	}
}

// TestImageRefCachedIsTheSame: the tag named through remembered sums is
// the tag computed from the files.
func TestImageRefCachedIsTheSame(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "lazaret-netd")
	for name, body := range map[string]string{"lazaret-netd": "n", "lazaret-escalate": "e", "lazaret-escalate-go": "g"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	want, err := ImageRefFor(bin)
	if err != nil {
		t.Fatal(err)
	}
	d := loadDigests(filepath.Join(dir, DigestCacheName))
	d.now = func() time.Time { return time.Now().Add(time.Hour) }
	for i := 0; i < 2; i++ {
		if got, err := imageRefFor(bin, d); err != nil || got != want {
			t.Errorf("round %d: %q, %v; want %q", i, got, err, want)
		}
	}
	if len(d.entries) != 3 {
		t.Errorf("remembered %d sums, want 3", len(d.entries))
	}
}
