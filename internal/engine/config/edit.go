package config

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A minimal edit of the user's configuration file: one value appended to
// one array (an approved proposal saved with --save). The text is edited
// in place, so that comments, order and layout stay; the result is then
// parsed and compared with the original, and the edit is refused unless
// it adds exactly that value.

// Keys AddRule edits.
const (
	KeyAllowDomains = "allow_domains"
	KeyAllowEgress  = "allow_egress"
	KeyAutoApprove  = "auto_approve"
)

var (
	headerRE = regexp.MustCompile(`^[ \t]*\[([^\[\]]+)\][ \t]*(#.*)?$`)
	keyRE    = regexp.MustCompile(`^[ \t]*([A-Za-z0-9_-]+)[ \t]*=`)
)

// AddRule returns data with value appended to key of table: allow_domains
// or allow_egress of a profile (table "profiles.NAME"), or auto_approve
// of "escalation". A table the file lacks is appended at its end; a key
// its table lacks is added after the table's last key.
func AddRule(file string, data []byte, table, key, value string) ([]byte, error) {
	if strings.ContainsAny(value, "\x00\n\r") {
		return nil, fmt.Errorf("%s: %s.%s: the value contains a line break or NUL", file, table, key)
	}
	before, err := Parse(file, data)
	if err != nil {
		return nil, err
	}
	text := string(data)
	lit := strconv.Quote(value)
	var edited string
	if start, end, ok := findTable(text, table); !ok {
		edited = appendTable(text, table, key, lit)
	} else if edited, err = addToTable(text, start, end, key, lit); err != nil {
		return nil, fmt.Errorf("%s: %s.%s: %v; add %s there by hand", file, table, key, err, lit)
	}
	after, err := Parse(file, []byte(edited))
	if err != nil {
		return nil, fmt.Errorf("%s: the edit would not parse (%v); add %s to %s.%s by hand", file, err, lit, table, key)
	}
	if !addedExactly(before, after, table, key) {
		return nil, fmt.Errorf("%s: the edit would change more than %s.%s; add %s there by hand", file, table, key, lit)
	}
	return []byte(edited), nil
}

// findTable returns the byte range of table's body: from the line after
// its header to the next header.
func findTable(text, table string) (start, end int, ok bool) {
	want := normTable(table)
	off := 0
	start = -1
	for _, l := range strings.SplitAfter(text, "\n") {
		if m := headerRE.FindStringSubmatch(strings.TrimRight(l, "\r\n")); m != nil {
			if start >= 0 {
				return start, off, true
			}
			if normTable(m[1]) == want {
				start = off + len(l)
			}
		}
		off += len(l)
	}
	if start >= 0 {
		return start, len(text), true
	}
	return 0, 0, false
}

// normTable writes a table name without spaces or quotes around its
// parts: `profiles."dev"` and `profiles . dev` are profiles.dev.
func normTable(t string) string {
	parts := strings.Split(t, ".")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if u, err := strconv.Unquote(p); err == nil {
			p = u
		} else if len(p) >= 2 && p[0] == '\'' && p[len(p)-1] == '\'' {
			p = p[1 : len(p)-1]
		}
		parts[i] = p
	}
	return strings.Join(parts, ".")
}

func appendTable(text, table, key, lit string) string {
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	if text != "" && !strings.HasSuffix(text, "\n\n") {
		text += "\n"
	}
	return text + "[" + table + "]\n" + key + " = [" + lit + "]\n"
}

// addToTable adds lit to key's array in text[start:end], or adds the key
// after the table's last key line.
func addToTable(text string, start, end int, key, lit string) (string, error) {
	afterLast := start
	off := start
	for _, l := range strings.SplitAfter(text[start:end], "\n") {
		if m := keyRE.FindStringSubmatchIndex(l); m != nil {
			if l[m[2]:m[3]] == key {
				return insertIntoArray(text, off+m[1], lit)
			}
			afterLast = off + len(l)
		}
		off += len(l)
	}
	ins := key + " = [" + lit + "]\n"
	if afterLast > 0 && text[afterLast-1] != '\n' {
		ins = "\n" + ins
	}
	return text[:afterLast] + ins + text[afterLast:], nil
}

