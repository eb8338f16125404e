package termgate

import "io"

// Notice writes one line of lazaret's own (a network denial) to w between
// the command's output lines. Through a gate (TTY mode, terminal raw) it
// waits while a prompt has the terminal, starts on a fresh line when the
// command's output stopped mid-line, and ends with "\r\n"; a nil gate
// (plain mode, where the command writes to the same stderr directly)
// writes the line in one write.
func (g *Gate) Notice(w io.Writer, line string) {
	if g == nil {
		_, _ = io.WriteString(w, line+"\n")
		return
	}
	g.mu.Lock()
	for g.paused {
		g.cond.Wait()
	}
	g.mu.Unlock()
	g.out.Lock()
	defer g.out.Unlock()
	text := line + "\r\n"
	if g.midLine {
		text = "\r\n" + text
	}
	_, _ = io.WriteString(w, text)
	g.midLine = false
}
