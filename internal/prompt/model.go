// Package prompt is the approval prompt of Host Escalation: a bubbletea
// model that shows one request at a time (others queue), renders every
// untrusted string with its control, bidi and invisible characters made
// visible, and answers A approve, D deny, E edit, Q abort lazaret.
package prompt

import (
	"fmt"
	"strconv"
	"strings"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/lazaret-dev/lazaret/internal/escalation"
	"github.com/lazaret-dev/lazaret/internal/shellwords"
)

// Decision is the answer to one request.
type Decision struct {
	RequestID string
	Answer    escalation.Answer
}

// Messages the model understands besides keys.
type (
	// AddMsg queues a request.
	AddMsg struct{ Request escalation.PromptRequest }
	// CancelMsg withdraws a request (its requester went away).
	CancelMsg struct{ RequestID string }
)

// Resolver resolves an edited command's argv[0] for request r exactly as
// the coordinator will (escalation.Resolve in r.HostDir with r.Path).
type Resolver func(argv0 string, r escalation.PromptRequest) (string, error)

type mode int

const (
	viewing mode = iota
	editing
)

// Model is the prompt. Decisions are delivered through the decide
// callback, synchronously inside Update, so tests need no sleeps; the
// callback must not block.
type Model struct {
	queue   []escalation.PromptRequest
	mode    mode
	buf     []rune
	edited  []string // the edited argv shown for confirmation
	exe     string   // its resolution
	note    string   // one-line message (parse error, why A is refused)
	resolve Resolver
	decide  func(Decision)
	done    bool
	width   int
}

// New returns a model with the first request r.
func New(r escalation.PromptRequest, resolve Resolver, decide func(Decision)) *Model {
	return &Model{queue: []escalation.PromptRequest{r}, resolve: resolve, decide: decide}
}

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
		for i, r := range m.queue {
			if r.RequestID == msg.RequestID {
				m.queue = append(m.queue[:i:i], m.queue[i+1:]...)
				if i == 0 {
					m.reset()
				}
				break
			}
		}
	case tea.WindowSizeMsg:
		m.width = msg.Width
	case tea.KeyPressMsg:
		if m.mode == editing {
			m.editKey(msg)
		} else {
			m.viewKey(msg)
		}
	}
	if len(m.queue) == 0 || m.done {
		m.done = true
		return m, tea.Quit
	}
	return m, nil
}

func (m *Model) reset() { m.mode, m.buf, m.edited, m.exe, m.note = viewing, nil, nil, "", "" }

func (m *Model) viewKey(k tea.KeyPressMsg) {
	switch strings.ToLower(k.String()) {
	case "a":
		argv, exe := m.queue[0].Argv, m.queue[0].Executable
		if m.edited != nil {
			argv, exe = m.edited, m.exe
		}
		if argv == nil || exe == "" {
			m.note = "this command cannot run as it is (not a simple command or no such executable): press E to edit it"
			return
		}
		ans := escalation.Answer{Action: escalation.Approve}
		if m.edited != nil {
			ans.Argv, ans.Executable = m.edited, m.exe
		}
		m.answer(ans)
	case "d":
		m.answer(escalation.Answer{Action: escalation.Deny})
	case "e":
		m.mode, m.note = editing, ""
		m.buf = []rune(commandLine(m.current()))
	case "q", "ctrl+c":
		m.answer(escalation.Answer{Action: escalation.Abort})
		for len(m.queue) > 0 {
			m.answer(escalation.Answer{Action: escalation.Deny})
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

func (m *Model) answer(a escalation.Answer) {
	r := m.queue[0]
	m.queue = m.queue[1:]
	m.reset()
	m.decide(Decision{RequestID: r.RequestID, Answer: a})
}

// current is the request being shown, with an edit applied.
func (m *Model) current() escalation.PromptRequest {
	r := m.queue[0]
	if m.edited != nil {
		r.Argv, r.Executable, r.Command = m.edited, m.exe, ""
	}
	return r
}

// commandLine is the text the editor starts from: the command string, or
// the argv quoted so that Split gives it back.
func commandLine(r escalation.PromptRequest) string {
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

// Render is the prompt's text (View without the tea wrapper).
func (m *Model) Render() string {
	r := m.current()
	var b strings.Builder
	line := func(k, v string) { b.WriteString(label.Render(k) + " " + v + "\n") }
	head := "lazaret: the agent asks to run a command on the HOST"
	if n := len(m.queue); n > 1 {
		head += " (" + strconv.Itoa(n-1) + " more waiting)"
	}
	b.WriteString(title.Render(head) + "\n\n")
	line("request   ", Visible(r.RequestID))
	line("profile   ", Visible(r.Profile))
	line("reason    ", Visible(r.Justification))
	line("cwd       ", Visible(r.Cwd)+"  →  host "+Visible(r.HostDir))
	if m.edited == nil && r.Reason != "" {
		line("asked for ", Visible(r.Reason))
	}
	b.WriteString("\n")
	if r.Argv == nil {
		line("command   ", `"`+Visible(r.Command)+`"`)
		b.WriteString(warn.Render("not one simple command: it cannot run as it is (never through a shell); E to edit") + "\n")
	} else {
		exe := r.Executable
		if exe == "" {
			exe = "(not found)"
		}
		line("executable", Visible(exe))
		for i, a := range r.Argv {
			line(fmt.Sprintf("%-10s", "argv["+strconv.Itoa(i)+"]"), `"`+Visible(a)+`"`)
		}
	}
	b.WriteString("\n")
	if m.mode == editing {
		b.WriteString(label.Render("edit> ") + Visible(string(m.buf)) + "█\n")
		b.WriteString(label.Render("Enter to check the edited command, Esc to go back") + "\n")
	} else {
		b.WriteString(keys.Render("[A]") + " approve and run   " + keys.Render("[D]") + " deny   " +
			keys.Render("[E]") + " edit   " + keys.Render("[Q]") + " abort lazaret\n")
	}
	if m.note != "" {
		b.WriteString(warn.Render(Visible(m.note)) + "\n")
	}
	return b.String()
}
