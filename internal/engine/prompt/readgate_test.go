package prompt

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/lazaret-dev/lazaret/internal/cli/ptytest"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// clock is a fake clock for the gate.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// typeAhead is the cadence of issue 33: a key every 50-200 ms.
var typeAhead = []time.Duration{50, 200, 60, 90, 150}

func TestReadGateDeadline(t *testing.T) {
	c := newClock()
	g := NewReadGate(time.Second, c.now)
	if g.OpenAt(c.now().Add(time.Hour)) {
		t.Fatal("open before anything was drawn")
	}
	g.Drawn()
	drawn := c.now()
	for _, tc := range []struct {
		at   time.Duration
		open bool
	}{{0, false}, {time.Second - time.Nanosecond, false}, {time.Second, true}, {time.Second + time.Nanosecond, true}} {
		if got := g.OpenAt(drawn.Add(tc.at)); got != tc.open {
			t.Errorf("key at +%v: open %v, want %v", tc.at, got, tc.open)
		}
	}
	// A change closes it, whatever time it is, until drawn again.
	c.advance(5 * time.Second)
	g.Change()
	if g.OpenAt(c.now().Add(time.Hour)) {
		t.Fatal("open after a change that was not drawn")
	}
	g.Drawn()
	if g.Admit() || g.Dropped() != 1 {
		t.Fatalf("admitted at once after the redraw (dropped %d)", g.Dropped())
	}
	c.advance(time.Second)
	if !g.Admit() {
		t.Fatal("closed a second after the redraw")
	}
}

// TestReadGateCountsFromTheWrite: with an asynchronous renderer the delay
// counts from the end of the first write that started after the view was
// handed over, not from the change nor from an older frame's write.
func TestReadGateCountsFromTheWrite(t *testing.T) {
	c := newClock()
	g := NewReadGate(time.Second, c.now)
	e := g.Change()
	w := g.beginWrite() // a frame the renderer had before the hand-over
	c.advance(10 * time.Millisecond)
	g.endWrite(w)
	if _, ok := g.Deadline(); ok {
		t.Fatal("an older frame's write counted as drawing the change")
	}
	g.HandOver(e)
	c.advance(300 * time.Millisecond) // the renderer is slow
	w = g.beginWrite()
	c.advance(20 * time.Millisecond)
	g.endWrite(w)
	dl, ok := g.Deadline()
	if !ok || !dl.Equal(c.now().Add(time.Second)) {
		t.Fatalf("deadline %v %v, want a second after the write's end", dl, ok)
	}
	// A later write (the notice, a note) does not move it.
	c.advance(500 * time.Millisecond)
	g.endWrite(g.beginWrite())
	if dl2, _ := g.Deadline(); !dl2.Equal(dl) {
		t.Fatal("a write of the same content restarted the gate")
	}
	// A hand-over of an epoch already replaced counts for nothing.
	e2 := g.Change()
	g.HandOver(e)
	g.endWrite(g.beginWrite())
	if _, ok := g.Deadline(); ok {
		t.Fatal("a stale hand-over drew the new content")
	}
	if !g.DrawnBy(e2) || g.DrawnBy(e) {
		t.Fatal("DrawnBy")
	}
}

// draw plays the renderer: the view of the current epoch is handed over
// and written now.
func draw(m *Model) {
	g := m.ReadGate()
	g.HandOver(g.Epoch())
	g.endWrite(g.beginWrite())
}

// gatedModel is a model on an 80x24 terminal with a gate of delay d on
// clock c, its first frame drawn.
func gatedModel(c *clock, d time.Duration, r escprompt.PromptRequest, decide func(Decision)) *Model {
	m := New(r, resolver, decide)
	m.SetReadGate(NewReadGate(d, c.now))
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	draw(m)
	return m
}

