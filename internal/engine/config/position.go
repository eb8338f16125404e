package config

import (
	"bytes"
	"sort"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// keyPath is a TOML key path; array elements are written "[i]" as their
// own element, e.g. ["profiles", "claude", "volumes", "[0]", "host"].
type keyPath []string

func (p keyPath) child(k string) keyPath {
	c := make(keyPath, len(p), len(p)+1)
	copy(c, p)
	return append(c, k)
}

func (p keyPath) index(i int) keyPath { return p.child("[" + strconv.Itoa(i) + "]") }

// String renders the path as the user would write it, quoting parts that
// are not bare keys: profiles."a.b".image, network.allow_egress[0].
func (p keyPath) String() string {
	var b strings.Builder
	for i, part := range p {
		if strings.HasPrefix(part, "[") {
			b.WriteString(part)
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		if isBareKey(part) {
			b.WriteString(part)
		} else {
			b.WriteString(strconv.Quote(part))
		}
	}
	return b.String()
}

func isBareKey(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// positions maps each key path of a document to the line it is written on,
// so that validation errors found after decoding can still name a line.
type positions struct {
	lines    map[string]int
	newlines []int // offsets of '\n'
	// nul lists the keys whose name or string value holds a NUL byte
	// (written as \u0000): refused before decoding, whatever the key.
	nul []keyPath
}

func indexPositions(doc []byte) *positions {
	ps := &positions{lines: map[string]int{}}
	for i, c := range doc {
		if c == '\n' {
			ps.newlines = append(ps.newlines, i)
		}
	}
	var p unstable.Parser
	p.Reset(doc)
	var table keyPath
	arrayTables := map[string]int{} // [[x]] header → elements so far
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = nil
			it := e.Key()
			line := 0
			for it.Next() {
				if line == 0 {
					line = ps.line(it.Node())
				}
				if len(table) >= maxIndexDepth {
					continue
				}
				table = table.child(string(it.Node().Data))
				ps.checkNUL(table, it.Node())
				ps.set(table, line)
			}
			if e.Kind == unstable.ArrayTable {
				k := table.String()
				table = table.index(arrayTables[k])
				arrayTables[k]++
				ps.set(table, line)
			}
		case unstable.KeyValue:
			ps.keyValue(table, e, 0)
		}
	}
	// A parse error stops the walk; the decoder reports it with its own
	// position, so the partial index is only a fallback.
	return ps
}

// maxIndexDepth bounds the key depth indexed: the schema is at most five
// levels deep (profiles.x.volumes[0].host), and indexing a hostile document
// nested thousands of levels deep would cost quadratic time and memory.
const maxIndexDepth = 8

func (ps *positions) keyValue(prefix keyPath, kv *unstable.Node, parentLine int) {
	path := prefix
	line := 0
	it := kv.Key()
	for it.Next() {
		if len(path) >= maxIndexDepth {
			return
		}
		if line == 0 {
			line = ps.line(it.Node())
		}
		path = path.child(string(it.Node().Data))
		ps.checkNUL(path, it.Node())
		ps.set(path, line) // dotted keys also locate their tables
	}
	if line == 0 {
		line = parentLine
	}
	ps.set(path, line)
	ps.value(path, kv.Value(), line)
}

func (ps *positions) value(path keyPath, v *unstable.Node, line int) {
	if len(path) >= maxIndexDepth {
		return
	}
	switch v.Kind {
	case unstable.String:
		ps.checkNUL(path, v)
	case unstable.Array:
		i := 0
		it := v.Children()
		for it.Next() {
			n := it.Node()
			if n.Kind == unstable.Comment {
				continue
			}
			el := path.index(i)
			l := ps.line(n)
			if l == 0 {
				l = line
			}
			ps.set(el, l)
			ps.value(el, n, l)
			i++
		}
	case unstable.InlineTable:
		it := v.Children()
		for it.Next() {
			if n := it.Node(); n.Kind == unstable.KeyValue {
				ps.keyValue(path, n, line)
			}
		}
	}
}

func (ps *positions) checkNUL(p keyPath, n *unstable.Node) {
	if bytes.IndexByte(n.Data, 0) >= 0 {
		ps.nul = append(ps.nul, p)
	}
}

func (ps *positions) set(p keyPath, line int) {
	k := p.String()
	if _, ok := ps.lines[k]; !ok && line > 0 {
		ps.lines[k] = line
	}
}

// line returns the 1-based line of n, or 0 when n carries no position.
func (ps *positions) line(n *unstable.Node) int {
	if n == nil || n.Raw.Length == 0 {
		return 0
	}
	off := int(n.Raw.Offset)
	return sort.SearchInts(ps.newlines, off) + 1
}

// lookup returns the line of path, or of its nearest written ancestor
// (a missing key is reported on its table's line).
func (ps *positions) lookup(p keyPath) int {
	for n := len(p); n > 0; n-- {
		if l, ok := ps.lines[p[:n].String()]; ok {
			return l
		}
	}
	return 0
}
