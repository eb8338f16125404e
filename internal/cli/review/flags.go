package review

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
)

// What a merge of the agent's branch plants on the host, beyond the
// content itself: symlinks that lead out of the repository (a later write
// through one by the user's editor or build lands outside it), new
// executable bits, and files that the user's tools run without asking
// (direnv, editors' tasks, git hooks, build and package scripts, CI).
// Computed on the host from the verified objects, with hardened git.

// Flag kinds.
const (
	FlagExternalSymlink = "external symlink"
	FlagExecutable      = "new executable"
	FlagAutorun         = "runs on your host"
)

// Flag is one thing a merge would plant. Path and Detail come from the
// agent: escape them before they reach a terminal.
type Flag struct {
	Kind   string
	Path   string
	Detail string // the symlink's target, or why the file runs
}

// Limits on what the flag computation reads from the agent's trees.
const (
	maxSymlinks      = 20000
	maxSymlinkTarget = 4096
	maxSymlinkHops   = 40
)

// rawEntry is one record of `git diff --raw -z --no-renames`.
type rawEntry struct {
	srcMode, dstMode string
	status           byte
	path             string
}

// parseRawDiff parses `git diff --raw -z --no-renames` output.
func parseRawDiff(out []byte) ([]rawEntry, error) {
	var entries []rawEntry
	for len(out) > 0 {
		meta, rest, ok := bytes.Cut(out, []byte{0})
		if !ok {
			return nil, fmt.Errorf("diff --raw: truncated record")
		}
		p, rest2, ok := bytes.Cut(rest, []byte{0})
		if !ok {
			return nil, fmt.Errorf("diff --raw: record without a path")
		}
		out = rest2
		f := strings.Fields(strings.TrimPrefix(string(meta), ":"))
		if len(f) != 5 || len(f[4]) == 0 || !strings.HasPrefix(string(meta), ":") {
			return nil, fmt.Errorf("diff --raw: bad record %q", meta)
		}
		entries = append(entries, rawEntry{srcMode: f[0], dstMode: f[1], status: f[4][0], path: string(p)})
	}
	return entries, nil
}

// treeSymlinks lists the symlinks of a commit's tree: path → blob.
func treeSymlinks(out []byte) (map[string]string, error) {
	links := map[string]string{}
	for _, rec := range bytes.Split(out, []byte{0}) {
		meta, p, ok := bytes.Cut(rec, []byte{'\t'})
		if !ok {
			continue
		}
		f := strings.Fields(string(meta))
		if len(f) != 3 || f[0] != "120000" {
			continue
		}
		if len(links) >= maxSymlinks {
			return nil, fmt.Errorf("more than %d symlinks", maxSymlinks)
		}
		links[string(p)] = f[2]
	}
	return links, nil
}

// symlinkTree is a commit's symlinks with their targets, to resolve paths
// inside the tree as the file system will once it is checked out.
type symlinkTree map[string]string // path → target

// escapes reports whether the symlink at link, followed through every
// other symlink of the tree, leads out of the repository's working tree or
// into its .git, and why. It is the kernel's resolution done on the
// tree: component by component, ".." against the resolved parent, not the
// lexical one (a/b/x → s/../.. with a/b/s → ../../f resolves above the
// top although both targets look local).
func (t symlinkTree) escapes(link string) (bool, string) {
	target := t[link]
	if strings.HasPrefix(target, "/") {
		return true, "absolute target"
	}
	stack := strings.Split(path.Dir(link), "/")
	if path.Dir(link) == "." {
		stack = nil
	}
	rest := strings.Split(target, "/")
	for hops := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(stack) == 0 {
				return true, "leads above the repository"
			}
			stack = stack[:len(stack)-1]
			continue
		}
		stack = append(stack, c)
		if strings.EqualFold(stack[0], ".git") {
			return true, "leads into .git"
		}
		next, ok := t[strings.Join(stack, "/")]
		if !ok {
			continue
		}
		if hops++; hops > maxSymlinkHops {
			return true, "symlink loop"
		}
		if strings.HasPrefix(next, "/") {
			return true, "through a symlink with an absolute target"
		}
		stack = stack[:len(stack)-1]
		rest = append(strings.Split(next, "/"), rest...)
	}
	return false, ""
}

