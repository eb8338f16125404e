package kubecli

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/clicore/keeper"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
)

func testRecord(dir, claim string) *resumeRecord {
	pub, _, _ := ed25519.GenerateKey(nil)
	return &resumeRecord{Session: newSessionID(), Profile: "p1", Workspace: "/w", Claim: claim, Pod: "pod-1",
		Command: []string{"sh"}, Public: pub, Context: "ctx", dir: dir}
}

// domainDir is the record directory of one domain under root.
func domainDir(root, hash string) string {
	return filepath.Join(root, domain.DomainsDirName, hash, "kube-sessions")
}

// A running session holds its record: a second lazaret-kube cannot take
// it; once let go without its end it can, and the record is what was
// written; its end removes record and lock.
func TestResumeRecordHold(t *testing.T) {
	dir := domainDir(t.TempDir(), "h1")
	rec := testRecord(dir, "c1")
	h, err := holdResume(dir, rec)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(rec.path()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record %v, %v: want mode 0600", fi, err)
	}
	if _, err := takeResume(dir, rec.Session); !errors.Is(err, errResumeTaken) {
		t.Fatalf("taken while held: %v", err)
	}
	h.release(false)
	h2, err := takeResume(dir, rec.Session)
	if err != nil {
		t.Fatal(err)
	}
	if got := h2.rec; got.Pod != "pod-1" || !slices.Equal(got.Command, rec.Command) || !slices.Equal(got.Public, rec.Public) || got.Claim != "c1" {
		t.Fatalf("read back %+v", got)
	}
	h2.release(true)
	for _, p := range []string{rec.path(), rec.lockPath()} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left after the end: %v", p, err)
		}
	}
	if _, err := takeResume(dir, rec.Session); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an ended session taken back: %v", err)
	}
	if _, err := os.Stat(rec.lockPath()); !errors.Is(err, os.ErrNotExist) {
		t.Error("a refused take left its lock file")
	}
}

// A record is refused unless it is what holdResume writes: a session id
// is never a path, a key has its size, the file is named for its session.
func TestReadResumeRefuses(t *testing.T) {
	dir := t.TempDir()
	if _, err := takeResume(dir, "../../etc/passwd"); err == nil || !strings.Contains(err.Error(), "not a session id") {
		t.Fatalf("a path as session id: %v", err)
	}
	good := testRecord(dir, "c1")
	for name, edit := range map[string]func(r *resumeRecord){
		"session id": func(r *resumeRecord) { r.Session = "ABC" },
		"key size":   func(r *resumeRecord) { r.Public = r.Public[:5] },
		"profile":    func(r *resumeRecord) { r.Profile = "../x" },
		"no pod":     func(r *resumeRecord) { r.Pod = "" },
	} {
		r := *good
		edit(&r)
		p := filepath.Join(dir, good.Session+".json")
		if err := writeRecord(p, &r); err != nil {
			t.Fatal(err)
		}
		if _, err := readResume(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Control: the good one is read.
	p := filepath.Join(dir, good.Session+".json")
	if err := writeRecord(p, good); err != nil {
		t.Fatal(err)
	}
	if _, err := readResume(p); err != nil {
		t.Fatalf("control: %v", err)
	}
	if err := os.Rename(p, filepath.Join(dir, newSessionID()+".json")); err != nil {
		t.Fatal(err)
	}
	if paths, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(paths) != 1 {
		t.Fatal(paths)
	} else if _, err := readResume(paths[0]); err == nil {
		t.Error("a record under another session's name: accepted")
	}
}

// attach offers the records no keeper and no lazaret-kube holds; stop
// drops those of its claims that no lazaret-kube holds.
func TestResumablesAndStop(t *testing.T) {
	root := t.TempDir()
	cfg := &config.Config{DataRoot: root}
	var holds []*resumeHold
	hold := func(hash, claim string) *resumeRecord {
		t.Helper()
		dir := domainDir(root, hash)
		rec := testRecord(dir, claim)
		h, err := holdResume(dir, rec)
		if err != nil {
			t.Fatal(err)
		}
		holds = append(holds, h)
		return rec
	}
	dead, live, other, running := hold("h1", "c1"), hold("h1", "c1"), hold("h2", "c2"), hold("h1", "c1")
	for _, h := range holds[:3] {
		h.release(false) // its lazaret-kube died
	}
	got, err := resumables(cfg, []keeper.Info{{Session: live.Session}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range got {
		ids = append(ids, r.Session)
	}
	slices.Sort(ids)
	want := []string{dead.Session, other.Session}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("resumables %v, want %v (not the one a keeper holds, nor the one a lazaret-kube runs)", ids, want)
	}
	if args := dead.innerArgs(); !slices.Equal(args[len(args)-3:], []string{resumeVerb, "p1", dead.Session}) ||
		!slices.Contains(args, "--context=ctx") || !slices.Contains(args, "--workspace=/w") {
		t.Fatalf("inner args %q", args)
	}

	dropResumables(cfg, []string{"c1"})
	for _, c := range []struct {
		r    *resumeRecord
		kept bool
	}{{dead, false}, {live, false}, {other, true}, {running, true}} {
		if _, err := os.Stat(c.r.path()); (err == nil) != c.kept {
			t.Errorf("record of claim %s (session %s): kept %v, want %v", c.r.Claim, c.r.Session[:6], err == nil, c.kept)
		}
	}
	holds[3].release(true)
}

func writeRecord(path string, r *resumeRecord) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}
