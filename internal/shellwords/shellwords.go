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

// Reasons shared by many banned names.
const (
	runsAny     = "runs any command given in its arguments"
	runsShell   = "can start a shell or run commands"
	writesAny   = "writes any file its arguments name"
	runsPackage = "downloads and runs any package"
	runsConfig  = "runs commands from its own configuration or arguments"
	containers  = "controls containers, which can mount the host"
	pkgManager  = "installs packages, which run maintainer scripts as root"
)

// bannedExact are executables that can run an arbitrary command chosen by
// their arguments, configuration or input, or write any file; they can
// never be auto-approved, whatever their arguments.
var bannedExact = map[string]string{
	"git": "git runs hooks, aliases, pagers and filters from repository config",
	"env": runsAny, "sudo": "sudo runs any command as root", "su": "su runs a shell",
	"doas": runsAny, "pkexec": runsAny, "runuser": runsAny, "setpriv": runsAny, "capsh": runsAny,
	"run0": runsAny, "systemd-run": runsAny, "machinectl": runsAny,
	"xargs": runsAny, "find": "find -exec runs any command", "parallel": runsAny,
	"nice": runsAny, "ionice": runsAny, "chrt": runsAny, "taskset": runsAny, "numactl": runsAny,
	"prlimit": runsAny, "nohup": runsAny, "timeout": runsAny, "time": runsAny, "setsid": runsAny,
	"stdbuf": runsAny, "chroot": runsAny, "unshare": runsAny, "nsenter": runsAny, "flock": runsAny,
	"watch": runsAny, "script": "script runs a shell", "expect": runsAny, "unbuffer": runsAny,
	"strace": runsAny, "ltrace": runsAny, "gdb": runsAny, "lldb": runsAny, "valgrind": runsAny,
	"perf": runsAny, "rr": runsAny, "catchsegv": runsAny, "fakeroot": runsAny, "fakechroot": runsAny,
	"proot": runsAny, "bwrap": runsAny, "firejail": runsAny, "dbus-run-session": runsAny,
	"xvfb-run": runsAny, "ssh-agent": runsAny, "chpst": runsAny, "torsocks": runsAny,
	"proxychains": runsAny, "proxychains4": runsAny, "at": runsAny, "batch": runsAny,
	"crontab": runsAny, "busybox": "busybox contains a shell", "toybox": "toybox contains a shell",
	"ssh": "ssh runs remote and local commands (ProxyCommand, -o)", "scp": "scp -S runs any program",
	"sftp": "sftp -S runs any program", "rsync": "rsync -e runs any command",
	"socat": "socat EXEC: runs any command", "nc": "nc -e runs any command",
	"ncat": "ncat -e runs any command", "netcat": "netcat -e runs any command",
	"exec": "exec replaces the process with any command", "eval": "eval runs any string",
	"command": runsAny, "builtin": "builtin runs shell builtins", "source": "source runs a script",
	"npx": runsPackage, "pnpx": runsPackage, "bunx": runsPackage, "uvx": runsPackage,
	"pipx": runsPackage, "corepack": runsPackage,
	"awk": "awk can run commands with system()", "gawk": "gawk can run commands with system()",
	"mawk": "mawk can run commands with system()", "nawk": "nawk can run commands with system()",
	"sed": "GNU sed can run commands with the e command and write files with w",
	"vi":  runsShell, "vim": runsShell, "nvim": runsShell, "view": runsShell, "ex": runsShell,
	"emacs": runsShell, "nano": runsShell, "ed": runsShell, "pico": runsShell, "joe": runsShell,
	"less": runsShell, "more": runsShell, "most": runsShell, "pg": runsShell, "man": "man runs a pager",
	"info": runsShell, "journalctl": "journalctl runs a pager", "systemctl": "systemctl runs a pager and controls services",
	"tar": "tar --to-command and --checkpoint-action run any command", "zip": "zip -TT runs any command",
	"cpio": writesAny, "7z": writesAny, "make-shell": runsShell,
	"tee": writesAny, "dd": writesAny, "cp": writesAny, "mv": writesAny, "install": writesAny,
	"ln": writesAny, "rm": "rm deletes any file its arguments name", "chmod": "chmod changes any file's mode",
	"chown": "chown changes any file's owner", "truncate": writesAny, "shred": writesAny,
	"curl": "curl writes files (-o) and reads a config of options (-K)", "wget": "wget writes files and reads a config (-e, --config)",
	"docker": containers, "podman": containers, "nerdctl": containers, "buildah": containers,
	"kubectl": containers, "lima": containers, "limactl": containers, "vagrant": containers,
	"lazaret": "lazaret controls sandboxes and their escalation", "runsc": containers, "crun": containers, "runc": containers,
	"dpkg": pkgManager, "apt": pkgManager, "apt-get": pkgManager, "aptitude": pkgManager, "rpm": pkgManager,
	"yum": pkgManager, "dnf": pkgManager, "zypper": pkgManager, "pacman": pkgManager, "apk": pkgManager,
	"snap": pkgManager, "flatpak": pkgManager, "brew": pkgManager, "nix": runsPackage, "nix-shell": runsAny,
	"guix": runsPackage, "opam": runsPackage,
	"openssl": "openssl loads engines and providers named in its arguments or config",
	"ld.so":   runsAny, "ld-linux.so.2": runsAny, "ld-linux-x86-64.so.2": runsAny, "ld-linux-aarch64.so.1": runsAny,
	"gcc": runsConfig, "cc": runsConfig, "clang": runsConfig, "c++": runsConfig, "g++": runsConfig,
	"vim.basic": runsShell, "vim.tiny": runsShell, "sensible-editor": runsShell, "editor": runsShell,
	"pager": runsShell, "sensible-pager": runsShell, "x-terminal-emulator": runsAny, "tmux": runsShell,
	"screen": runsShell,
}

