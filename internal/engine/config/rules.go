package config

import (
	"net/netip"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/shellwords"
)

// profileNameRE is the only shape a profile name may have: it becomes part
// of container names, branch names and host paths.
var profileNameRE = regexp.MustCompile(`^[a-z0-9_-]{2,32}$`)

// ValidProfileName checks a profile name (from the file or a --profile flag).
func ValidProfileName(name string) error {
	if !profileNameRE.MatchString(name) {
		return ruleErrf("invalid profile name %s: must match ^[a-z0-9_-]{2,32}$", quoteValue(name))
	}
	if domain.ReservedProfile(name) {
		return ruleErrf("invalid profile name %s: reserved ({data_root}/%s holds the Domain Roots)", quoteValue(name), name)
	}
	return nil
}

// parseCIDR parses one allow_egress entry. A bare address is a single-host
// prefix; host bits are cleared (10.1.2.3/8 is 10.0.0.0/8).
func parseCIDR(s string) (netip.Prefix, error) {
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return p, ruleErrf("invalid CIDR %s: %v", quoteValue(s), stripFuncName(err))
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return p, ruleErrf("invalid CIDR %s: %v", quoteValue(s), stripFuncName(err))
		}
		if a.Zone() != "" {
			return p, ruleErrf("invalid CIDR %s: zones are not allowed", quoteValue(s))
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Addr().Is4In6() {
		return p, ruleErrf("invalid CIDR %s: write IPv4-mapped addresses in IPv4 form", quoteValue(s))
	}
	return p.Masked(), nil
}

// stripFuncName drops the `netip.ParsePrefix("…"): ` prefix, which repeats
// the value the message already shows.
func stripFuncName(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "): "); i >= 0 && strings.HasPrefix(msg, "netip.") {
		return msg[i+3:]
	}
	return msg
}

var dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// checkDomainName validates one allow_domains entry: a lowercase DNS name,
// or "*.suffix" for the suffix's subdomains. Addresses belong in
// allow_egress.
func checkDomainName(s string) error {
	if strings.ContainsFunc(s, isControl) {
		return ruleErrf("invalid domain name %s: control character", quoteValue(s))
	}
	if _, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return ruleErrf("%s is an IP address: put it in allow_egress as a CIDR", quoteValue(s))
	}
	if strings.ToLower(s) != s {
		return ruleErrf("domain name %s must be lowercase", quoteValue(s))
	}
	name := s
	if strings.HasPrefix(s, "*.") {
		name = s[2:]
		if !strings.Contains(name, ".") {
			return ruleErrf("wildcard %s is too broad: name at least two labels after *.", quoteValue(s))
		}
	}
	if len(name) == 0 || len(name) > 253 {
		return ruleErrf("invalid domain name %s: must be 1 to 253 characters", quoteValue(s))
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if !dnsLabelRE.MatchString(l) {
			return ruleErrf("invalid domain name %s: want exact names like api.example.com or *.example.com (labels of a-z, 0-9, '-')", quoteValue(s))
		}
	}
	if tld := labels[len(labels)-1]; strings.Trim(tld, "0123456789") == "" {
		return ruleErrf("invalid domain name %s: numeric top-level label", quoteValue(s))
	}
	return nil
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkEnvName validates an environment variable name. LAZARET_* is
// reserved for the variables lazaret itself injects (session id, keys).
func checkEnvName(name string) error {
	if !envNameRE.MatchString(name) {
		return ruleErrf("invalid environment variable name %s: must match ^[A-Za-z_][A-Za-z0-9_]*$", quoteValue(name))
	}
	if strings.HasPrefix(strings.ToUpper(name), "LAZARET_") {
		return ruleErrf("environment variable %s: the LAZARET_ prefix is reserved", name)
	}
	return nil
}

// resolveEnvValue returns the value of an env entry: "env:VAR" reads VAR
// from the host environment (a missing VAR is an error); anything else is
// the literal value.
func resolveEnvValue(v string, lookup func(string) (string, bool)) (string, error) {
	if strings.ContainsRune(v, 0) {
		return "", ruleErrf("value contains a NUL byte")
	}
	name, ok := strings.CutPrefix(v, "env:")
	if !ok {
		return v, nil
	}
	if !envNameRE.MatchString(name) {
		return "", ruleErrf("%s: invalid host variable name after env:", quoteValue(v))
	}
	val, set := lookup(name)
	if !set {
		return "", &unsetEnvError{ruleErrf("host environment variable %s is not set (value %s)", name, quoteValue(v))}
	}
	if strings.ContainsRune(val, 0) {
		return "", ruleErrf("host environment variable %s contains a NUL byte", name)
	}
	return val, nil
}

// unsetEnvError is an env:VAR whose host variable is not set.
type unsetEnvError struct{ error }

func (e *unsetEnvError) Unwrap() error { return e.error }