// TestTypeAheadDoesNotAnswer is issue 33 at the model: the keys of
// "cat", "exit" and others arrive 50-200 ms apart right after the prompt
// was drawn; none answers (A, D, E, Q, Ctrl-C, Enter, Escape). The notice
// is shown. Once the gate is open, A approves. Control: with no delay
// (the prompt before the gate) the same type-ahead approves.
func TestTypeAheadDoesNotAnswer(t *testing.T) {
	// Eight keys in 860 ms: every one inside the gate.
	keys := []tea.KeyPressMsg{key("a"), key("A"), key("d"), key("e"), key("q"),
		{Code: 'c', Mod: tea.ModCtrl}, key("enter"), key("esc")}
	for _, delay := range []time.Duration{MinReadable, 0} {
		c := newClock()
		rec := &recorder{}
		m := gatedModel(c, delay, req("r1", "touch", "/tmp/pwned"), rec.decide)
		for i, k := range keys {
			c.advance(typeAhead[i%len(typeAhead)] * time.Millisecond)
			m.Update(k)
		}
		if delay == 0 {
			if len(rec.got) == 0 || rec.got[0].Answer.Action != escprompt.Approve {
				t.Fatalf("control: the type-ahead 'a' did not approve without the gate: %+v", rec.got)
			}
			continue
		}
		if len(rec.got) != 0 || m.mode != viewing || m.done {
			t.Fatalf("type-ahead answered: %+v (mode %v, done %v)", rec.got, m.mode, m.done)
		}
		if got := m.ReadGate().Dropped(); got != len(keys) {
			t.Errorf("dropped %d keys, want %d", got, len(keys))
		}
		if !strings.Contains(plain(m.Render()), IgnoredNotice) {
			t.Fatalf("no notice:\n%s", plain(m.Render()))
		}
		dl, _ := m.ReadGate().Deadline()
		c.advance(dl.Sub(c.now()))
		m.Update(key("a"))
		if len(rec.got) != 1 || rec.got[0].Answer.Action != escprompt.Approve {
			t.Fatalf("A at the deadline: %+v", rec.got)
		}
	}
}

// TestGateAroundTheDeadline: a key a nanosecond before the deadline is
// dropped, one at it counts; the notice drawn meanwhile does not move it.
func TestGateAroundTheDeadline(t *testing.T) {
	for _, k := range []string{"a", "d", "q"} {
		c := newClock()
		rec := &recorder{}
		m := gatedModel(c, time.Second, req("r1", "touch", "x"), rec.decide)
		c.advance(time.Second - time.Nanosecond)
		m.Update(key(k))
		draw(m) // the notice's frame
		if len(rec.got) != 0 {
			t.Fatalf("%s a nanosecond early answered", k)
		}
		c.advance(time.Nanosecond)
		m.Update(key(k))
		if len(rec.got) != 1 {
			t.Fatalf("%s at the deadline did not answer", k)
		}
	}
}

// TestGateRestartsOnNewContent: a resize, an edited command shown again,
// the next request after a cancel, and lines scrolled into view each
// close the gate until their frame was readable; a note does not.
func TestGateRestartsOnNewContent(t *testing.T) {
	c := newClock()
	rec := &recorder{}
	m := gatedModel(c, time.Second, req("r1", "make", "x"), rec.decide)
	open := func() { t.Helper(); c.advance(time.Second); draw(m); c.advance(time.Second) }
	restarted := func(what string, act func()) {
		t.Helper()
		open()
		if !m.ReadGate().OpenAt(c.now()) {
			t.Fatalf("%s: gate not open before", what)
		}
		act()
		if m.ReadGate().OpenAt(c.now()) {
			t.Fatalf("%s: gate still open", what)
		}
		draw(m)
		c.advance(999 * time.Millisecond)
		if m.ReadGate().OpenAt(c.now()) {
			t.Fatalf("%s: open before its frame was readable", what)
		}
	}
	restarted("resize", func() { m.Update(tea.WindowSizeMsg{Width: 100, Height: 30}) })
	restarted("height", func() { m.Update(tea.WindowSizeMsg{Width: 100, Height: 31}) })
	open()
	m.Update(key("e"))
	m.Update(key("ctrl+u"))
	typeText(m, "touch /tmp/other")
	restarted("edit", func() { m.Update(key("enter")) })
	m.Update(AddMsg{Request: req("r2", "rm", "-rf", "/")})
	open()
	if !m.ReadGate().OpenAt(c.now()) {
		t.Fatal("a queued request closed the gate of the shown one")
	}
	restarted("cancel of the shown request", func() { m.Update(CancelMsg{RequestID: "r1"}) })
	if !strings.Contains(plain(m.Render()), `"/"`) {
		t.Fatalf("r2 not shown:\n%s", plain(m.Render()))
	}
	m.Update(key("a")) // dropped: r2 not readable yet
	if len(rec.got) != 0 {
		t.Fatalf("decisions %+v", rec.got)
	}

	long := gatedModel(c, time.Second, longRequest(300), rec.decide)
	m = long
	restarted("scroll", func() { m.Update(key("pgdown")) })
	open()
	m.Update(key("a")) // a note: A is refused
	if !strings.Contains(plain(m.Render()), "A is refused") || !m.ReadGate().OpenAt(c.now()) {
		t.Fatal("a note closed the gate")
	}
}