// bannedPattern catches shells and interpreters with version suffixes
// (python3.11, perl5.36, bash5), and the git-* and lazaret-* helpers.
var bannedPattern = regexp.MustCompile(`^(sh|bash|rbash|dash|zsh|ksh|ksh93|mksh|pdksh|oksh|yash|posh|fish|csh|tcsh|ash|rc|es|xonsh|nu|elvish|python|pypy|ipython|perl|cperl|ruby|irb|jruby|node|nodejs|deno|bun|php|php-cgi|lua|luajit|texlua|tclsh|wish|osascript|pwsh|powershell|Rscript|R|julia|guile|racket|sbcl|clisp|ecl|java|jshell|groovy|scala|kotlin|elixir|iex|erl|escript|swipl|gforth|ocaml|ghci|runghc|runhaskell|gjs|qjs|rhino|jjs|awk|gawk|mawk|busybox|vim|nvim|emacs|gdb|python-config)[0-9.]*(-[0-9.]+)?$|^(git|lazaret|dpkg|apt|docker|podman|kubectl|gcc|g\+\+|clang|clang\+\+)-`)

// bannedSub are subcommands that download or run code their arguments
// name (npm exec, go run, pip install), refused even though their tool's
// other subcommands may be auto-approved.
var bannedSub = map[string]map[string]string{
	"npm":      {"exec": runsPackage, "x": runsPackage, "install": runsPackage, "i": runsPackage, "add": runsPackage, "dlx": runsPackage, "explore": runsShell, "edit": runsShell, "config": "npm config can set script-shell"},
	"yarn":     {"dlx": runsPackage, "exec": runsAny, "add": runsPackage, "node": runsAny, "config": "yarn config can set a shell"},
	"pnpm":     {"dlx": runsPackage, "exec": runsAny, "add": runsPackage, "create": runsPackage, "config": "pnpm config can set script-shell"},
	"go":       {"run": "go run builds and runs any package, downloading it if named with @version", "tool": "go tool runs tools named in go.mod or its arguments", "env": "go env -w changes the toolchain and GOFLAGS for later commands"},
	"cargo":    {"install": runsPackage, "run": "cargo run runs any binary target", "exec": runsAny},
	"pip":      {"install": runsPackage, "download": runsPackage, "wheel": runsPackage},
	"pip3":     {"install": runsPackage, "download": runsPackage, "wheel": runsPackage},
	"uv":       {"run": runsAny, "tool": runsPackage, "pip": runsPackage, "add": runsPackage},
	"gem":      {"install": runsPackage, "exec": runsPackage},
	"bundle":   {"exec": runsAny},
	"poetry":   {"run": runsAny, "add": runsPackage},
	"composer": {"exec": runsAny, "require": runsPackage, "global": runsPackage, "run-script": runsAny},
	"dotnet":   {"tool": runsPackage, "exec": runsAny},
}

// BannedReason returns why the executable named by argv0 may never be
// auto-approved, or "" when it may. Only the base name counts, so /usr/bin/git
// and git are the same.
func BannedReason(argv0 string) string {
	base := filepath.Base(argv0)
	if r, ok := bannedExact[base]; ok && r != "" {
		if strings.Contains(r, base) {
			return r
		}
		return base + " " + r
	}
	if bannedPattern.MatchString(base) {
		return base + " is a shell or interpreter (or a tool that runs any command) that runs any code"
	}
	return ""
}

// BannedEntryReason is BannedReason for argv[0] plus the subcommands that
// run or download code their arguments name (npm exec, go run): the first
// word after argv[0] that is not an option is the subcommand.
func BannedEntryReason(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	if r := BannedReason(argv[0]); r != "" {
		return r
	}
	subs := bannedSub[filepath.Base(argv[0])]
	for _, w := range argv[1:] {
		if strings.HasPrefix(w, "-") || strings.HasPrefix(w, "+") {
			continue
		}
		if r, ok := subs[w]; ok {
			if strings.Contains(r, " "+w+" ") {
				return r
			}
			return filepath.Base(argv[0]) + " " + w + " " + r
		}
		break
	}
	return ""
}
