package audit

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Line renders e as one line for a terminal: seq, time, kind, profile,
// session and a summary of its content. Every string taken from the entry is
// escaped (see Escape), so the line holds no control characters.
func Line(e Entry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%6d  %s  %-19s", e.Seq, e.Time.UTC().Format(time.RFC3339), e.Kind)
	if e.Profile != "" {
		fmt.Fprintf(&b, "  profile=%s", Escape(e.Profile))
	}
	if e.Session != "" {
		fmt.Fprintf(&b, "  session=%s", Escape(e.Session))
	}
	if s := Summary(e); s != "" {
		b.WriteString("  ")
		b.WriteString(s)
	}
	return b.String()
}

// Summary renders the kind-specific content of e, escaped.
func Summary(e Entry) string {
	var parts []string
	add := func(k, v string) { parts = append(parts, k+"="+v) }
	if r := e.Request; r != nil {
		add("request", Escape(r.RequestID))
		if len(r.Argv) > 0 {
			add("argv", "["+EscapeArgv(r.Argv)+"]")
		}
		if r.Command != "" {
			add("command", quote(r.Command))
		}
		if r.Cwd != "" {
			add("cwd", Escape(r.Cwd))
		}
		if r.Justification != "" {
			add("justification", quote(r.Justification))
		}
	}
	if r := e.Rejection; r != nil {
		add("stage", Escape(r.Stage))
		if r.Reason != "" {
			add("reason", quote(r.Reason))
		}
	}
	if d := e.Decision; d != nil {
		add("decision", Escape(string(d.Outcome)))
		if len(d.Argv) > 0 {
			add("run", "["+EscapeArgv(d.Argv)+"]")
		}
		if d.Rule != "" {
			add("rule", quote(d.Rule))
		}
		if d.Reason != "" {
			add("reason", quote(d.Reason))
		}
	}
	if r := e.Result; r != nil {
		add("exit", fmt.Sprint(r.ExitCode))
		if r.Signal != "" {
			add("signal", Escape(r.Signal))
		}
		add("duration", (time.Duration(r.DurationMS) * time.Millisecond).String())
		add("stdout", fmt.Sprintf("%dB:sha256:%s", r.StdoutBytes, short(Escape(r.StdoutSHA256))))
		add("stderr", fmt.Sprintf("%dB:sha256:%s", r.StderrBytes, short(Escape(r.StderrSHA256))))
		if r.Truncated {
			add("truncated", "true")
		}
		if r.Error != "" {
			add("error", quote(r.Error))
		}
	}
	keys := make([]string, 0, len(e.Fields))
	for k := range e.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		add(Escape(k), Escape(e.Fields[k]))
	}
	return strings.Join(parts, " ")
}

// quote escapes s and wraps it in double quotes, escaping the quotes in it.
func quote(s string) string { return `"` + strings.ReplaceAll(Escape(s), `"`, `\"`) + `"` }

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