// readSymlinkTree reads the symlinks of commit and their targets.
func (r *Review) readSymlinkTree(ctx context.Context, commit string) (symlinkTree, error) {
	out, err := r.Git.LsTree(ctx, r.Repo.TopLevel, commit)
	if err != nil {
		return nil, err
	}
	links, err := treeSymlinks(out)
	if err != nil {
		return nil, err
	}
	var in strings.Builder
	paths := make([]string, 0, len(links))
	for p := range links {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		in.WriteString(links[p] + "\n")
	}
	if len(paths) == 0 {
		return symlinkTree{}, nil
	}
	blobs, err := r.Git.CatFileBatch(ctx, r.Repo.Work(), strings.NewReader(in.String()))
	if err != nil {
		return nil, err
	}
	targets, err := parseBatch(blobs, len(paths))
	if err != nil {
		return nil, err
	}
	t := symlinkTree{}
	for i, p := range paths {
		t[p] = targets[i]
	}
	return t, nil
}

// parseBatch reads n symlink targets of `git cat-file --batch` output.
func parseBatch(out []byte, n int) ([]string, error) {
	objs, err := hostgit.ParseBatch(out, n, "blob", maxSymlinkTarget)
	if err != nil {
		return nil, err
	}
	res := make([]string, len(objs))
	for i, o := range objs {
		res[i] = string(o)
	}
	return res, nil
}

// Flags lists what merging the agent branch into HEAD would plant: every
// symlink that leads out of the repository in the agent's tree and did
// not (the same way) in the merge base, new executable bits, and changes
// to files the host runs unasked.
func (r *Review) Flags(ctx context.Context) ([]Flag, error) {
	tip, base, err := r.forkPoint(ctx)
	if err != nil {
		return nil, err
	}
	return r.flagsBetween(ctx, base, tip)
}

func (r *Review) flagsBetween(ctx context.Context, base, tip string) ([]Flag, error) {
	out, err := r.Git.DiffRaw(ctx, r.Repo.TopLevel, base, tip)
	if err != nil {
		return nil, err
	}
	entries, err := parseRawDiff(out)
	if err != nil {
		return nil, err
	}
	flags, err := r.symlinkFlags(ctx, base, tip)
	if err != nil {
		return nil, fmt.Errorf("checking the agent's symlinks: %w", err)
	}
	for _, e := range entries {
		if e.status == 'D' {
			continue
		}
		if e.dstMode == "100755" && e.srcMode != "100755" {
			flags = append(flags, Flag{Kind: FlagExecutable, Path: e.path})
		}
		if why := autorun(e.path); why != "" {
			flags = append(flags, Flag{Kind: FlagAutorun, Path: e.path, Detail: why})
		}
	}
	return flags, nil
}

// symlinkFlags: symlinks of tip that escape, unless the same symlink with
// the same target escaped in base already.
func (r *Review) symlinkFlags(ctx context.Context, base, tip string) ([]Flag, error) {
	after, err := r.readSymlinkTree(ctx, tip)
	if err != nil {
		return nil, err
	}
	before, err := r.readSymlinkTree(ctx, base)
	if err != nil {
		return nil, err
	}
	var flags []Flag
	for _, p := range sortedKeys(after) {
		esc, why := after.escapes(p)
		if !esc {
			continue
		}
		if old, ok := before[p]; ok && old == after[p] {
			if was, _ := before.escapes(p); was {
				continue
			}
		}
		flags = append(flags, Flag{Kind: FlagExternalSymlink, Path: p, Detail: after[p] + " (" + why + ")"})
	}
	return flags, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ExternalSymlinks picks the external symlink flags.
func ExternalSymlinks(flags []Flag) []Flag {
	var out []Flag
	for _, f := range flags {
		if f.Kind == FlagExternalSymlink {
			out = append(out, f)
		}
	}
	return out
}
