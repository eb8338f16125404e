//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// forkDeb builds and installs a one-file package named by $1 (dpkg, offline).
const forkDeb = `set -e
d=$(mktemp -d); mkdir -p $d/p/DEBIAN $d/p/usr/bin
printf 'Package: %s\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.com>\nDescription: lazaret fork test\n' "$1" > $d/p/DEBIAN/control
printf '#!/bin/sh\necho %s\n' "$1" > $d/p/usr/bin/$1; chmod 755 $d/p/usr/bin/$1
dpkg-deb --root-owner-group --build $d/p /tmp/$1.deb >/dev/null
dpkg -i /tmp/$1.deb >/dev/null
`

type forkAttempt struct {
	Name    string `json:"name"`
	Branch  string `json:"branch"`
	Running bool   `json:"running"`
	Bytes   int64  `json:"bytes"`
	Head    string `json:"head"`
}

func forkList(t *testing.T, e *Env) []forkAttempt {
	t.Helper()
	var as []forkAttempt
	if err := json.Unmarshal([]byte(e.MustRun("attempts", "ls", "--json")), &as); err != nil {
		t.Fatal(err)
	}
	return as
}

// TestForkAttempts: a stopped sandbox with a commit and a file under /usr
// forks into 3 attempts; each installs a different package, writes a
// different file and commits: the branches, the persistent dirs and the
// Trust Anchors (CA fingerprints) are distinct, the parent's /usr is
// untouched, removing one leaves the others and the parent intact, and
// bad input makes nothing.
func TestForkAttempts(t *testing.T) {
	e := NewEnv(t)
	gsRepo(t, e.Workspace)
	e.MustRun("exec", "--", "sh", "-c", `set -e; mkdir -p /usr/local/share/lz; echo parent > /usr/local/share/lz/p
echo p > p.txt; git add p.txt; git commit -qm parent`)
	e.MustRun("stop")
	parentTip := gsGit(t, e.Workspace, "rev-parse", "lazaret/agent-default")

	out := e.MustRun("fork", "try", "-n", "3")
	for i := 1; i <= 3; i++ {
		if !strings.Contains(out, fmt.Sprintf("attempt try-%d: branch lazaret/agent-default.try-%d at %s", i, i, parentTip[:12])) {
			t.Fatalf("fork output:\n%s", out)
		}
	}
	cas := map[string]string{}
	for i := 1; i <= 3; i++ {
		n := fmt.Sprintf("try-%d", i)
		ca := e.MustRun("exec", "--attempt", n, "--", "bash", "-c", fmt.Sprintf(`set -e
cat /usr/local/share/lz/p; echo %[1]s > /usr/local/share/lz/a; bash -c '%[2]s' - lzpkg%[3]d
echo %[1]s > %[1]s.txt; git add %[1]s.txt; git commit -qm %[1]s
sha256sum /run/lazaret/tls/ca.pem | cut -c1-64`, n, strings.ReplaceAll(forkDeb, "'", `'\''`), i))
		lines := strings.Split(strings.TrimSpace(ca), "\n")
		if lines[0] != "parent" {
			t.Fatalf("attempt %s does not see the parent's /usr: %q", n, ca)
		}
		cas[lines[len(lines)-1]] = n
		e.MustRun("stop", "--attempt", n)
	}
	if len(cas) != 3 {
		t.Fatalf("the attempts share a Trust Anchor: %v", cas)
	}
	// After a restart each attempt has its own package and file, none of
	// the others'; the parent has none.
	for i := 1; i <= 3; i++ {
		n := fmt.Sprintf("try-%d", i)
		got := e.MustRun("exec", "--attempt", n, "--", "sh", "-c", `cat /usr/local/share/lz/a; for p in 1 2 3; do dpkg -s lzpkg$p >/dev/null 2>&1 && echo has$p; done; ls *.txt | tr '\n' ' '`)
		want := fmt.Sprintf("%s\nhas%d\na.txt b.txt p.txt %s.txt ", n, i, n)
		if got != want {
			t.Errorf("attempt %s after a restart: %q, want %q", n, got, want)
		}
		tip := gsGit(t, e.Workspace, "rev-parse", "lazaret/agent-default."+n)
		if gsGit(t, e.Workspace, "rev-parse", tip+"^") != parentTip || gsGit(t, e.Workspace, "log", "-1", "--format=%s", tip) != n {
			t.Errorf("branch of %s: %s is not its one commit on the parent's tip", n, tip)
		}
	}
	e.MustRun("stop", "--all")
	if got := e.MustRun("exec", "--", "sh", "-c", `ls /usr/local/share/lz; dpkg -s lzpkg1 >/dev/null 2>&1 && echo leaked; true`); got != "p\n" {
		t.Fatalf("the parent's /usr after the attempts: %q", got)
	}
	e.MustRun("stop")

	// rm removes one attempt: its branch and data; the others stay.
	gone := e.MustRun("attempts", "rm", "try-2")
	if !strings.Contains(gone, "branch lazaret/agent-default.try-2 deleted") {
		t.Errorf("rm output: %q", gone)
	}
	if as := forkList(t, e); len(as) != 2 || as[0].Name != "try-1" || as[1].Name != "try-3" || as[0].Head == "" {
		t.Fatalf("attempts after rm: %+v", as)
	}
	if r := e.Run("exec", "--attempt", "try-2", "--", "true"); r.Code != 2 || !strings.Contains(r.Stderr, `no attempt "try-2"`) {
		t.Errorf("exec in a removed attempt: exit %d %s", r.Code, r.Stderr)
	}
	if got := e.MustRun("exec", "--attempt", "try-3", "--", "cat", "/usr/local/share/lz/a"); got != "try-3\n" {
		t.Errorf("try-3 after try-2's rm: %q", got)
	}
	e.MustRun("stop", "--attempt", "try-3")

	// Bad input: nothing is made.
	domains := forkDomains(t, e)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"fork", "Bad_Name"}, "attempt name"},
		{[]string{"fork", "many", "-n", "7"}, "[attempts] max = 8"},
		{[]string{"fork", "try-1"}, "attempt try-1 exists"},
	} {
		r := e.Run(c.args...)
		if r.Code != 2 || !strings.Contains(r.Stderr, c.want) || strings.Count(strings.TrimSpace(r.Stderr), "\n") > 1 {
			t.Errorf("%v: exit %d, stderr %q (want %q)", c.args, r.Code, r.Stderr, c.want)
		}
	}
	if after := forkDomains(t, e); after != domains {
		t.Errorf("a refused fork left domains: %d before, %d after", domains, after)
	}
	if refs := gsGit(t, e.Workspace, "for-each-ref", "--format=%(refname)", "refs/heads/lazaret/"); strings.Count(refs, "\n")+1 != 3 {
		t.Errorf("host agent branches: %s", refs)
	}
}

