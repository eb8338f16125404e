package shellwords

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// ArgsPlaceholder, as the last word of an auto_approve entry, admits zero
// or more appended plain words (see PlainWordReason). Without it an entry
// approves exactly its own argv.
const ArgsPlaceholder = "{args}"

// ParseEntry splits an auto_approve entry into its fixed words and whether
// it ends with ArgsPlaceholder. Any other word in braces is an error, so a
// typo such as "{arg}" or "{args...}" is not taken as a literal word.
func ParseEntry(s string) (fixed []string, args bool, err error) {
	if HasMeta(s) {
		return nil, false, fmt.Errorf("%w: shell metacharacters or control characters", ErrNotSimple)
	}
	words, err := Split(s)
	if err != nil {
		return nil, false, err
	}
	for i, w := range words {
		if !strings.HasPrefix(w, "{") && !strings.HasSuffix(w, "}") {
			continue
		}
		switch {
		case w != ArgsPlaceholder:
			return nil, false, fmt.Errorf("%w: unknown placeholder %q (the only one is %s, as the last word)", ErrBadEntry, w, ArgsPlaceholder)
		case i != len(words)-1:
			return nil, false, fmt.Errorf("%w: %s must be the last word", ErrBadEntry, ArgsPlaceholder)
		case i == 0:
			return nil, false, fmt.Errorf("%w: %s needs a command before it", ErrBadEntry, ArgsPlaceholder)
		}
		args = true
	}
	if args {
		words = words[:len(words)-1]
	}
	return words, args, nil
}

// ErrBadEntry is wrapped by ParseEntry for a misplaced or unknown
// placeholder.
var ErrBadEntry = fmt.Errorf("bad auto_approve entry")

// plainChars is the whole alphabet of an appended word: enough for
// targets, test names, package paths and relative file names, nothing a
// tool reads as syntax of its own (=, quotes, globs, ~, braces, spaces,
// non-ASCII look-alikes).
var plainChars = regexp.MustCompile(`^[A-Za-z0-9._/:@%+,-]+$`)

// assignment is a word a tool may read as NAME=value (make, env-like
// tools, npm config): a plausible name before the first "=".
var assignment = regexp.MustCompile(`^[^=/\s]+=`)

// PlainWordReason returns why w may not be appended after an entry's fixed
// words, or "" when it is a plain word: ASCII letters, digits and
// . _ / : @ % + , - only, not starting with - or + (an option: -x, --x,
// +toolchain), not an assignment, no absolute path, no ~, no ".."
// component. Whether the path it names stays in the workspace is checked
// by the caller, which knows the directory.
func PlainWordReason(w string) string {
	switch {
	case w == "":
		return "an empty word"
	case strings.HasPrefix(w, "-") || strings.HasPrefix(w, "+"):
		return "an option (begins with '" + w[:1] + "')"
	case assignment.MatchString(w):
		return "an assignment (NAME=value)"
	case !plainChars.MatchString(w):
		return "a character outside [A-Za-z0-9._/:@%+,-]"
	case strings.HasPrefix(w, "/"):
		return "an absolute path"
	case w == ".." || strings.HasPrefix(w, "../") || strings.HasSuffix(w, "/..") || strings.Contains(w, "/../"):
		return "a '..' path component"
	}
	return ""
}

// OpenSubcommandReason refuses an entry whose {args} would choose the
// subcommand of a tool with dangerous ones ("npm {args}" admits
// `npm isntall x`, an alias of install): the entry must name it.
func OpenSubcommandReason(fixed []string, args bool) string {
	if !args || len(fixed) == 0 {
		return ""
	}
	tool := filepath.Base(fixed[0])
	if _, ok := bannedSub[tool]; !ok {
		return ""
	}
	for _, w := range fixed[1:] {
		if !strings.HasPrefix(w, "-") && !strings.HasPrefix(w, "+") {
			return ""
		}
	}
	return fmt.Sprintf("%s would let the agent choose the %s subcommand (some download or run any code): name the subcommand, e.g. %q", ArgsPlaceholder, tool, tool+" test "+ArgsPlaceholder)
}
