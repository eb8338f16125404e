package gitsentry

import (
	"context"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/lazaret-dev/lazaret/internal/podman"
)

// SafeTerminal returns a writer that passes text to a terminal with every
// control character made visible except newline, tab and SGR color
// sequences (ESC [ digits/semicolons m). Diffs and logs show content the
// agent wrote; raw escape sequences in it could rewrite the screen (hide
// lines, fake a prompt) while the user reviews.
func SafeTerminal(w io.Writer) io.Writer { return &safeWriter{w: w} }

type safeWriter struct {
	w   io.Writer
	esc []byte // a pending escape sequence
	utf []byte // a pending incomplete UTF-8 sequence
}

func (s *safeWriter) Write(p []byte) (int, error) {
	out := make([]byte, 0, len(p)+16)
	for _, c := range p {
		if s.esc != nil {
			s.esc = append(s.esc, c)
			switch {
			case len(s.esc) == 2 && c == '[':
				continue
			case len(s.esc) > 2 && (c >= '0' && c <= '9' || c == ';') && len(s.esc) < 32:
				continue
			case len(s.esc) > 2 && c == 'm':
				out = append(out, s.esc...)
				s.esc = nil
				continue
			}
			// Not SGR: show the escape visibly, then reprocess the rest.
			rest := s.esc[1:]
			s.esc = nil
			out = append(out, `\e`...)
			for _, r := range rest {
				out = s.plain(out, r)
			}
			continue
		}
		if c == 0x1b {
			s.esc = []byte{c}
			continue
		}
		out = s.plain(out, c)
	}
	if _, err := s.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// plain handles one byte outside an escape sequence.
func (s *safeWriter) plain(out []byte, c byte) []byte {
	if len(s.utf) > 0 || c >= 0x80 {
		s.utf = append(s.utf, c)
		if !utf8.FullRune(s.utf) {
			if len(s.utf) < utf8.UTFMax {
				return out
			}
		}
		r, n := utf8.DecodeRune(s.utf)
		seq := s.utf[:n]
		s.utf = s.utf[n:]
		switch {
		case r == utf8.RuneError && n <= 1:
			out = fmt.Appendf(out, `\x%02x`, seq[0])
		case r >= 0x80 && r < 0xa0, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			// C1 controls and bidi overrides.
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, seq...)
		}
		if len(s.utf) > 0 {
			rest := s.utf
			s.utf = nil
			for _, b := range rest {
				out = s.plain(out, b)
			}
		}
		return out
	}
	if c == '\n' || c == '\t' || c >= 0x20 && c < 0x7f {
		return append(out, c)
	}
	return fmt.Appendf(out, `\x%02x`, c)
}

// UncommittedDiff runs `git diff` in the sandbox (the agent's uncommitted
// changes, which exist only in its clone) and copies the output to out.
// It is the agent's git printing the agent's files: the output is shown,
// never interpreted.
func UncommittedDiff(ctx context.Context, pc *podman.Client, container string, out, errOut io.Writer, stat bool) error {
	args := []string{"exec", container, "git", "-C", ContainerWorkspace, "--no-pager", "diff", "--no-color", "--no-ext-diff", "HEAD"}
	if stat {
		args = append(args, "--stat")
	}
	cmd := pc.Command(ctx, args...)
	cmd.Stdout, cmd.Stderr = out, errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git diff in the sandbox %s: %w", container, err)
	}
	return nil
}
