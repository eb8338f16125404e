package eschost

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/lazaret-dev/lazaret/internal/shellwords"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// Policy is the auto-approve engine.
type Policy struct {
	// AutoApprove holds the parsed auto_approve entries of the config;
	// once the server runs, only AddRule changes them (rules.go).
	AutoApprove [][]string
	mu          sync.RWMutex
	// Path is the PATH the executor gives commands; argv[0] is resolved
	// through it.
	Path string
	// Workspace is the host workspace: an appended word may not name a
	// path outside it. Empty means the command's own directory.
	Workspace string
}

// Verdict is the policy's answer for one command.
type Verdict struct {
	// Argv is the command's argument vector; nil when the command string
	// is not one simple command (it can then only be edited or denied).
	Argv []string
	// Executable is the resolved, symlink-free absolute path of argv[0];
	// empty when it cannot be resolved.
	Executable string
	// Auto is true when the command runs without asking.
	Auto bool
	// Reason says why a human must decide (empty when Auto).
	Reason string
	// Rule is the auto_approve entry that matched (when Auto).
	Rule string
}

// Evaluate decides whether argv (or the command string) may run without a
// human, for a command that would run in host directory dir:
//
//  1. a command string with a shell metacharacter or control character
//     never auto-approves (argv elements are checked the same way);
//  2. the string is split into words without any expansion;
//  3. argv[0] is resolved through PATH and symlinks; a banned executable
//     (by the name given or the real binary's name) never auto-approves;
//  4. an auto_approve entry approves exactly its argv; an entry ending in
//     {args} also admits appended plain words (shellwords.PlainWordReason:
//     no option, assignment, path outside the workspace or unusual
//     character), so `make lint SHELL=/bin/cat` is never auto-approved.
func (p *Policy) Evaluate(argv []string, command, dir string) Verdict {
	var v Verdict
	meta := false
	if argv == nil {
		meta = shellwords.HasMeta(command)
		words, err := shellwords.Split(command)
		if err != nil {
			v.Reason = "not a single simple command: " + err.Error()
			return v
		}
		argv = words
	}
	for _, a := range argv {
		if shellwords.HasMeta(a) {
			meta = true
		}
	}
	v.Argv = argv
	exe, err := escprompt.Resolve(argv[0], dir, p.Path)
	if err != nil {
		v.Reason = err.Error()
		return v
	}
	v.Executable = exe
	switch {
	case meta:
		v.Reason = "shell metacharacters or control characters"
	case shellwords.BannedEntryReason(argv) != "":
		v.Reason = shellwords.BannedEntryReason(argv)
	case shellwords.BannedEntryReason(append([]string{exe}, argv[1:]...)) != "":
		// By the real binary's name too: a symlink "mk" to python3, or
		// "mynpm exec" to npm.
		v.Reason = fmt.Sprintf("%s resolves to %s: %s", argv[0], exe, shellwords.BannedEntryReason(append([]string{exe}, argv[1:]...)))
	default:
		v.Auto, v.Reason, v.Rule = p.match(argv, exe, dir)
	}
	return v
}

func (p *Policy) match(argv []string, exe, dir string) (auto bool, reason, rule string) {
	reason = "no auto_approve entry matches"
	for _, e := range p.Rules() {
		fixed, args := splitEntry(e)
		if len(fixed) == 0 || len(argv) < len(fixed) || !slices.Equal(argv[:len(fixed)], fixed) {
			continue
		}
		// A banned entry can only exist if config validation was bypassed;
		// enforce it again here.
		if r := shellwords.BannedEntryReason(fixed); r != "" {
			return false, r, ""
		}
		byExe := append([]string{exe}, fixed[1:]...)
		if r := cmp.Or(shellwords.OpenSubcommandReason(fixed, args), shellwords.OpenSubcommandReason(byExe, args)); r != "" {
			return false, r, ""
		}
		extra := argv[len(fixed):]
		if len(extra) > 0 && !args {
			reason = fmt.Sprintf("auto_approve entry %q approves exactly its words; %d more were appended (an entry ending in %s admits plain words)",
				strings.Join(e, " "), len(extra), shellwords.ArgsPlaceholder)
			continue
		}
		if why := p.appendedReason(extra, dir); why != "" {
			reason = fmt.Sprintf("after auto_approve entry %q: %s", strings.Join(e, " "), why)
			continue
		}
		return true, "", strings.Join(e, " ")
	}
	return false, reason, ""
}

// splitEntry separates an entry's fixed words from its trailing {args}.
func splitEntry(e []string) (fixed []string, args bool) {
	if n := len(e); n > 0 && e[n-1] == shellwords.ArgsPlaceholder {
		return e[:n-1], true
	}
	return e, false
}

// appendedReason says why one of the words appended after an entry's
// fixed part is not plain, or "" when all are.
func (p *Policy) appendedReason(extra []string, dir string) string {
	for _, w := range extra {
		if why := shellwords.PlainWordReason(w); why != "" {
			return fmt.Sprintf("appended word %q is %s", w, why)
		}
		if why := outsideWorkspace(w, dir, p.Workspace); why != "" {
			return fmt.Sprintf("appended word %q %s", w, why)
		}
	}
	return ""
}

// outsideWorkspace returns a reason when word, taken as a path relative to
// dir, names (or would be created through) a place outside workspace once
// symlinks are resolved: its deepest existing ancestor must resolve inside.
func outsideWorkspace(word, dir, workspace string) string {
	if workspace == "" {
		workspace = dir
	}
	ws, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return "cannot be checked: workspace: " + err.Error()
	}
	p := filepath.Join(dir, word)
	for {
		if _, err := os.Lstat(p); err == nil {
			break
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "names no existing path"
		}
		p = parent
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "names a path that cannot be resolved: " + err.Error()
	}
	if real != ws && !strings.HasPrefix(real, ws+string(filepath.Separator)) {
		return fmt.Sprintf("names a path outside the workspace (%s)", real)
	}
	return ""
}
