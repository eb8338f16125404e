package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Error is one configuration problem, located in the file. Its message is
// always a single line: "file:line: key: message".
type Error struct {
	File string // empty when the problem is in the built-in defaults
	Line int    // 1-based; 0 when unknown
	Key  string // dotted TOML key, e.g. profiles.claude.volumes[0].host
	Msg  string
	// IsSecurity marks a path-safety violation (a `..` segment, a mount of
	// the host root, ...); the CLI exits with its security code for these.
	IsSecurity bool
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(oneLine(e.File))
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(oneLine(e.Key) + ": ")
	}
	b.WriteString(oneLine(e.Msg))
	return b.String()
}

// ErrorList is returned by Load when it finds more than one problem, so that
// `lazaret config check` can show them all. Its Error method shows the first
// one only, to keep a command's failure on one line.
type ErrorList []*Error

func (l ErrorList) Error() string {
	switch len(l) {
	case 0:
		return "no errors"
	case 1:
		return l[0].Error()
	}
	return fmt.Sprintf("%s (and %d more; run `lazaret config check`)", l[0].Error(), len(l)-1)
}

// Unwrap lets errors.As find each *Error.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// IsSecurity reports whether err (an *Error or ErrorList, possibly wrapped)
// contains a security violation.
func IsSecurity(err error) bool {
	var l ErrorList
	if errors.As(err, &l) {
		for _, e := range l {
			if e.IsSecurity {
				return true
			}
		}
		return false
	}
	var e *Error
	var we *WorkspaceError
	return errors.As(err, &e) && e.IsSecurity || errors.As(err, &we)
}

// Errors returns every *Error in err, in order (nil if there is none).
func Errors(err error) []*Error {
	var l ErrorList
	if errors.As(err, &l) {
		return l
	}
	var e *Error
	if errors.As(err, &e) {
		return []*Error{e}
	}
	return nil
}

// ruleError is a rule violation before it is located in the file.
type ruleError struct {
	msg      string
	security bool
}

func (e *ruleError) Error() string { return e.msg }

func ruleErrf(format string, args ...any) error {
	return &ruleError{msg: fmt.Sprintf(format, args...)}
}

func securityErrf(format string, args ...any) error {
	return &ruleError{msg: fmt.Sprintf(format, args...), security: true}
}

// oneLine makes s safe to print on one line: control characters (including
// newlines and NUL) are shown escaped, so a hostile value cannot forge extra
// output lines.
func oneLine(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if isControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isControl(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x2028 || r == 0x2029
}

// quoteValue shows a configuration value in a message.
func quoteValue(s string) string { return strconv.Quote(s) }
