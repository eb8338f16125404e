package review

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/visible"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// View is where the output of a review command (diff, log) goes. Git runs
// with --color=never in every view: the text is the agent's (file
// contents, file names, commit messages, author names, ref names), and no
// escape sequence of it may reach a terminal — an SGR "conceal" or black
// on black hides `curl … | sh` as well as any cursor movement does. Colour
// comes only from lazaret, added after the text is escaped.
type View int

const (
	// ViewPipe is for output that is not a terminal. Text is escaped by
	// the rule of visible.Text; a patch keeps its content lines (' ', '+',
	// '-' inside a hunk) byte for byte so that `lazaret diff >
	// x.patch` still applies, while its other lines (headers, the text
	// after a hunk's @@) are escaped. File names in headers are quoted by
	// git itself (core.quotePath=true: controls and non-ASCII as octal).
	ViewPipe View = iota
	// ViewTerminal escapes every line, the patch content too, and colours
	// the lines by their kind.
	ViewTerminal
	// ViewTerminalPlain is ViewTerminal without colour (NO_COLOR).
	ViewTerminalPlain
)

// Kinds of git output a view renders.
type outputKind int

const (
	kindText    outputKind = iota // escaped, no structure (--stat, git's stderr)
	kindPatch                     // git diff
	kindLog                       // git log --pretty=medium
	kindOneline                   // git log --oneline
)

// lazaret's own colours: the only escape sequences review output holds.
const (
	sgrReset  = "\x1b[m"
	sgrHeader = "\x1b[1m"
	sgrHunk   = "\x1b[36m"
	sgrAdd    = "\x1b[32m"
	sgrDel    = "\x1b[31m"
	sgrCommit = "\x1b[33m"
)

// lineClass is what a line of git output is.
type lineClass int

const (
	classText lineClass = iota
	classHeader
	classHunk
	classContext
	classAdd
	classDel
	classNoEOL // "\ No newline at end of file"
	classCommit
)

// maxLine bounds what a renderer holds of one line; a longer line is
// rendered in pieces (its class decided by its start).
const maxRenderLine = 64 << 10

// renderer renders git output line by line for a view.
type renderer struct {
	w    io.Writer
	view View
	kind outputKind

	buf   []byte    // the current line so far, without its newline
	cont  bool      // buf continues a line whose start was already written
	class lineClass // class of the current line once its start is written
	// Lines still to come in the current hunk, old and new side.
	oldLeft, newLeft int
	out              []byte
}

func newRenderer(w io.Writer, view View, kind outputKind) *renderer {
	return &renderer{w: w, view: view, kind: kind}
}

// Write implements io.Writer.
func (r *renderer) Write(p []byte) (int, error) {
	r.buf = append(r.buf, p...)
	r.out = r.out[:0]
	for {
		i := bytes.IndexByte(r.buf, '\n')
		if i < 0 {
			break
		}
		r.line(r.buf[:i], true)
		r.buf = r.buf[i+1:]
	}
	if len(r.buf) > maxRenderLine {
		cut := utf8Cut(r.buf)
		r.line(r.buf[:cut], false)
		r.buf = r.buf[cut:]
	}
	r.buf = append([]byte(nil), r.buf...)
	if _, err := r.w.Write(r.out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close renders a last line without a newline, and ends its colour.
func (r *renderer) Close() error {
	r.out = r.out[:0]
	if len(r.buf) > 0 {
		r.line(r.buf, false)
		r.buf = nil
	}
	if r.cont && r.view == ViewTerminal && r.sgr() != "" {
		r.out = append(r.out, sgrReset...)
	}
	r.cont = false
	if len(r.out) == 0 {
		return nil
	}
	_, err := r.w.Write(r.out)
	return err
}

// utf8Cut is the length of the longest prefix of b that does not end in
// the middle of a UTF-8 sequence.
func utf8Cut(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return len(b)
			}
			return i
		}
	}
	return len(b)
}

