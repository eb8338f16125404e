package refsync

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
)

const oidA = "0123456789abcdef0123456789abcdef01234567"
const oidB = "89abcdef0123456789abcdef0123456789abcdef"

func TestReadRefListAndBundle(t *testing.T) {
	stream := oidA + " refs/heads/lazaret/agent-x\n" + oidB + " refs/heads/bad..name\n\n" +
		"# v2 git bundle\n-" + oidB + " base\n" + oidA + " refs/heads/lazaret/agent-x\n\nPACKdata"
	br := bufio.NewReader(strings.NewReader(stream))
	refs, skipped, err := ReadRefList(br, 40)
	if err != nil || len(refs) != 1 || refs[0].OID != oidA || len(skipped) != 1 {
		t.Fatalf("ReadRefList = %v, %v, %v", refs, skipped, err)
	}
	h, err := ReadBundleHeader(br, "sha1")
	if err != nil || len(h.Refs) != 1 || len(h.Prerequisites) != 1 {
		t.Fatalf("ReadBundleHeader = %+v, %v", h, err)
	}
	rest, _ := io.ReadAll(br)
	if string(rest) != "PACKdata" {
		t.Fatalf("pack = %q", rest)
	}
}

func TestReadBundleHeaderRejects(t *testing.T) {
	for name, s := range map[string]string{
		"signature": "# v9 git bundle\n\nPACK",
		"no pack":   "# v2 git bundle\n" + oidA + " refs/heads/a\n\nJUNK",
		"bad oid":   "# v2 git bundle\nzz refs/heads/a\n\nPACK",
		"filter":    "# v3 git bundle\n@filter=blob:none\n" + oidA + " refs/heads/a\n\nPACK",
		"format":    "# v3 git bundle\n@object-format=sha256\n" + oidA + " refs/heads/a\n\nPACK",
		"truncated": "# v2 git bundle\n" + oidA + " refs/heads/a",
		"long line": "# v2 git bundle\n" + strings.Repeat("a", 5000) + "\n\nPACK",
		"cap late":  "# v3 git bundle\n" + oidA + " refs/heads/a\n@object-format=sha1\n\nPACK",
	} {
		if _, err := ReadBundleHeader(bufio.NewReader(strings.NewReader(s)), "sha1"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ReadBundleHeader(bufio.NewReader(strings.NewReader("")), "sha1"); err != errNoBundle {
		t.Errorf("empty stream: %v, want errNoBundle", err)
	}
}

// TestReadBundleHeaderSkipsRefusedNames: a branch whose name lazaret
// refuses does not fail the bundle (the other branches still sync); it is
// reported as skipped.
func TestReadBundleHeaderSkipsRefusedNames(t *testing.T) {
	s := "# v2 git bundle\n" + oidA + " refs/heads/bad\"name\n" + oidA + " refs/heads/\xc3\xbcn\xc3\xaf\n" +
		oidA + " refs/tags/a\n" + oidA + " refs/heads/a b\n" + oidA + " refs/heads/good\n\nPACK"
	h, err := ReadBundleHeader(bufio.NewReader(strings.NewReader(s)), "sha1")
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Refs) != 1 || h.Refs[0].Name != "refs/heads/good" || len(h.Skipped) != 4 {
		t.Errorf("refs %v, skipped %q", h.Refs, h.Skipped)
	}
	if oid, name := SkippedRef(h.Skipped[0]); oid != oidA || name != `refs/heads/bad"name` {
		t.Errorf("SkippedRef = %q %q", oid, name)
	}
}

// FuzzSandboxStream feeds arbitrary sandbox output to the parsers: they
// must never panic, and whatever they accept must be valid ref names and
// object names.
func FuzzSandboxStream(f *testing.F) {
	f.Add([]byte(oidA + " refs/heads/main\n\n# v2 git bundle\n" + oidA + " refs/heads/main\n\nPACK"))
	f.Add([]byte("\n"))
	f.Add([]byte(oidA + " refs/heads/a/../b\n\n# v3 git bundle\n@object-format=sha1\n-" + oidB + "\n\nPACK"))
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReader(bytes.NewReader(data))
		refs, _, err := ReadRefList(br, 40)
		if err != nil {
			return
		}
		for _, r := range refs {
			if !gitrepo.ValidOID(r.OID, 40) || gitrepo.ValidBranch(strings.TrimPrefix(r.Name, "refs/heads/")) != nil {
				t.Fatalf("accepted %+v", r)
			}
		}
		h, err := ReadBundleHeader(br, "sha1")
		if err != nil {
			return
		}
		for _, r := range h.Refs {
			if _, err := (gitrepo.RefMap{Profile: "p"}).HostRef(r.Name); err != nil || !gitrepo.ValidOID(r.OID, 40) {
				t.Fatalf("bundle accepted %+v", r)
			}
		}
	})
}
