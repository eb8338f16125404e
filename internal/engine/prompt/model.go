// Package prompt is the approval prompt of Host Escalation: a bubbletea
// model that shows one request at a time (others queue), renders every
// untrusted string with its control, bidi and invisible characters made
// visible, and answers A approve, D deny, E edit, Q abort lazaret.
package prompt

import (
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/lazaret-dev/lazaret/internal/shellwords"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// Decision is the answer to one request.
type Decision struct {
	RequestID string
	Answer    escprompt.Answer
}

// Messages the model understands besides keys.
type (
	// AddMsg queues a request.
	AddMsg struct{ Request escprompt.PromptRequest }
	// CancelMsg withdraws a request: its request ended (Reason, one of
	// escprompt's Withdraw*; empty: no human is left to tell).
	CancelMsg struct{ RequestID, Reason string }
	// HoldMsg takes the prompt off the screen without answering anything:
	// the terminal detached (Runner.SetAttached); its requests stay
	// pending and are shown again, afresh, on the next attach.
	HoldMsg struct{}
)

// Resolver resolves an edited command's argv[0] for request r exactly as
// the coordinator will (escprompt.Resolve in r.HostDir with r.Path).
type Resolver func(argv0 string, r escprompt.PromptRequest) (string, error)

type mode int

const (
	viewing mode = iota
	editing
)

// Model is the prompt. Decisions are delivered through the decide
// callback, synchronously inside Update, so tests need no sleeps; the
// callback must not block.
type Model struct {
	queue   []escprompt.PromptRequest
	mode    mode
	buf     []rune
	edited  []string // the edited argv shown for confirmation
	exe     string   // its resolution
	note    string   // one-line message (parse error, why A is refused)
	resolve Resolver
	decide  func(Decision)
	done    bool
	width   int
	height  int
	// sized is set once the terminal reported its size: until then no
	// line counts as seen.
	sized bool
	// offset is the first body line shown; seen marks the body lines that
	// have been on screen: A is refused until all have.
	offset int
	seen   []bool
	// gen counts shown commands (requests and edits), keying bodyCache.
	gen       int
	bodyKey   bodyKey
	bodyCache []bodyLine
	// gate is the readability gate: no key but scrolling counts before
	// the content on screen has been readable (readgate.go); shown is
	// what the last change of that content was.
	gate  *ReadGate
	shown shownState
	// endWithdrawn is why the request on the screen was withdrawn when
	// the prompt ended with it (nothing else queued): the runner says so
	// on the terminal once the prompt has left it.
	endWithdrawn string
}

// shownState is what of the request the screen shows: the request or
// edit (gen), the size and the window of body lines. Content new to the
// human (another gen or size, a line scrolled into view) closes the gate.
type shownState struct {
	ok                    bool
	gen, w, h, first, end int
}

// Messages of the gate's bookkeeping.
type (
	// handOverMsg arrives once the view of epoch e is with the renderer.
	handOverMsg uint64
	// settleMsg checks that epoch e was drawn.
	settleMsg uint64
	// droppedMsg: the input reader dropped keys (the notice is shown).
	droppedMsg struct{}
)

// settle is how long after the hand-over a view that caused no write
// counts as drawn anyway: the renderer writes nothing for a view equal to
// what the screen shows (a resize there and back within one of its 1/60 s
// ticks). Fifteen ticks: a renderer merely late under load has written by
// then, and the gate is only later for the rare view that wrote nothing.
const settle = 250 * time.Millisecond

// New returns a model with the first request r.
func New(r escprompt.PromptRequest, resolve Resolver, decide func(Decision)) *Model {
	return &Model{queue: []escprompt.PromptRequest{r}, resolve: resolve, decide: decide, gate: NewReadGate(-1, nil)}
}

// SetReadGate makes g the model's readability gate (the runner shares
// one with the terminal's input and output).
func (m *Model) SetReadGate(g *ReadGate) { m.gate = g }

// ReadGate is the model's readability gate.
func (m *Model) ReadGate() *ReadGate { return m.gate }

// Init implements tea.Model.
func (m *Model) Init() tea.Cmd { return nil }

// Pending is the number of queued requests, the shown one included.
func (m *Model) Pending() int { return len(m.queue) }

// Update implements tea.Model.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case AddMsg:
		m.queue = append(m.queue, msg.Request)
	case CancelMsg:
		m.withdraw(msg)
	case HoldMsg:
		m.done = true
	case tea.WindowSizeMsg:
		if msg.Width != m.width {
			m.seen = nil // the body is wrapped anew
		}
		m.width, m.height, m.sized = msg.Width, msg.Height, true
	case tea.KeyPressMsg:
		if len(m.queue) > 0 && !m.done {
			m.key(msg)
		}
	case handOverMsg:
		m.gate.HandOver(uint64(msg))
		return m, tea.Tick(settle, func(time.Time) tea.Msg { return settleMsg(msg) })
	case settleMsg:
		m.gate.DrawnBy(uint64(msg))
	}
	if len(m.queue) == 0 || m.done {
		m.done = true
		return m, tea.Quit
	}
	m.track()
	return m, m.changed()
}