// line renders one line, or a piece of one (complete is false).
func (r *renderer) line(b []byte, complete bool) {
	start := !r.cont
	if start {
		r.class = r.classify(b)
	}
	color := r.view == ViewTerminal
	if start && color {
		r.out = append(r.out, r.sgr()...)
	}
	r.out = r.body(r.out, b, start)
	r.cont = !complete
	if complete {
		if color && r.sgr() != "" && !bytes.HasSuffix(r.out, []byte(sgrReset)) {
			r.out = append(r.out, sgrReset...)
		}
		r.out = append(r.out, '\n')
	}
}

func (r *renderer) sgr() string {
	switch r.class {
	case classHeader:
		return sgrHeader
	case classHunk:
		return sgrHunk
	case classAdd:
		return sgrAdd
	case classDel:
		return sgrDel
	case classCommit:
		return sgrCommit
	}
	return ""
}

// body appends the text of b for the view.
func (r *renderer) body(dst, b []byte, start bool) []byte {
	if r.view != ViewPipe {
		if start && r.class == classHunk && r.view == ViewTerminal {
			// Colour the @@ … @@ range only; the function context after
			// it is the agent's text.
			n := hunkRangeLen(b)
			dst = append(append(dst, b[:n]...), sgrReset...)
			return visible.AppendText(dst, b[n:])
		}
		if start && r.class == classCommit {
			// The hash: the first word, or the second after "commit".
			skip := 0
			if r.kind == kindLog {
				skip = len("commit ")
			}
			n := len(b)
			if i := bytes.IndexByte(b[skip:], ' '); i >= 0 {
				n = skip + i
			}
			dst = visible.AppendText(dst, b[:n])
			if r.view == ViewTerminal {
				dst = append(dst, sgrReset...)
			}
			return visible.AppendText(dst, b[n:])
		}
		return visible.AppendText(dst, b)
	}
	switch r.class {
	case classContext, classAdd, classDel:
		return append(dst, b...)
	case classHunk:
		if start {
			n := hunkRangeLen(b)
			return visible.AppendText(append(dst, b[:n]...), b[n:])
		}
	}
	return visible.AppendText(dst, b)
}

// classify decides the class of a line from its start and keeps count of
// the lines left in the current hunk. A line that does not fit where it
// is (a malformed count, a stream from the agent's own git) ends the hunk
// and is a header: it is escaped in every view.
func (r *renderer) classify(b []byte) lineClass {
	switch r.kind {
	case kindText:
		return classText
	case kindLog:
		if bytes.HasPrefix(b, []byte("commit ")) {
			return classCommit
		}
		return classText
	case kindOneline:
		return classCommit
	}
	if r.oldLeft > 0 || r.newLeft > 0 {
		c := byte(' ')
		if len(b) > 0 {
			c = b[0]
		}
		switch {
		case c == ' ' && r.oldLeft > 0 && r.newLeft > 0:
			r.oldLeft--
			r.newLeft--
			return classContext
		case c == '-' && r.oldLeft > 0:
			r.oldLeft--
			return classDel
		case c == '+' && r.newLeft > 0:
			r.newLeft--
			return classAdd
		case c == '\\':
			return classNoEOL
		}
		r.oldLeft, r.newLeft = 0, 0
	}
	if old, new, ok := parseHunk(b); ok {
		r.oldLeft, r.newLeft = old, new
		return classHunk
	}
	return classHeader
}

// hunkRangeLen is the length of the "@@ -a,b +c,d @@" part of a hunk
// header line.
func hunkRangeLen(b []byte) int {
	if i := bytes.Index(b[min(2, len(b)):], []byte("@@")); i >= 0 {
		return i + 4
	}
	return len(b)
}

