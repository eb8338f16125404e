package escprompt

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/visible"
)

// shown renders sandbox text as the prompt does (internal/engine/prompt's
// Visible): every control and invisible character escaped.
func shown(s string) string { return visible.Escape(s, visible.AngleForm) }

// Describe renders r as plain lines, with the prompt's labels and its
// escaping, for `lazaret approvals show` (the same fields the prompt
// shows; no styling).
func Describe(r PromptRequest) string {
	var b strings.Builder
	line := func(k, v string) { b.WriteString(k + " " + v + "\n") }
	line("request   ", shown(r.RequestID))
	line("profile   ", shown(r.Profile))
	if len(r.SessionCommand) > 0 {
		q := make([]string, len(r.SessionCommand))
		for i, a := range r.SessionCommand {
			q[i] = shown(a)
		}
		line("session   ", shown(r.SessionID[:min(12, len(r.SessionID))])+" ("+strings.Join(q, " ")+")")
	}
	for i, j := range strings.Split(r.Justification, "\n") {
		k := "reason    "
		if i > 0 {
			k = "          "
		}
		line(k, shown(j))
	}
	line("cwd       ", shown(r.Cwd)+"  →  host "+shown(r.HostDir))
	if r.Reason != "" {
		line("asked for ", shown(r.Reason))
	}
	if r.Argv == nil {
		line("command   ", `"`+shown(r.Command)+`"`)
		return b.String()
	}
	line("executable", shown(r.Executable))
	for i, a := range r.Argv {
		line(padRight("argv["+strconv.Itoa(i)+"]", 10), `"`+shown(a)+`"`)
	}
	return b.String()
}

// Summary renders r's command on one line: the argv's words quoted, or
// the command string, escaped.
func Summary(r PromptRequest) string {
	if r.Argv == nil {
		return `"` + shown(r.Command) + `"`
	}
	q := make([]string, len(r.Argv))
	for i, a := range r.Argv {
		q[i] = strconv.Quote(shown(a))
	}
	return strings.Join(q, " ")
}

func padRight(s string, n int) string {
	if len(s) >= n {
		return s
	}
	return s + strings.Repeat(" ", n-len(s))
}

// HashHex is the SHA-256 of b in hex: the hash an answer from `lazaret
// approvals answer` is bound to (an escalation's canonical signed
// encoding, escwire.Request.Canonical).
func HashHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
