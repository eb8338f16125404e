package capped

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

func TestBuffer(t *testing.T) {
	b := &Buffer{Max: 5}
	if n, err := b.Write([]byte("abc")); n != 3 || err != nil || b.Truncated() {
		t.Fatalf("first write: %d %v %v", n, err, b.Truncated())
	}
	if n, err := b.Write([]byte("defgh")); n != 5 || err != nil {
		t.Fatalf("over the bound: %d %v, want every byte taken", n, err)
	}
	if b.String() != "abcde" || b.Len() != 5 || !b.Truncated() {
		t.Fatalf("kept %q (%d), truncated %v", b.String(), b.Len(), b.Truncated())
	}
	if n, _ := b.Write([]byte("x")); n != 1 || b.String() != "abcde" {
		t.Fatalf("after the bound: %d %q", n, b.String())
	}
}

// Concurrent writers (a child's stdout and stderr) never exceed the bound.
func TestBufferConcurrent(t *testing.T) {
	b := &Buffer{Max: 1000}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = b.Write([]byte("0123456789"))
			}
		}()
	}
	wg.Wait()
	if b.Len() != 1000 || !b.Truncated() {
		t.Fatalf("kept %d, truncated %v", b.Len(), b.Truncated())
	}
}

func TestWriter(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, 4)
	for _, s := range []string{"ab", "cdef", "gh"} {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("write %q: %d %v", s, n, err)
		}
	}
	if out.String() != "abcd" {
		t.Fatalf("passed on %q", out.String())
	}
	if strings.Contains(out.String(), "e") {
		t.Fatal("passed the bound")
	}
}
