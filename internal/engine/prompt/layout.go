package prompt

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/lazaret-dev/lazaret/internal/shellwords"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// The smallest terminal the prompt works in; below it A is refused.
const (
	minWidth  = 40
	minHeight = 12
	// Until the terminal reports its size, assume the classic one.
	defaultWidth, defaultHeight = 80, 24
)

// bodyLine is one screen line of the scrollable part; word is the argv
// index it shows, or -1.
type bodyLine struct {
	text string
	word int
}

// screen is one rendering: the pinned top (title, session, host
// directory, executable), the scrollable body, and the pinned bottom
// (position, key legend, note, editor). Pinned lines are cut to the width
// and everything they cut is in the body too, so the body is the whole
// request and the legend and the directory never leave the screen.
type screen struct {
	top, bottom   []string
	body          []bodyLine
	offset, rows  int
	width, height int
	small         bool
}

func (s *screen) window() []string {
	out := make([]string, 0, s.rows)
	for i := s.offset; i < s.offset+s.rows; i++ {
		if i < len(s.body) {
			out = append(out, s.body[i].text)
		} else {
			out = append(out, "")
		}
	}
	return out
}

func (m *Model) size() (w, h int) {
	w, h = m.width, m.height
	if w <= 0 {
		w = defaultWidth
	}
	if h <= 0 {
		h = defaultHeight
	}
	return w, h
}

// layout renders the current request for the current size and scroll
// offset (clamped); it does not change the model.
func (m *Model) layout() *screen {
	w, h := m.size()
	r := m.current()
	s := &screen{body: m.cachedBody(r, w), width: w, height: h}
	s.small = w < minWidth || h < minHeight
	s.top = m.top(r, w)
	s.bottom = m.bottomLines(s, w, h)
	s.rows = max(h-len(s.top)-len(s.bottom), 1)
	s.offset = min(max(m.offset, 0), max(len(s.body)-s.rows, 0))
	s.bottom = m.bottomLines(s, w, h) // the position line depends on the offset
	return s
}

// fit cuts a pinned line to the width, marking the cut.
func fit(s string, w int) string { return ansi.Truncate(s, w, "…") }

// fitLeft keeps the end of a long value (the most specific part of a path).
func fitLeft(prefix, v string, w int) string {
	room := w - ansi.StringWidth(prefix)
	if room < 2 || ansi.StringWidth(v) <= room {
		return fit(label.Render(prefix)+v, w)
	}
	return label.Render(prefix) + "…" + ansi.TruncateLeft(v, ansi.StringWidth(v)-room+1, "")
}

func (m *Model) top(r escprompt.PromptRequest, w int) []string {
	head := "lazaret: the agent asks to run a command on the HOST"
	if r.Proposal {
		head = "lazaret: the agent proposes a policy rule (it runs nothing; docs/POLICY.md)"
	}
	if n := len(m.queue); n > 1 {
		head += " (" + strconv.Itoa(n-1) + " more waiting)"
	}
	exe := r.Executable
	if r.Argv == nil {
		exe = "(not one simple command)"
	} else if exe == "" {
		exe = "(not found)"
	}
	return []string{
		fit(title.Render(head), w),
		fitLeft("session    ", sessionLine(r), w),
		fitLeft("runs in    ", Visible(r.HostDir), w),
		fitLeft("executable ", Visible(exe), w),
		fit(label.Render(strings.Repeat("─", w)), w),
	}
}

// sessionLine names the session that asked: its command, pid and start.
func sessionLine(r escprompt.PromptRequest) string {
	if r.SessionCommand == nil && r.SessionPID == 0 {
		return "(unknown session)"
	}
	s := "lazaret shell"
	if !slices.Equal(r.SessionCommand, []string{"shell"}) {
		q := make([]string, len(r.SessionCommand))
		for i, a := range r.SessionCommand {
			q[i] = Visible(shellQuote(a))
		}
		s = "lazaret exec -- " + strings.Join(q, " ")
	}
	var about []string
	if r.SessionID != "" {
		// As `lazaret status` lists it (the coordinator chose the id's
		// form: hex; escaped all the same).
		about = append(about, "session "+Visible(r.SessionID[:min(12, len(r.SessionID))]))
	}
	if r.SessionPID != 0 {
		p := "pid " + strconv.Itoa(r.SessionPID)
		if !r.SessionStarted.IsZero() {
			p += ", started " + r.SessionStarted.Local().Format(time.DateTime)
		}
		about = append(about, p)
	}
	if len(about) > 0 {
		s += " (" + strings.Join(about, ", ") + ")"
	}
	return s
}

// bodyKey identifies a wrapped body: the request, its edit, the width.
type bodyKey struct {
	id    string
	gen   int
	width int
}

// cachedBody wraps the body once per request, edit and width: a request
// of tens of thousands of words would otherwise be wrapped on every key.
func (m *Model) cachedBody(r escprompt.PromptRequest, w int) []bodyLine {
	k := bodyKey{r.RequestID, m.gen, w}
	if m.bodyCache == nil || m.bodyKey != k {
		m.bodyKey, m.bodyCache = k, m.body(r, w)
	}
	return m.bodyCache
}

