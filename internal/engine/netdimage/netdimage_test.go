package netdimage

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestImageRefForIsTheBinarysHash(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.WriteFile(a, []byte("netd build one"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte("netd build two"), 0o755); err != nil {
		t.Fatal(err)
	}
	ra, err := ImageRefFor(a)
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := ImageRefFor(b)
	sum := sha256.Sum256([]byte("netd build one"))
	if !strings.HasPrefix(ra, ImageName+":") || !strings.HasSuffix(ra, "-"+hex.EncodeToString(sum[:])[:12]) {
		t.Errorf("ImageRefFor = %q", ra)
	}
	if ra == rb {
		t.Errorf("two binaries share the tag %q", ra)
	}
	if !contentTag.MatchString(ra) {
		t.Errorf("%q is not recognised as a content tag (it would never be pruned)", ra)
	}
	if _, err := ImageRefFor(filepath.Join(dir, "missing")); err == nil {
		t.Error("ImageRefFor of a missing file succeeded")
	}
}

// Only content tags are pruned: a release tag, a test tag or another
// repository never is.
func TestContentTagMatchesOnlyContentTags(t *testing.T) {
	for ref, want := range map[string]bool{
		ImageName + ":v1.2.0-0123456789ab":        true,
		ImageName + ":b2d057e-dirty-0123456789ab": true,
		ImageName + ":v1.2.0":                     false,
		ImageName + ":nettest":                    false,
		ImageName + ":v1-0123456789AB":            false,
		ImageName + ":v1-0123456789a":             false,
		"localhost/other:v1-0123456789ab":         false,
		ImageName + "x:v1-0123456789ab":           false,
	} {
		if got := contentTag.MatchString(ref); got != want {
			t.Errorf("contentTag(%q) = %v, want %v", ref, got, want)
		}
	}
}
