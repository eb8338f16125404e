package hostgit

import (
	"context"
	"io"
)

// The review's diff and log, streamed to the caller's renderer.

// DiffView is a review's diff: no colour (the view adds it), no external
// diff or textconv program, file names quoted in C style with non-ASCII
// bytes as octal (a header line is then plain ASCII).
type DiffView struct {
	// Stat shows a diffstat instead of the patch.
	Stat bool
	// Binary writes binary changes as a binary patch, so the patch applies
	// whole (when the output goes to a pipe); not with Stat.
	Binary bool
}

func (o DiffView) args() []string {
	args := append([]string{"-c", "core.quotePath=true", "diff", "--color=never"}, noDriverArgs...)
	if o.Stat {
		return append(args, "--stat")
	}
	if o.Binary {
		args = append(args, "--binary")
	}
	return args
}

// StreamDiff runs the diff o of base..tip in the working tree dir, its
// output to stdout and stderr.
func (g *Git) StreamDiff(ctx context.Context, dir string, stdout, stderr io.Writer, o DiffView, base, tip string) error {
	return g.stream(ctx, dir, stdout, stderr, append(o.args(), base, tip, "--")...)
}

// WorkTreeDiffCommand is the argv of the diff o of the working tree dir
// against HEAD for a git that is not the host's (the sandbox's own, run
// through podman exec): none of the host's hardening or environment
// applies there, and none is needed for the sandbox's own files.
func WorkTreeDiffCommand(dir string, o DiffView) []string {
	argv := []string{"git", "-C", dir, "--no-pager"}
	argv = append(argv, o.args()...)
	return append(argv, "HEAD")
}

// LogView is a review's log, in git's own formats (which indent every line
// of a message, so no message line can pose as a commit header).
type LogView struct {
	// Oneline is --oneline; --pretty=medium otherwise.
	Oneline bool
}

// StreamLog runs the log o of the commits reachable from tip and not from
// not (none when not is empty) in the working tree dir, its output to
// stdout and stderr.
func (g *Git) StreamLog(ctx context.Context, dir string, stdout, stderr io.Writer, o LogView, tip, not string) error {
	args := append([]string{"-c", "core.quotePath=true", "log", "--color=never", "--decorate=short", "--no-show-signature"}, noDriverArgs...)
	if o.Oneline {
		args = append(args, "--oneline")
	} else {
		args = append(args, "--pretty=medium")
	}
	args = append(args, tip)
	if not != "" {
		args = append(args, "--not", not)
	}
	return g.stream(ctx, dir, stdout, stderr, append(args, "--")...)
}

// DiffRaw is the `diff --raw -z` of base..tip in dir, without renames and
// with full object names.
func (g *Git) DiffRaw(ctx context.Context, dir, base, tip string) ([]byte, error) {
	args := append([]string{"diff", "--raw", "-z", "--no-renames", "--no-abbrev"}, noDriverArgs...)
	return g.output(ctx, dir, nil, append(args, base, tip, "--")...)
}