// body is the whole request, wrapped to the width: nothing is cut.
func (m *Model) body(r escprompt.PromptRequest, w int) []bodyLine {
	var out []bodyLine
	add := func(word int, k, v string) {
		room := max(w-len(k)-1, 8)
		// Prose wraps at spaces; an argument (word >= 0) is cut exactly, so
		// that no space of it is lost at a line end.
		wrapped := ansi.Wrap(v, room, "")
		if word >= 0 {
			wrapped = ansi.Hardwrap(v, room, true)
		}
		for i, seg := range strings.Split(wrapped, "\n") {
			prefix := strings.Repeat(" ", len(k)+1)
			if i == 0 {
				prefix = label.Render(k) + " "
			}
			out = append(out, bodyLine{fit(prefix+seg, w), word})
		}
	}
	add(-1, "request   ", Visible(r.RequestID))
	add(-1, "profile   ", Visible(r.Profile))
	add(-1, "session   ", sessionLine(r))
	for i, j := range strings.Split(r.Justification, "\n") {
		k := "reason    "
		if i > 0 {
			k = "          "
		}
		add(-1, k, Visible(j))
	}
	add(-1, "cwd       ", Visible(r.Cwd)+"  →  host "+Visible(r.HostDir))
	if r.Reason != "" {
		add(-1, "asked for ", Visible(r.Reason))
	}
	out = append(out, bodyLine{"", -1})
	if r.Proposal && len(r.Argv) == 2 {
		add(-1, "rule      ", Visible(r.Argv[0])+" += "+Visible(r.Argv[1]))
		return out
	}
	if r.Argv == nil {
		add(-1, "command   ", `"`+Visible(r.Command)+`"`)
		add(-1, "", warn.Render("not one simple command: it cannot run as it is (never through a shell); E to edit"))
		return out
	}
	exe := Visible(r.Executable)
	if why := cmp.Or(shellwords.BannedEntryReason(r.Argv), shellwords.BannedReason(r.Executable)); why != "" {
		exe += "  " + warn.Render("← "+why)
	}
	add(-1, "executable", exe)
	for i, a := range r.Argv {
		v := `"` + Visible(a) + `"`
		if why := wordFlag(i, a); why != "" {
			v += "  " + warn.Render("← "+why)
		}
		add(i, fmt.Sprintf("%-10s", "argv["+strconv.Itoa(i)+"]"), v)
	}
	return out
}

// wordFlag marks an argument the human should look at twice: one that
// would not be appended to an auto_approve entry (assignment, option,
// path outside, odd characters), or one a shell would read differently.
func wordFlag(i int, a string) string {
	if shellwords.HasMeta(a) {
		return "shell metacharacters, passed as literal text (never to a shell)"
	}
	if i == 0 {
		return ""
	}
	return shellwords.PlainWordReason(a)
}

func (m *Model) bottomLines(s *screen, w, h int) []string {
	var b []string
	switch {
	case s.small:
		b = append(b, warn.Render(fmt.Sprintf("terminal too small (%d×%d, need %d×%d): enlarge it to see the request", w, h, minWidth, minHeight)))
	case s.rows == 0:
		// first pass, before the body height is known
		b = append(b, "")
	default:
		b = append(b, label.Render(m.position(s)))
	}
	if m.mode == editing {
		ed := strings.Split(ansi.Hardwrap("edit> "+Visible(string(m.buf))+"█", w, true), "\n")
		b = append(b, ed[max(len(ed)-3, 0):]...)
		b = append(b, label.Render("Enter to check the edited command, Esc to go back"))
	} else {
		legend := keys.Render("[A]") + " approve and run   " + keys.Render("[D]") + " deny   " +
			keys.Render("[E]") + " edit   " + keys.Render("[Q]") + " abort lazaret"
		if ansi.StringWidth(legend) > w {
			legend = keys.Render("[A]") + " approve " + keys.Render("[D]") + " deny " + keys.Render("[E]") + " edit " + keys.Render("[Q]") + " abort"
		}
		b = append(b, legend)
	}
	if m.gate != nil && m.gate.Dropped() > 0 {
		b = append(b, warn.Render(IgnoredNotice))
	}
	if m.note != "" {
		n := strings.Split(ansi.Wrap(Visible(m.note), w, ""), "\n")
		for _, l := range n[:min(len(n), 2)] {
			b = append(b, warn.Render(l))
		}
	}
	for i := range b {
		b[i] = fit(b[i], w)
	}
	return b
}

// position says how much is left to see, then where the window is: the
// first part survives a narrow terminal.
func (m *Model) position(s *screen) string {
	end := min(s.offset+s.rows, len(s.body))
	where := fmt.Sprintf("lines %d–%d of %d", s.offset+1, end, len(s.body))
	below := len(s.body) - end
	if below == 0 {
		if s.offset > 0 {
			return "end of request · " + where + " (↑ PgUp to go back)"
		}
		return where
	}
	words := map[int]bool{}
	for _, l := range s.body[end:] {
		if l.word >= 0 {
			words[l.word] = true
		}
	}
	p := fmt.Sprintf("↓ %d more lines", below)
	if len(words) > 0 {
		p += fmt.Sprintf(", %d more words", len(words))
	}
	return p + " · " + where + " (↓ PgDn Space)"
}