// key handles a key: scrolling always (it only shows more, and what it
// shows closes the gate again); every other key only through the
// readability gate, which drops and counts it before the content on
// screen was readable.
func (m *Model) key(k tea.KeyPressMsg) {
	if m.mode == viewing && m.scroll(k.String()) {
		return
	}
	if !m.gate.Admit() {
		return
	}
	if m.mode == editing {
		m.editKey(k)
	} else {
		m.viewKey(k)
	}
}

// changed closes the gate when the screen is to show content new to the
// human and returns the command that reports the hand-over of that view
// to the renderer (bubbletea renders it after this Update returns).
func (m *Model) changed() tea.Cmd {
	s := m.layout()
	now := shownState{true, m.gen, s.width, s.height, s.offset, min(s.offset+s.rows, len(s.body))}
	old := m.shown
	m.shown = now
	if old.ok && old.gen == now.gen && old.w == now.w && old.h == now.h && now.first >= old.first && now.end <= old.end {
		m.shown.first, m.shown.end = old.first, old.end // nothing new to read
		return nil
	}
	e := m.gate.Change()
	return func() tea.Msg { return handOverMsg(e) }
}

// withdraw takes a request out of the queue. The one on the screen gives
// way to the next at once, which says why on its own screen (its gate
// closes for the new content, so a key typed at the withdrawn one cannot
// answer it); with none next, the prompt ends and the runner says why.
func (m *Model) withdraw(msg CancelMsg) {
	for i, r := range m.queue {
		if r.RequestID != msg.RequestID {
			continue
		}
		m.queue = append(m.queue[:i:i], m.queue[i+1:]...)
		if i != 0 {
			return
		}
		m.reset()
		switch {
		case msg.Reason == "":
		case len(m.queue) > 0:
			m.note = "the previous prompt was withdrawn: the request ended (" + msg.Reason + ")"
		default:
			m.endWithdrawn = msg.Reason
		}
		return
	}
}

func (m *Model) reset() {
	m.mode, m.buf, m.edited, m.exe, m.note = viewing, nil, nil, "", ""
	m.gate.ResetDropped()
	m.showAgain()
}

// showAgain starts the request over at its top, unseen: a new request or
// an edited command must be read to its end before A.
func (m *Model) showAgain() { m.offset, m.seen, m.gen = 0, nil, m.gen+1 }

// track clamps the scroll offset and marks the lines now on screen seen.
func (m *Model) track() {
	s := m.layout()
	m.offset = s.offset
	if len(m.seen) != len(s.body) {
		m.seen = make([]bool, len(s.body))
	}
	if s.small || !m.sized {
		return
	}
	for i := s.offset; i < min(s.offset+s.rows, len(s.body)); i++ {
		m.seen[i] = true
	}
}

// unseen counts the body lines and argv words never shown yet.
func (m *Model) unseen() (lines, words int) {
	s := m.layout()
	ws := map[int]bool{}
	for i, l := range s.body {
		if i >= len(m.seen) || !m.seen[i] {
			lines++
			if l.word >= 0 {
				ws[l.word] = true
			}
		}
	}
	return lines, len(ws)
}

// scroll handles the paging keys; it reports whether k was one.
func (m *Model) scroll(k string) bool {
	s := m.layout()
	switch k {
	case "down", "j":
		m.offset++
	case "up", "k":
		m.offset--
	case "pgdown", "space", " ", "f":
		m.offset += s.rows
	case "pgup", "b":
		m.offset -= s.rows
	case "home", "g":
		m.offset = 0
	case "end", "G":
		m.offset = len(s.body)
	default:
		return false
	}
	m.offset = min(max(m.offset, 0), max(len(s.body)-s.rows, 0))
	return true
}

