// Package capped bounds what lazaret takes from a writer it does not
// control (a child's output, a pod's answer, a daemon's log): the first
// bytes are kept or passed on, the rest dropped as if written, so an
// excess neither grows memory nor fails the writer's pipe.
package capped

import (
	"bytes"
	"io"
	"sync"
)

// Buffer keeps the first Max bytes written to it. Safe for concurrent
// writes (a child's stdout and stderr into one Buffer).
type Buffer struct {
	Max  int
	mu   sync.Mutex
	buf  bytes.Buffer
	over bool
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := max(b.Max-b.buf.Len(), 0)
	if len(p) > room {
		b.over = true
	}
	b.buf.Write(p[:min(len(p), room)])
	return len(p), nil
}

// Bytes is what was kept; it is the Buffer's own, not a copy.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Bytes()
}

func (b *Buffer) String() string { return string(b.Bytes()) }

// Len is how many bytes were kept.
func (b *Buffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// Truncated reports whether something was dropped.
func (b *Buffer) Truncated() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.over
}

// Writer passes the first n bytes written to it on to w.
type Writer struct {
	mu   sync.Mutex
	w    io.Writer
	left int
}

// NewWriter returns a Writer passing at most n bytes on to w.
func NewWriter(w io.Writer, n int) *Writer { return &Writer{w: w, left: n} }

func (l *Writer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := min(len(p), l.left); n > 0 {
		l.left -= n
		_, _ = l.w.Write(p[:n])
	}
	return len(p), nil
}
