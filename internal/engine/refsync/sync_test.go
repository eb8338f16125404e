package refsync

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo/gittest"
)

// evilPack returns a pack holding a commit whose tree has an entry named
// ".git" (git itself refuses to create one; fsck flags it because a
// checkout of it would plant a repository).
func evilPack(t *testing.T) []byte {
	t.Helper()
	src := gittest.NewRepo(t)
	blob := gittest.Git(t, src, "hash-object", "-w", "--stdin")
	raw, _ := hex.DecodeString(blob)
	tree := append([]byte("100644 .git\x00"), raw...)
	cmd := exec.Command("git", "-C", src, "hash-object", "-w", "-t", "tree", "--literally", "--stdin")
	cmd.Stdin = bytes.NewReader(tree)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	treeID := strings.TrimSpace(string(out))
	commit := gittest.Git(t, src, "commit-tree", "-m", "evil", treeID)
	cmd = exec.Command("git", "-C", src, "pack-objects", "--stdout")
	cmd.Stdin = strings.NewReader(commit + "\n" + treeID + "\n" + blob + "\n")
	pack, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return pack
}

func TestImportPackRejectsBadObjects(t *testing.T) {
	pack := evilPack(t)
	host := gittest.NewRepo(t)
	g := &hostgit.Git{}
	repo, err := gitrepo.OpenHostRepo(context.Background(), g, host)
	if err != nil {
		t.Fatal(err)
	}
	s := &Syncer{Git: g, Repo: repo}
	if err := s.importPack(context.Background(), bytes.NewReader(pack)); err == nil {
		t.Fatal("a pack with a .git tree entry was imported")
	}
	if packs, _ := filepath.Glob(filepath.Join(host, ".git", "objects", "pack", "*.pack")); len(packs) != 0 {
		t.Errorf("rejected pack left in the repository: %v", packs)
	}
	// Control: without --strict, git takes the same pack.
	ctl := gittest.NewRepo(t)
	cmd := exec.Command("git", "-C", ctl, "index-pack", "--stdin")
	cmd.Stdin = bytes.NewReader(pack)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("control: plain index-pack refused the pack: %v: %s", err, out)
	}
}

func TestImportPackSizeLimit(t *testing.T) {
	host := gittest.NewRepo(t)
	g := &hostgit.Git{}
	repo, _ := gitrepo.OpenHostRepo(context.Background(), g, host)
	src := gittest.NewRepo(t)
	os.WriteFile(filepath.Join(src, "big"), bytes.Repeat([]byte("x"), 1<<16), 0o644)
	gittest.Git(t, src, "add", "big")
	gittest.Git(t, src, "commit", "-q", "-m", "big")
	cmd := exec.Command("git", "-C", src, "pack-objects", "--stdout", "--revs")
	cmd.Stdin = strings.NewReader("HEAD\n")
	pack, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	s := &Syncer{Git: g, Repo: repo, MaxPack: int64(len(pack) / 2)}
	if err := s.importPack(context.Background(), bytes.NewReader(pack)); err == nil || !strings.Contains(err.Error(), "larger") {
		t.Fatalf("oversized pack: %v", err)
	}
	s.MaxPack = 0
	if err := s.importPack(context.Background(), bytes.NewReader(pack)); err != nil {
		t.Fatalf("normal pack: %v", err)
	}
}