// insertIntoArray appends lit to the array whose value starts after the
// '=' at text[eq:]: on the same line for a one-line array; for a
// multi-line one, on a line of its own indented as the last value.
func insertIntoArray(text string, eq int, lit string) (string, error) {
	i := eq
	for i < len(text) && (text[i] == ' ' || text[i] == '\t') {
		i++
	}
	if i >= len(text) || text[i] != '[' {
		return "", fmt.Errorf("not an array")
	}
	closing, last, err := scanArray(text, i)
	if err != nil {
		return "", err
	}
	if last < 0 { // empty
		return text[:i+1] + lit + text[i+1:], nil
	}
	multiline := strings.Contains(text[last:closing], "\n")
	trailingComma := text[last] == ','
	if !multiline {
		sep := ", "
		if trailingComma {
			sep = " "
		}
		return text[:last+1] + sep + lit + text[last+1:], nil
	}
	lineStart := strings.LastIndex(text[:last], "\n") + 1
	indent := text[lineStart : lineStart+len(text[lineStart:])-len(strings.TrimLeft(text[lineStart:], " \t"))]
	if trailingComma {
		return text[:last+1] + "\n" + indent + lit + "," + text[last+1:], nil
	}
	return text[:last+1] + ",\n" + indent + lit + text[last+1:], nil
}

// scanArray finds the closing bracket of the array opening at text[open]
// and the offset of its last significant character (a value's end or a
// comma; -1 when empty), skipping strings and comments.
func scanArray(text string, open int) (closing, last int, err error) {
	depth, last := 0, -1
	for i := open; i < len(text); i++ {
		switch c := text[i]; c {
		case '#':
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case '"', '\'':
			end, err := skipString(text, i)
			if err != nil {
				return 0, 0, err
			}
			i, last = end, end
		case '[':
			if depth > 0 {
				last = i
			}
			depth++
		case ']':
			depth--
			if depth == 0 {
				return i, last, nil
			}
			last = i
		case ' ', '\t', '\n', '\r':
		default:
			last = i
		}
	}
	return 0, 0, fmt.Errorf("the array is not closed")
}

// skipString returns the offset of the closing quote of the string at
// text[i] (basic, literal, or their triple-quoted forms).
func skipString(text string, i int) (int, error) {
	q := text[i]
	if strings.HasPrefix(text[i:], strings.Repeat(string(q), 3)) {
		end := strings.Index(text[i+3:], strings.Repeat(string(q), 3))
		if end < 0 {
			return 0, fmt.Errorf("unclosed string")
		}
		return i + 3 + end + 2, nil
	}
	for j := i + 1; j < len(text); j++ {
		switch {
		case q == '"' && text[j] == '\\':
			j++
		case text[j] == q:
			return j, nil
		case text[j] == '\n':
			return 0, fmt.Errorf("unclosed string")
		}
	}
	return 0, fmt.Errorf("unclosed string")
}

// addedExactly: after is before with one value added to table.key and
// nothing else changed (warnings aside: a new rule may well warn).
func addedExactly(before, after *Config, table, key string) bool {
	b, a := *before, *after
	b.Warnings, a.Warnings = nil, nil
	b.Escalation.RunnerWarnings, a.Escalation.RunnerWarnings = nil, nil
	if table == "escalation" && key == KeyAutoApprove {
		if len(a.Escalation.AutoApprove) != len(b.Escalation.AutoApprove)+1 {
			return false
		}
		a.Escalation.AutoApprove = b.Escalation.AutoApprove
		return reflect.DeepEqual(b, a)
	}
	name, ok := strings.CutPrefix(normTable(table), "profiles.")
	bp, ap := b.Profiles[name], a.Profiles[name]
	if !ok || ap == nil || bp == nil {
		return false
	}
	bc, ac := unplaced(bp), unplaced(ap)
	switch key {
	case KeyAllowDomains:
		if len(ac.AllowDomains) != len(bc.AllowDomains)+1 {
			return false
		}
		ac.AllowDomains = bc.AllowDomains
	case KeyAllowEgress:
		if len(ac.AllowEgress) != len(bc.AllowEgress)+1 {
			return false
		}
		ac.AllowEgress = slices.Clone(bc.AllowEgress)
	default:
		return false
	}
	if !reflect.DeepEqual(bc, ac) {
		return false
	}
	b.Profiles, a.Profiles = nil, nil
	return reflect.DeepEqual(b, a) && sameProfiles(before, after, name)
}

// sameProfiles: every profile but name is unchanged.
func sameProfiles(before, after *Config, name string) bool {
	if len(before.Profiles) != len(after.Profiles) {
		return false
	}
	for n, p := range before.Profiles {
		if n != name && (after.Profiles[n] == nil || !reflect.DeepEqual(unplaced(p), unplaced(after.Profiles[n]))) {
			return false
		}
	}
	return true
}

// unplaced is p without where its keys are in the file (an edit above
// them moves them) nor the errors that carry those places.
func unplaced(p *Profile) Profile {
	c := *p
	c.imageLine, c.volumeLines, c.envErrs, c.guard, c.file = 0, nil, nil, nil, ""
	return c
}