// parseMode parses a volume mode: a comma-separated set of ro, rw, z, Z.
// Empty means rw.
func parseMode(mode string) (readOnly bool, options []string, err error) {
	if mode == "" {
		return false, nil, nil
	}
	seen := map[string]bool{}
	for _, m := range strings.Split(mode, ",") {
		switch m {
		case "ro", "rw", "z", "Z":
		default:
			return false, nil, ruleErrf("invalid mode %s: want ro, rw, z, Z or a comma-separated combination", quoteValue(mode))
		}
		if seen[m] {
			return false, nil, ruleErrf("invalid mode %s: %s given twice", quoteValue(mode), m)
		}
		seen[m] = true
	}
	if seen["ro"] && seen["rw"] {
		return false, nil, ruleErrf("invalid mode %s: both ro and rw", quoteValue(mode))
	}
	if seen["z"] && seen["Z"] {
		return false, nil, ruleErrf("invalid mode %s: both z and Z", quoteValue(mode))
	}
	for _, o := range []string{"z", "Z"} {
		if seen[o] {
			options = append(options, o)
		}
	}
	return seen["ro"], options, nil
}

// checkContainerPath validates a path inside the sandbox: absolute, clean,
// not the root, not under lazaret's own /run/lazaret, not /workspace
// itself, not a kernel filesystem, and free of mount-option separators.
func checkContainerPath(p string) error {
	if strings.ContainsRune(p, 0) {
		return securityErrf("container path contains a NUL byte")
	}
	if strings.ContainsFunc(p, isControl) || strings.ContainsAny(p, ",:{}") {
		return ruleErrf("container path %s contains a control character, ',', ':' or a brace", quoteValue(p))
	}
	if !path.IsAbs(p) {
		return ruleErrf("container path %s must be absolute", quoteValue(p))
	}
	if hasDotDot(p) {
		return securityErrf("container path %s contains a '..' segment", quoteValue(p))
	}
	if path.Clean(p) != p {
		return ruleErrf("container path %s is not clean (want %s)", quoteValue(p), quoteValue(path.Clean(p)))
	}
	switch {
	case p == "/":
		return ruleErrf("container path must not be /")
	case within(p, "/run/lazaret"):
		return securityErrf("container path %s is under /run/lazaret, which lazaret owns", quoteValue(p))
	case p == "/workspace":
		return ruleErrf("container path must not be /workspace itself (the Agent Workspace)")
	}
	for _, k := range kernelDirs {
		if within(p, k) {
			return ruleErrf("container path %s is under %s", quoteValue(p), k)
		}
	}
	return nil
}

// persistentExcluded are container trees a State Anchor may not cover:
// kernel filesystems, runtime state, scratch space and the workspace.
var persistentExcluded = []string{"/proc", "/sys", "/dev", "/run", "/tmp", "/workspace"}

// checkPersistentDir validates one persistent_dirs entry on its own.
func checkPersistentDir(p string) error {
	if strings.ContainsRune(p, 0) {
		return securityErrf("contains a NUL byte")
	}
	if strings.ContainsFunc(p, isControl) || strings.ContainsAny(p, ",:{}") {
		return ruleErrf("%s contains a control character, ',', ':' or a brace", quoteValue(p))
	}
	if !path.IsAbs(p) {
		return ruleErrf("%s must be an absolute container path", quoteValue(p))
	}
	if hasDotDot(p) {
		return securityErrf("%s contains a '..' segment", quoteValue(p))
	}
	if path.Clean(p) != p {
		return ruleErrf("%s is not clean (want %s)", quoteValue(p), quoteValue(path.Clean(p)))
	}
	if p == "/" {
		return ruleErrf("/ cannot be persistent (name the directories, e.g. /usr)")
	}
	for _, x := range persistentExcluded {
		if within(p, x) {
			return ruleErrf("%s is under %s, which cannot be persistent", quoteValue(p), x)
		}
	}
	return nil
}

// checkPersistentPair refuses two entries where one contains the other
// (two overlays stacked on the same tree) or whose overlay directory names
// collide (/var/lib and /var_lib both flatten to var_lib).
func checkPersistentPair(a, b string) error {
	if within(a, b) || within(b, a) {
		return ruleErrf("%s and %s overlap: persistent directories must not be nested", quoteValue(a), quoteValue(b))
	}
	if domain.OverlayName(a) == domain.OverlayName(b) {
		return ruleErrf("%s and %s share the overlay name %s", quoteValue(a), quoteValue(b), domain.OverlayName(a))
	}
	return nil
}