// agentStream builds what the sandbox sends for the repository dir: its
// branch list, an empty line, and a bundle excluding known.
func agentStream(t *testing.T, dir string, known ...string) []byte {
	t.Helper()
	refs := gittest.Git(t, dir, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/")
	cmd := exec.Command("git", "-C", dir, "bundle", "create", "-q", "-", "--branches", "--stdin")
	var stdin strings.Builder
	for _, k := range known {
		stdin.WriteString("^" + k + "\n")
	}
	cmd.Stdin = strings.NewReader(stdin.String())
	bundle, _ := cmd.Output() // empty (signature only) when nothing is new
	return append([]byte(refs+"\n\n"), bundle...)
}

func TestSyncFromStream(t *testing.T) {
	ctx := context.Background()
	host := gittest.NewRepo(t)
	base := gittest.Git(t, host, "rev-parse", "HEAD")
	agent := filepath.Join(t.TempDir(), "agent")
	gittest.Git(t, host, "clone", "-q", "--shared", host, agent)
	gittest.Git(t, agent, "checkout", "-q", "-b", "lazaret/agent-p")
	gittest.Write(t, filepath.Join(agent, "new.txt"), "agent\n")
	gittest.Git(t, agent, "add", "new.txt")
	gittest.Git(t, agent, "commit", "-q", "-m", "agent")
	gittest.Git(t, agent, "branch", "side")
	gittest.Git(t, agent, "branch", "-D", "main")
	g := &hostgit.Git{}
	repo, _ := gitrepo.OpenHostRepo(ctx, g, host)
	s := &Syncer{Git: g, Repo: repo, Map: gitrepo.RefMap{Profile: "p"}}
	sync := func(stream []byte) *SyncResult {
		t.Helper()
		rr, err := s.readExport(ctx, bufioReader(stream))
		if err != nil {
			t.Fatal(err)
		}
		hostRefs, _ := s.hostRefs(ctx)
		res, err := s.apply(ctx, hostRefs, &rr.exported)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	tip := gittest.Git(t, agent, "rev-parse", "HEAD")
	res := sync(agentStream(t, agent, base))
	if !res.Imported || len(res.Updated) != 2 {
		t.Errorf("first sync: %+v", res)
	}
	if got := gittest.Git(t, host, "rev-parse", "refs/heads/lazaret/agent-p", "refs/lazaret/p/heads/side"); got != tip+"\n"+tip {
		t.Errorf("host refs: %s", got)
	}
	// Nothing new: no pack, nothing moved.
	if res := sync(agentStream(t, agent, base, tip)); res.Imported || len(res.Updated)+len(res.Deleted) != 0 {
		t.Errorf("idle sync: %+v", res)
	}
	// A rewrite to an older commit (no new objects) and a deleted branch.
	gittest.Git(t, agent, "reset", "-q", "--hard", base)
	gittest.Git(t, agent, "branch", "-D", "side")
	res = sync(agentStream(t, agent, base, tip))
	if res.Imported || len(res.Updated) != 1 || len(res.Deleted) != 1 {
		t.Errorf("rewrite sync: %+v", res)
	}
	if got := gittest.Git(t, host, "rev-parse", "refs/heads/lazaret/agent-p"); got != base {
		t.Errorf("agent ref after rewrite: %s", got)
	}
	if reflog := gittest.Git(t, host, "reflog", "--format=%H", "refs/heads/lazaret/agent-p"); !strings.Contains(reflog, tip) {
		t.Errorf("old tip not in the reflog: %s", reflog)
	}
	// A branch checked out on the host is never moved.
	gittest.Git(t, host, "checkout", "-q", "lazaret/agent-p")
	gittest.Git(t, agent, "commit", "-q", "--allow-empty", "-m", "again")
	if res := sync(agentStream(t, agent, base)); len(res.Updated) != 0 {
		t.Errorf("moved a checked-out branch: %+v", res)
	}
	// A tip whose objects the host lacks, with no pack: refused.
	gittest.Git(t, host, "checkout", "-q", "main")
	orphan := gittest.Git(t, agent, "commit-tree", "-m", "x", gittest.Git(t, agent, "rev-parse", "HEAD^{tree}"))
	stream := []byte(orphan + " refs/heads/lazaret/agent-p\n\n")
	rr, err := s.readExport(ctx, bufioReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	hostRefs, _ := s.hostRefs(ctx)
	if _, err := s.apply(ctx, hostRefs, &rr.exported); err == nil {
		t.Errorf("a tip missing on the host was accepted")
	}
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

type nopWriteCloser struct{ bytes.Buffer }

func (*nopWriteCloser) Close() error { return nil }

// agentClone makes a host repository and an agent clone of it on branch
// lazaret/agent-p with one commit per message; it returns both and the
// host's HEAD the clone started from.
func agentClone(t *testing.T, messages ...string) (host, agent, base string) {
	t.Helper()
	host = gittest.NewRepo(t)
	base = gittest.Git(t, host, "rev-parse", "HEAD")
	agent = filepath.Join(t.TempDir(), "agent")
	gittest.Git(t, host, "clone", "-q", "--shared", host, agent)
	gittest.Git(t, agent, "checkout", "-q", "-b", "lazaret/agent-p")
	for _, m := range messages {
		gittest.Git(t, agent, "commit", "-q", "--allow-empty", "-m", m)
	}
	return host, agent, base
}

func TestSessionAnswerParsing(t *testing.T) {
	ctx := context.Background()
	host, agent, base := agentClone(t, "agent")
	gittest.Git(t, agent, "branch", `bad"name`) // skipped, in both sections
	tip := gittest.Git(t, agent, "rev-parse", "HEAD")
	g := &hostgit.Git{}
	repo, _ := gitrepo.OpenHostRepo(ctx, g, host)
	s := &Syncer{Git: g, Repo: repo, Map: gitrepo.RefMap{Profile: "p"}}
	stream := agentStream(t, agent, base)
	refs, bundle, _ := bytes.Cut(stream, []byte("\n\n"))
	refs = append(refs, '\n')
	answer := func(refs, bundle []byte) *syncSession {
		var b bytes.Buffer
		fmt.Fprintf(&b, "%d\n", len(refs))
		b.Write(refs)
		fmt.Fprintf(&b, "%d\n", len(bundle))
		b.Write(bundle)
		return &syncSession{p: &Proc{Stdin: &nopWriteCloser{}}, out: bufio.NewReader(&b)}
	}
	ex, err := s.sessionRequest(ctx, answer(refs, bundle), []string{base})
	if err != nil || !ex.imported || ex.refs["refs/heads/lazaret/agent-p"] != tip || len(ex.skipped) != 2 {
		t.Fatalf("valid answer: %+v, %v", ex, err)
	}
	if ex, err := s.sessionRequest(ctx, answer(refs, nil), nil); err != nil || ex.imported {
		t.Errorf("answer without bundle: %+v, %v", ex, err)
	}
	for name, ss := range map[string]*syncSession{
		"negative size": {p: &Proc{Stdin: &nopWriteCloser{}}, out: bufio.NewReader(strings.NewReader("-1\n"))},
		"huge size":     {p: &Proc{Stdin: &nopWriteCloser{}}, out: bufio.NewReader(strings.NewReader("99999999999\n"))},
		"not a number":  {p: &Proc{Stdin: &nopWriteCloser{}}, out: bufio.NewReader(strings.NewReader("12x\n"))},
		"short section": {p: &Proc{Stdin: &nopWriteCloser{}}, out: bufio.NewReader(strings.NewReader("100\nabc"))},
		"bad ref line":  answer([]byte("xyz refs/heads/a\n"), nil),
		"bad bundle":    answer(refs, []byte("# v2 git bundle\n\nNOTAPACK")),
	} {
		if _, err := s.sessionRequest(ctx, ss, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
