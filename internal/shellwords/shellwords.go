// Package shellwords splits a command string into an argument vector the way
// a POSIX shell would, without performing any expansion, and tells which
// commands must never be approved automatically.
package shellwords

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// metaChars are the characters that make a command string more than one
// simple command: chaining, substitution, redirection, escapes, line breaks.
const metaChars = ";|&$`><\\\n\r"

// HasMeta reports whether s contains a shell metacharacter or any control
// character. Such a string is never auto-approved.
func HasMeta(s string) bool {
	for _, r := range s {
		if strings.ContainsRune(metaChars, r) || r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return true
		}
	}
	return false
}

// ErrNotSimple is returned when a string is not one simple command made of
// literal and quoted words.
var ErrNotSimple = errors.New("not a single simple command of literal words")

// Split parses s as one POSIX simple command and returns its words with
// quotes removed. Anything that a shell would expand or interpret (variables,
// substitutions, redirections, several commands, assignments) is an error:
// the caller shows such a command to a human instead.
func Split(s string) ([]string, error) {
	if strings.ContainsRune(s, 0) {
		return nil, fmt.Errorf("%w: NUL byte", ErrNotSimple)
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(s), "")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotSimple, err)
	}
	if len(f.Stmts) != 1 {
		return nil, fmt.Errorf("%w: want exactly one command, got %d", ErrNotSimple, len(f.Stmts))
	}
	st := f.Stmts[0]
	if st.Negated || st.Background || st.Coprocess || len(st.Redirs) > 0 || st.Disown {
		return nil, fmt.Errorf("%w: operators or redirections", ErrNotSimple)
	}
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Assigns) > 0 || len(call.Args) == 0 {
		return nil, fmt.Errorf("%w: not a plain command", ErrNotSimple)
	}
	argv := make([]string, 0, len(call.Args))
	for _, w := range call.Args {
		word, err := literalWord(w)
		if err != nil {
			return nil, err
		}
		argv = append(argv, word)
	}
	return argv, nil
}

func literalWord(w *syntax.Word) (string, error) {
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			b.WriteString(unescapeUnquoted(p.Value))
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", fmt.Errorf("%w: $'...' quoting", ErrNotSimple)
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", fmt.Errorf("%w: $\"...\" quoting", ErrNotSimple)
			}
			for _, inner := range p.Parts {
				lit, ok := inner.(*syntax.Lit)
				if !ok {
					return "", fmt.Errorf("%w: expansion inside double quotes", ErrNotSimple)
				}
				b.WriteString(unescapeDouble(lit.Value))
			}
		default:
			return "", fmt.Errorf("%w: %T", ErrNotSimple, part)
		}
	}
	return b.String(), nil
}

// unescapeUnquoted removes the backslashes of an unquoted literal: "\x" is
// "x", and a backslash-newline disappears.
func unescapeUnquoted(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unescapeDouble handles backslashes inside double quotes, where only
// $ ` " \ and newline are escapable.
func unescapeDouble(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// bannedExact are executables that can run an arbitrary command chosen by
// their arguments, configuration or input; they can never be auto-approved.
var bannedExact = map[string]string{
	"git": "git runs hooks, aliases, pagers and filters from repository config",
	"env": "env runs any command", "sudo": "sudo runs any command as root",
	"su": "su runs a shell", "doas": "doas runs any command", "pkexec": "pkexec runs any command",
	"xargs": "xargs runs any command", "find": "find -exec runs any command",
	"nice": "nice runs any command", "nohup": "nohup runs any command",
	"timeout": "timeout runs any command", "time": "time runs any command",
	"setsid": "setsid runs any command", "stdbuf": "stdbuf runs any command",
	"chroot": "chroot runs any command", "unshare": "unshare runs any command",
	"nsenter": "nsenter runs any command", "flock": "flock runs any command",
	"watch": "watch runs any command", "script": "script runs a shell",
	"strace": "strace runs any command", "ltrace": "ltrace runs any command",
	"gdb": "gdb runs any command", "busybox": "busybox contains a shell",
	"ssh": "ssh runs remote and local commands", "parallel": "parallel runs any command",
	"exec": "exec replaces the process with any command", "eval": "eval runs any string",
	"command": "command runs any command", "builtin": "builtin runs shell builtins",
	"npx": "npx downloads and runs any package", "awk": "awk can run commands with system()",
	"gawk": "gawk can run commands with system()", "mawk": "mawk can run commands with system()",
	"sed": "GNU sed can run commands with the e command", "vi": "vi can run a shell",
	"vim": "vim can run a shell", "nvim": "nvim can run a shell", "emacs": "emacs can run a shell",
	"less": "less can run a shell", "more": "more can run a shell", "man": "man runs a pager",
	"tar": "tar --to-command runs any command", "rsync": "rsync -e runs any command",
}

// bannedPattern catches shells and interpreters with version suffixes
// (python3.11, perl5.36, bash5).
var bannedPattern = regexp.MustCompile(`^(sh|bash|dash|zsh|ksh|mksh|fish|csh|tcsh|ash|python|pypy|perl|ruby|irb|node|nodejs|deno|bun|php|lua|luajit|tclsh|wish|expect|osascript|pwsh|powershell|Rscript|julia|guile|racket|java|jshell|groovy|scala|elixir|erl|escript)[0-9.]*(-[0-9.]+)?$`)

// BannedReason returns why the executable named by argv0 may never be
// auto-approved, or "" when it may. Only the base name counts, so /usr/bin/git
// and git are the same.
func BannedReason(argv0 string) string {
	base := filepath.Base(argv0)
	if r, ok := bannedExact[base]; ok && r != "" {
		return r
	}
	if bannedPattern.MatchString(base) {
		return base + " is a shell or interpreter that runs any code"
	}
	return ""
}