// Image reference grammar of the OCI distribution spec (as podman parses
// it). A value that is not a reference, such as "--privileged", must never
// reach podman's argv.
var imageRefRE = func() *regexp.Regexp {
	alnum := `[a-z0-9]+`
	sep := `(?:[._]|__|[-]+)`
	comp := alnum + `(?:` + sep + alnum + `)*`
	dcomp := `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
	host := `(?:` + dcomp + `(?:\.` + dcomp + `)*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?`
	name := `(?:` + host + `/)?` + comp + `(?:/` + comp + `)*`
	tag := `[\w][\w.-]{0,127}`
	digest := `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
	return regexp.MustCompile(`^(` + name + `)(?::(` + tag + `))?(?:@(` + digest + `))?$`)
}()

// checkImage validates an image reference and reports whether it is pinned
// (a tag other than latest, or a digest). Images under localhost/ are built
// here and count as pinned.
func checkImage(ref string) (pinned bool, err error) {
	if strings.ContainsRune(ref, 0) {
		return false, securityErrf("image contains a NUL byte")
	}
	m := imageRefRE.FindStringSubmatch(ref)
	if m == nil || len(m[1]) > 255 {
		return false, ruleErrf("invalid image reference %s", quoteValue(ref))
	}
	name, tag, digest := m[1], m[2], m[3]
	if digest != "" || strings.HasPrefix(name, "localhost/") {
		return true, nil
	}
	return tag != "" && tag != "latest", nil
}

// parseAutoApprove parses one auto_approve entry into its argv: exactly
// the words a request must have, followed by shellwords.ArgsPlaceholder
// when the entry ends with {args} (plain words may then be appended). It
// must be one simple command of literal words, and neither its program
// nor its subcommand may run arbitrary commands (git, shells, env, sudo,
// interpreters, npm exec, go run...).
func parseAutoApprove(s string) ([]string, error) {
	if strings.ContainsRune(s, 0) {
		return nil, securityErrf("contains a NUL byte")
	}
	if shellwords.HasMeta(s) {
		return nil, ruleErrf("%s contains shell metacharacters or control characters; write a plain command", quoteValue(s))
	}
	fixed, args, err := shellwords.ParseEntry(s)
	if err != nil {
		return nil, ruleErrf("%s: %v", quoteValue(s), err)
	}
	if reason := shellwords.BannedEntryReason(fixed); reason != "" {
		return nil, ruleErrf("%s can never be auto-approved: %s", quoteValue(s), reason)
	}
	if reason := shellwords.OpenSubcommandReason(fixed, args); reason != "" {
		return nil, ruleErrf("%s: %s", quoteValue(s), reason)
	}
	if args {
		fixed = append(fixed, shellwords.ArgsPlaceholder)
	}
	return fixed, nil
}

// runnerInputs names, per script runner, what in the workspace decides
// what it runs.
var runnerInputs = map[string]string{
	"make": "Makefile", "gmake": "Makefile", "bmake": "Makefile", "npm": "package.json (scripts)",
	"yarn": "package.json (scripts)", "pnpm": "package.json (scripts)", "cargo": "Cargo.toml, build.rs and macros",
	"go": "go.mod, //go:generate lines, cgo and test code", "pytest": "conftest.py and tests", "py.test": "conftest.py and tests",
	"tox": "tox.ini", "nox": "noxfile.py", "gradle": "build.gradle", "gradlew": "gradlew and build.gradle",
	"mvn": "pom.xml (plugins)", "mvnw": "mvnw and pom.xml", "rake": "Rakefile", "just": "justfile", "bundle": "Gemfile",
	"composer": "composer.json (scripts)", "ant": "build.xml", "ninja": "build.ninja", "cmake": "CMakeLists.txt",
	"meson": "meson.build", "bazel": "BUILD and .bazelrc", "bazelisk": "BUILD and .bazelrc", "sbt": "build.sbt",
	"lein": "project.clj", "mix": "mix.exs", "dotnet": "the project files (MSBuild tasks)", "swift": "Package.swift",
	"cabal": "the .cabal file (Setup.hs)", "stack": "stack.yaml", "task": "Taskfile.yml", "rebar3": "rebar.config",
	"scons": "SConstruct", "ctest": "CTestTestfile.cmake", "phpunit": "phpunit.xml and tests", "jest": "jest.config.js",
	"vitest": "vitest.config", "eslint": "eslint.config.js", "prettier": "prettier.config.js", "rubocop": ".rubocop.yml (require:)",
	"pylint": ".pylintrc (load-plugins)", "mypy": "mypy.ini (plugins)", "pre-commit": ".pre-commit-config.yaml",
	"golangci-lint": ".golangci.yml", "poetry": "pyproject.toml", "hatch": "pyproject.toml", "pdm": "pyproject.toml",
}

// scriptRunner returns the workspace files that decide what an entry runs,
// or "" when its program is not a known script runner. A relative program
// path (./scripts/lint) is itself a file of the workspace.
func scriptRunner(argv []string) string {
	if !filepath.IsAbs(argv[0]) && strings.Contains(argv[0], "/") {
		return "script " + argv[0]
	}
	base := filepath.Base(argv[0])
	if base == "go" && len(argv) > 1 && slices.Contains([]string{"fmt", "version", "doc", "help"}, argv[1]) {
		return ""
	}
	return runnerInputs[base]
}