func forkDomains(t *testing.T, e *Env) int {
	es, err := os.ReadDir(filepath.Join(e.DataRoot, "domains"))
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// TestForkWhileWriting: a fork of a running sandbox whose agent commits
// and writes /usr in a loop: every commit made before the fork began is
// on the attempt's branch, and the attempt's /usr holds a value at least
// as new (the sandbox is paused for the copy, so the value is whole).
func TestForkWhileWriting(t *testing.T) {
	e := NewEnv(t)
	gsRepo(t, e.Workspace)
	writer, errb := background(t, e, nil, "exec", "--", "sh", "-c", `mkdir -p /usr/local/share/lz
for i in $(seq 1 400); do echo $i > n.txt; git add n.txt; git commit -qm c$i; echo $i > /usr/local/share/lz/n; sleep 0.05; done`)
	count := func() int {
		r := e.Run("exec", "--", "git", "rev-list", "--count", "HEAD")
		n, _ := strconv.Atoi(strings.TrimSpace(r.Stdout))
		return n
	}
	Eventually(t, 2*time.Minute, "the agent to have made 20 commits", func() bool {
		if writer.ProcessState != nil {
			t.Fatalf("the writer ended: %s", errb)
		}
		return count() >= 22 // the host's 2, then the agent's
	})
	before := count() - 2
	out := e.MustRun("fork", "live")
	if !strings.Contains(out, "the running sandbox paused") {
		t.Errorf("fork of a running sandbox: %q", out)
	}
	subject := gsGit(t, e.Workspace, "log", "-1", "--format=%s", "lazaret/agent-default.live")
	n, _ := strconv.Atoi(strings.TrimPrefix(subject, "c"))
	if n < before {
		t.Fatalf("the attempt's branch ends at commit %q; %d were made before the fork", subject, before)
	}
	usr := e.MustRun("exec", "--attempt", "live", "--", "cat", "/usr/local/share/lz/n")
	if v, err := strconv.Atoi(strings.TrimSpace(usr)); err != nil || v < before {
		t.Fatalf("the attempt's /usr holds %q; %d commits were made before the fork", usr, before)
	}
	e.MustRun("stop", "--attempt", "live")
	_ = writer.Process.Kill()
}
