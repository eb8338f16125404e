package config

import (
	"errors"
	"fmt"
	"strings"
)

// maxDetachKeys bounds a detach sequence: long enough for any sensible
// choice, short enough that the attach client's matcher stays trivial.
const maxDetachKeys = 8

// ParseDetachKeys reads a [session] detach_keys value: keys separated by
// commas, each `ctrl-X` (X a letter or one of @ [ \ ] ^ _) or one
// printable ASCII character, e.g. `ctrl-\,d` or `ctrl-p,ctrl-q`. It
// returns the bytes the terminal sends for the sequence.
func ParseDetachKeys(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("empty key sequence")
	}
	parts := strings.Split(s, ",")
	if len(parts) > maxDetachKeys {
		return nil, fmt.Errorf("%d keys, at most %d", len(parts), maxDetachKeys)
	}
	out := make([]byte, 0, len(parts))
	for _, p := range parts {
		b, err := detachKey(p)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// detachKey is the byte of one key of a detach sequence.
func detachKey(p string) (byte, error) {
	if rest, ok := strings.CutPrefix(strings.ToLower(p), "ctrl-"); ok && len(p) > len("ctrl-") {
		if len(rest) != 1 {
			return 0, fmt.Errorf("%q: want ctrl- and one character", p)
		}
		c := rest[0]
		switch {
		case c >= 'a' && c <= 'z':
			return c - 'a' + 1, nil
		case c == '@', c == '[', c == '\\', c == ']', c == '^', c == '_':
			return c - '@', nil
		}
		return 0, fmt.Errorf("%q: no control key for %q (want a letter or one of @ [ \\ ] ^ _)", p, rest)
	}
	if len(p) != 1 || p[0] < 0x21 || p[0] > 0x7e {
		return 0, fmt.Errorf("%q: want ctrl-X or one printable character", p)
	}
	return p[0], nil
}