func (m *Model) viewKey(k tea.KeyPressMsg) {
	switch strings.ToLower(k.String()) {
	case "a":
		if m.layout().small {
			m.note = "the terminal is too small to show the request: enlarge it before approving"
			return
		}
		if lines, words := m.unseen(); lines > 0 {
			m.note = fmt.Sprintf("A is refused until you have seen the whole request: %d more lines (%d more words) not shown yet; scroll with ↓, PgDn or Space", lines, words)
			return
		}
		argv, exe := m.queue[0].Argv, m.queue[0].Executable
		if m.edited != nil {
			argv, exe = m.edited, m.exe
		}
		if argv == nil || exe == "" {
			m.note = "this command cannot run as it is (not a simple command or no such executable): press E to edit it"
			return
		}
		ans := escprompt.Answer{Action: escprompt.Approve}
		if m.edited != nil {
			ans.Argv, ans.Executable = m.edited, m.exe
		}
		m.answer(ans)
	case "d":
		m.answer(escprompt.Answer{Action: escprompt.Deny})
	case "e":
		m.mode, m.note = editing, ""
		m.buf = []rune(commandLine(m.current()))
	case "q", "ctrl+c":
		m.answer(escprompt.Answer{Action: escprompt.Abort})
		for len(m.queue) > 0 {
			m.answer(escprompt.Answer{Action: escprompt.Deny})
		}
		m.done = true
	}
}

func (m *Model) editKey(k tea.KeyPressMsg) {
	switch k.String() {
	case "enter":
		line := string(m.buf)
		argv, err := shellwords.Split(line)
		if err != nil {
			m.note = "cannot run that: " + err.Error() + " (commands never run through a shell)"
			return
		}
		exe, err := m.resolve(argv[0], m.queue[0])
		if err != nil {
			m.note = err.Error()
			return
		}
		m.mode, m.edited, m.exe, m.note = viewing, argv, exe, "edited: check it again, then A to run it"
		m.showAgain()
	case "esc":
		m.mode, m.note = viewing, ""
	case "backspace":
		if len(m.buf) > 0 {
			m.buf = m.buf[:len(m.buf)-1]
		}
	case "ctrl+u":
		m.buf = nil
	case "ctrl+c":
		m.mode = viewing
		m.viewKey(k)
	default:
		if k.Text != "" {
			m.buf = append(m.buf, []rune(k.Text)...)
		}
	}
}

func (m *Model) answer(a escprompt.Answer) {
	r := m.queue[0]
	m.queue = m.queue[1:]
	m.reset()
	m.decide(Decision{RequestID: r.RequestID, Answer: a})
}

// current is the request being shown, with an edit applied.
func (m *Model) current() escprompt.PromptRequest {
	r := m.queue[0]
	if m.edited != nil {
		r.Argv, r.Executable, r.Command = m.edited, m.exe, ""
	}
	return r
}

// commandLine is the text the editor starts from: the command string, or
// the argv quoted so that Split gives it back.
func commandLine(r escprompt.PromptRequest) string {
	if r.Argv == nil {
		return r.Command
	}
	q := make([]string, len(r.Argv))
	for i, a := range r.Argv {
		q[i] = shellQuote(a)
		if i == 0 && strings.Contains(a, "=") && q[i] == a {
			q[i] = "'" + a + "'" // else it would read as an assignment
		}
	}
	return strings.Join(q, " ")
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`;&|<>(){}[]*?!#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

var (
	title = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("11"))
	label = lipgloss.NewStyle().Foreground(lipgloss.Color("8"))
	warn  = lipgloss.NewStyle().Foreground(lipgloss.Color("9"))
	keys  = lipgloss.NewStyle().Bold(true)
)

// View implements tea.Model. Every string that came from the sandbox goes
// through Visible before any styling.
func (m *Model) View() tea.View {
	if len(m.queue) == 0 {
		return tea.NewView("")
	}
	v := tea.NewView(m.Render())
	// A clean screen: nothing the agent printed before stays beside it.
	v.AltScreen = true
	return v
}

// Render is the prompt's text (View without the tea wrapper): exactly the
// terminal's height in lines, none wider than it.
func (m *Model) Render() string {
	if len(m.queue) == 0 {
		return ""
	}
	l := m.layout()
	out := append(append(l.top, l.window()...), l.bottom...)
	return strings.Join(out, "\n") + "\n"
}