// TestGateDropsEditKeys: Enter of an edit before its re-show was readable
// does not apply it; keys typed into the editor only count once open.
func TestGateDropsEditKeys(t *testing.T) {
	c := newClock()
	rec := &recorder{}
	m := gatedModel(c, time.Second, req("r1", "make", "x"), rec.decide)
	m.Update(key("e"))
	if m.mode != viewing {
		t.Fatal("E opened the editor before the gate")
	}
	c.advance(time.Second)
	m.Update(key("e"))
	m.Update(key("ctrl+u"))
	typeText(m, "make y")
	m.Update(key("enter"))
	draw(m)
	c.advance(500 * time.Millisecond)
	m.Update(key("a"))
	if len(rec.got) != 0 {
		t.Fatal("A approved an edit shown half a second ago")
	}
	c.advance(500 * time.Millisecond)
	m.Update(key("a"))
	if len(rec.got) != 1 || strings.Join(rec.got[0].Answer.Argv, " ") != "make y" {
		t.Fatalf("decisions %+v", rec.got)
	}
}

// chunks is a reader returning one chunk per Read, advancing the clock
// before each.
type chunks struct {
	c    *clock
	gaps []time.Duration
	data []string
}

func (r *chunks) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	r.c.advance(r.gaps[0])
	n := copy(p, r.data[0])
	r.gaps, r.data = r.gaps[1:], r.data[1:]
	return n, nil
}

func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGatedInputDropsByArrival: keys are judged when their first byte
// arrives; whole sequences are dropped, the terminal's replies and the
// paging keys pass, and keys that arrive once open pass unchanged.
func TestGatedInputDropsByArrival(t *testing.T) {
	c := newClock()
	g := NewReadGate(time.Second, c.now)
	g.Drawn()
	ms := time.Millisecond
	src := &chunks{c: c,
		gaps: []time.Duration{50 * ms, 150 * ms, 100 * ms, 100 * ms, 100 * ms, 100 * ms, 100 * ms, 299 * ms, 2 * ms, 200 * ms},
		data: []string{"ca", "t\r", "\x1b[?2026;2$y", "\x1b[1;5", "A", "é" + "\x1b[200~a\rq", "\x1b[201~", "\x1b", "[C", "a\x1b[Bd"}}
	var drops int
	out := readAll(t, newGatedInput(src, g, func() { drops++ }, true))
	// c a t \r | reply passes | Ctrl+Up split in two reads, dropped whole
	// (no "A" left) | é, the paste (one key) | Right split across the
	// deadline: it started before, so dropped whole | open: a, Down, d.
	if want := "\x1b[?2026;2$y" + "a\x1b[Bd"; out != want {
		t.Fatalf("passed %q, want %q", out, want)
	}
	if got := g.Dropped(); got != 8 {
		t.Fatalf("dropped %d keys, want 8 (c a t CR Ctrl+Up é paste Right)", got)
	}
	if drops == 0 {
		t.Fatal("onDrop not called")
	}
	// Paging keys pass while closed; a lone ESC times out and is a key.
	g2 := NewReadGate(time.Second, c.now)
	g2.Drawn()
	src = &chunks{c: c, gaps: []time.Duration{10 * ms, 100 * ms, 100 * ms}, data: []string{" jG\x1b[6~", "\x1b", "a"}}
	if out := readAll(t, newGatedInput(src, g2, nil, true)); out != " jG\x1b[6~" {
		t.Fatalf("paging keys: %q", out)
	}
	if g2.Dropped() != 2 {
		t.Fatalf("dropped %d, want 2 (Escape, a)", g2.Dropped())
	}
	// A prompt without paging drops them like any key.
	g3 := NewReadGate(time.Second, c.now)
	g3.Drawn()
	src = &chunks{c: c, gaps: []time.Duration{10 * ms}, data: []string{" jG\x1b[6~"}}
	if out := readAll(t, GateInput(src, g3, nil)); out != "" || g3.Dropped() != 4 {
		t.Fatalf("without paging: passed %q, dropped %d", out, g3.Dropped())
	}
}