// parseHunk reads a hunk header "@@ -a[,b] +c[,d] @@[ context]" and
// returns the line counts b and d (1 when omitted).
func parseHunk(b []byte) (old, new int, ok bool) {
	rest, found := bytes.CutPrefix(b, []byte("@@ -"))
	if !found {
		return 0, 0, false
	}
	old, rest, ok = hunkRange(rest)
	if !ok {
		return 0, 0, false
	}
	rest, found = bytes.CutPrefix(rest, []byte(" +"))
	if !found {
		return 0, 0, false
	}
	new, rest, ok = hunkRange(rest)
	if !ok || !bytes.HasPrefix(rest, []byte(" @@")) {
		return 0, 0, false
	}
	return old, new, true
}

// hunkRange reads "a[,b]" and returns b.
func hunkRange(b []byte) (count int, rest []byte, ok bool) {
	end := 0
	for end < len(b) && (b[end] >= '0' && b[end] <= '9' || b[end] == ',') {
		end++
	}
	start, cnt, hasCount := bytes.Cut(b[:end], []byte(","))
	if _, err := strconv.ParseUint(string(start), 10, 31); err != nil {
		return 0, nil, false
	}
	count = 1
	if hasCount {
		n, err := strconv.ParseUint(string(cnt), 10, 31)
		if err != nil {
			return 0, nil, false
		}
		count = int(n)
	}
	return count, b[end:], true
}

// errorWriter shows git's stderr: its messages quote ref and file names.
type errorWriter struct{ *visible.Writer }

func (e errorWriter) Close() error { return e.Flush() }

// viewStreams wraps out and errOut for a git command whose output is of
// kind; close flushes both.
func viewStreams(out, errOut io.Writer, view View, kind outputKind) (o, e io.Writer, close func() error) {
	r := newRenderer(out, view, kind)
	ew := errorWriter{visible.NewWriter(errOut)}
	return r, ew, func() error {
		err := r.Close()
		if ferr := ew.Close(); err == nil {
			err = ferr
		}
		return err
	}
}

// diffView is the git diff of a review (hostgit.DiffView): in a pipe,
// binary changes as a binary patch so the patch applies whole.
func diffView(view View, stat bool) hostgit.DiffView {
	return hostgit.DiffView{Stat: stat, Binary: view == ViewPipe}
}

// logKind is the kind of a review's git log output (hostgit.LogView).
func logKind(oneline bool) outputKind {
	if oneline {
		return kindOneline
	}
	return kindLog
}

// UncommittedDiff runs `git diff` in the sandbox (the agent's uncommitted
// changes, which exist only in its clone) and shows the output in view.
// It is the agent's git printing the agent's files: every byte of it,
// stderr too, is the agent's, so it goes through the same renderer as the
// host's diff, which trusts nothing of its layout.
// In a sandbox that has the session holder (the escalation client is
// mounted) it runs under it in namespaces of its own
// (escprompt.IsolatedCommand): the image's git is the agent's to replace,
// and must not run where every session's processes are visible.
func UncommittedDiff(ctx context.Context, pc *podman.Client, container string, out, errOut io.Writer, stat bool, view View) error {
	info, err := pc.InspectContainer(ctx, container)
	if err != nil {
		return err
	}
	isolated := info.HasMount(escprompt.SandboxClient)
	argv := hostgit.WorkTreeDiffCommand(domain.SandboxWorkspace, diffView(view, stat))
	kind := kindPatch
	if stat {
		kind = kindText
	}
	o := podman.ExecOptions{Container: container, Command: argv}
	if isolated {
		o.Command, o.Privileged = escprompt.IsolatedCommand(argv), true
	}
	cmd, err := pc.ExecCmd(ctx, o)
	if err != nil {
		return err
	}
	var closeStreams func() error
	cmd.Stdout, cmd.Stderr, closeStreams = viewStreams(out, errOut, view, kind)
	err = cmd.Run()
	if cerr := closeStreams(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("git diff in the sandbox %s: %w", container, err)
	}
	return nil
}