// TestRunnerTypeAheadOnPTY is issue 33 through the real Runner and a
// terminal: keys (an "a" among them) typed 50-200 ms apart from the moment
// the prompt is on the screen do not answer it and the notice appears;
// an "a" once the prompt is readable approves. Control: with a delay of 0
// (no gate) the same type-ahead approves.
func TestRunnerTypeAheadOnPTY(t *testing.T) {
	for _, gate := range []bool{true, false} {
		p := ptytest.Open(t)
		r := &Runner{TTY: p.TTY, Resolve: resolver}
		if !gate {
			r.readDelay, r.readDelaySet = 0, true
		}
		t.Cleanup(r.Wait)
		ch := ask(r, req("r1", "touch", "/tmp/pwned"))
		p.WaitFor(t, "abort lazaret")
		start := time.Now()
		var answered *escprompt.Answer
		for i, k := range "cat ls -la" {
			time.Sleep(typeAhead[i%len(typeAhead)] * time.Millisecond)
			if time.Since(start) > MinReadable-150*time.Millisecond {
				break
			}
			p.Ptmx.Write([]byte(string(k)))
		}
		select {
		case a := <-ch:
			answered = &a
		case <-time.After(100 * time.Millisecond):
		}
		if !gate {
			if answered == nil || answered.Action != escprompt.Approve {
				t.Fatalf("control: type-ahead did not approve without the gate: %+v", answered)
			}
			continue
		}
		if answered != nil {
			t.Fatalf("type-ahead answered the prompt: %+v", answered)
		}
		p.WaitFor(t, "were ignored")
		readable(MinReadable)
		p.Ptmx.Write([]byte("a"))
		select {
		case a := <-ch:
			if a.Action != escprompt.Approve {
				t.Fatalf("answer after the delay: %v", a.Action)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("A after the delay did not answer")
		}
	}
}

// TestConfirmTypeAhead: a y and Enter typed before the question was
// readable do not confirm (and the notice is shown); typed after, they
// do. Control: with no delay the type-ahead confirms.
func TestConfirmTypeAhead(t *testing.T) {
	for _, tc := range []struct {
		delay     time.Duration
		late      string
		want      bool
		wantShown bool
	}{{MinReadable, "", false, true}, {MinReadable, "y\r", true, true}, {0, "", true, false}} {
		p := ptytest.Open(t)
		var out bytes.Buffer
		var mu sync.Mutex
		w := writerFunc(func(b []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(b) })
		done := make(chan bool, 1)
		go func() {
			ok, _ := confirm(p.TTY, w, "Discard? [y/N] ", NewReadGate(tc.delay, nil))
			done <- ok
		}()
		for i := 0; ; i++ {
			mu.Lock()
			shown := strings.Contains(out.String(), "Discard?")
			mu.Unlock()
			if shown {
				break
			}
			if i > 1000 {
				t.Fatal("question never shown")
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(80 * time.Millisecond)
		p.Ptmx.Write([]byte("y"))
		time.Sleep(150 * time.Millisecond)
		p.Ptmx.Write([]byte("\r"))
		if tc.late != "" {
			readable(tc.delay)
			p.Ptmx.Write([]byte(tc.late))
		}
		var got bool
		select {
		case got = <-done:
		case <-time.After(2 * time.Second):
			p.Ptmx.Write([]byte{3}) // no answer yet: Ctrl-C ends it
			got = <-done
		}
		mu.Lock()
		shown := strings.Contains(out.String(), IgnoredNotice)
		mu.Unlock()
		if got != tc.want || shown != tc.wantShown {
			t.Fatalf("delay %v late %q: confirmed %v notice %v, want %v %v", tc.delay, tc.late, got, shown, tc.want, tc.wantShown)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
