//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/coordinator/escalation"
	"github.com/lazaret-dev/lazaret/internal/engine/eschost"
	"github.com/lazaret-dev/lazaret/internal/engine/session"
	"github.com/lazaret-dev/lazaret/internal/engine/trust"
	"github.com/lazaret-dev/lazaret/internal/wire/escwire"
)

// rawSenderRole makes this test binary, copied into a sandbox, act as a
// hostile client of the escalation socket: it speaks mutual TLS with the
// sandbox's own certificate (which every process in the sandbox can read)
// and sends whatever bytes the test wrote, unchecked.
const rawSenderRole = "LAZARET_IT_RAW_SENDER"

func init() {
	if os.Getenv(rawSenderRole) == "" {
		return
	}
	os.Exit(rawSend(os.Args[1:]))
}

// rawSend sends each file named in args (FILE or FILE*N for N concurrent
// connections carrying the same bytes) on its own connection and prints
// one line per connection: the final frame's type and code, or "closed".
func rawSend(args []string) int {
	cfg, _, err := trust.ClientConfig(escalation.SandboxTLSDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	for _, a := range args {
		name, n := a, 1
		if i := strings.LastIndexByte(a, '*'); i > 0 {
			n, _ = strconv.Atoi(a[i+1:])
			name = a[:i]
		}
		data, err := os.ReadFile(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		results := make([]string, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				results[i] = sendOne(cfg, data)
			})
		}
		close(start)
		wg.Wait()
		for _, r := range results {
			fmt.Println(r)
		}
	}
	return 0
}

func sendOne(cfg *tls.Config, data []byte) string {
	raw, err := net.DialTimeout("unix", escalation.SandboxSocket, 10*time.Second)
	if err != nil {
		return "dial: " + err.Error()
	}
	c := tls.Client(raw, cfg)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if err := c.Handshake(); err != nil {
		return "handshake: " + err.Error()
	}
	// Write in the background: the server may stop reading an oversized
	// request and answer (or close) before the whole of it is sent.
	go func() { _, _ = c.Write(data) }()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 0, 64<<10), 32<<20)
	last := "closed"
	for sc.Scan() {
		var f escwire.Frame
		if json.Unmarshal(sc.Bytes(), &f) != nil {
			return "garbage"
		}
		switch f.Type {
		case escwire.FrameExit:
			return "exit " + strconv.Itoa(f.Code)
		case escwire.FrameDenied, escwire.FrameError:
			return f.Type
		}
		last = "partial " + f.Type
	}
	if err := sc.Err(); err != nil {
		return last + ": " + err.Error()
	}
	return last
}

// signedRequest builds a genuine request of session s for the rig's
// sandbox, then lets mutate change it before it is signed.
func (r *escRig) signedRequest(s *session.Anchor, argv []string, mutate func(*escwire.Request)) []byte {
	r.t.Helper()
	d, err := s.Delegate(r.anchor.Hash, time.Hour, time.Now())
	if err != nil {
		r.t.Fatal(err)
	}
	req := &escwire.Request{RequestID: escwire.RandomID(), SessionID: d.SessionID, Profile: r.anchor.Profile,
		Cwd: "/workspace", Argv: argv, Justification: "protocol test",
		Timestamp: time.Now().UnixMilli(), Nonce: escwire.RandomID(), Delegation: d.Delegation}
	if mutate != nil {
		mutate(req)
	}
	if err := req.Sign(d.Key); err != nil {
		r.t.Fatal(err)
	}
	js, err := req.Encode()
	if err != nil {
		r.t.Fatal(err)
	}
	return js
}

// send writes each payload into the workspace and has the raw sender in
// the sandbox deliver it, copies concurrent connections each.
func (r *escRig) send(copies int, payloads ...[]byte) []string {
	r.t.Helper()
	self, err := os.Executable()
	if err != nil {
		r.t.Fatal(err)
	}
	sender := filepath.Join(r.anchor.Workspace, ".raw-sender")
	if _, err := os.Stat(sender); err != nil {
		copyFile(r.t, self, sender, 0o755)
	}
	args := []string{rawSenderRole + "=1", "/workspace/.raw-sender"}
	for i, p := range payloads {
		name := fmt.Sprintf(".req-%d-%d", time.Now().UnixNano(), i)
		if err := os.WriteFile(filepath.Join(r.anchor.Workspace, name), p, 0o644); err != nil {
			r.t.Fatal(err)
		}
		args = append(args, fmt.Sprintf("/workspace/%s*%d", name, copies))
	}
	out, errOut, code := r.exec(nil, append([]string{"env"}, args...)...)
	if code != 0 {
		r.t.Fatalf("raw sender: exit %d, %s", code, errOut)
	}
	return strings.Split(strings.TrimSpace(out), "\n")
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func (r *escRig) rejectionsAt(stage string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Kind == eschost.EventRejected && e.Stage == stage {
			n++
		}
	}
	return n
}

// TestEscalationProtocolAbuse attacks the escalation socket from inside a
// real runsc sandbox at the protocol level, with the sandbox's genuine
// client certificate: replays (one after the other and concurrently),
// stale and future timestamps, another session's identity, a 16 MiB
// request, malformed JSON, unknown fields and trailing data. Each must be
// refused without running anything, recorded at its verification stage,
// and the coordinator must still answer a genuine request afterwards. The
// positive control of every case is the genuine request it was derived
// from, sent the same way, which runs ("exit 0" comes only after the host
// command ran).
func TestEscalationProtocolAbuse(t *testing.T) {
	r := newEscRig(t, []string{"pwd"})
	pwd := []string{"pwd"}
	genuine := func() []byte { return r.signedRequest(r.sess, pwd, nil) }
	stillAnswers := func(t *testing.T) {
		t.Helper()
		if got := r.send(1, genuine()); len(got) != 1 || got[0] != "exit 0" {
			t.Fatalf("a genuine request after the attack: %q", got)
		}
	}

	t.Run("replay after use", func(t *testing.T) {
		req := genuine()
		got := r.send(1, req, req)
		if len(got) != 2 || got[0] != "exit 0" || got[1] != escwire.FrameError {
			t.Fatalf("original then replay: %q", got)
		}
		if r.rejectionsAt(eschost.StageReplay) == 0 {
			t.Fatal("the replay was not recorded at the replay stage")
		}
		stillAnswers(t)
	})

	t.Run("concurrent replays run once", func(t *testing.T) {
		got := r.send(12, genuine())
		ran := 0
		for _, g := range got {
			switch g {
			case "exit 0":
				ran++
			case escwire.FrameError:
			default:
				t.Fatalf("unexpected answer %q in %q", g, got)
			}
		}
		if len(got) != 12 || ran != 1 {
			t.Fatalf("12 copies of one request ran %d times: %q", ran, got)
		}
		stillAnswers(t)
	})

	t.Run("stale and future timestamps", func(t *testing.T) {
		before := r.rejectionsAt(eschost.StageReplay)
		stale := r.signedRequest(r.sess, pwd, func(q *escwire.Request) { q.Timestamp = time.Now().Add(-5 * time.Minute).UnixMilli() })
		future := r.signedRequest(r.sess, pwd, func(q *escwire.Request) { q.Timestamp = time.Now().Add(5 * time.Minute).UnixMilli() })
		if got := r.send(1, stale, future); len(got) != 2 || got[0] != escwire.FrameError || got[1] != escwire.FrameError {
			t.Fatalf("stale, future: %q", got)
		}
		if r.rejectionsAt(eschost.StageReplay) != before+2 {
			t.Fatal("timestamp rejections not recorded at the replay stage")
		}
		stillAnswers(t)
	})

	t.Run("another terminal's session", func(t *testing.T) {
		// A second registered session (another terminal). A request that
		// names it but is signed with the first session's delegation, and
		// one with its delegation but the first session's id, are both
		// refused; each session's own genuine request runs.
		other, _ := session.New()
		if _, err := r.comp.Registry().Register(&eschost.Session{ID: other.ID, Public: other.Public, Prompt: r.prompt}); err != nil {
			t.Fatal(err)
		}
		wrongID := r.signedRequest(r.sess, pwd, func(q *escwire.Request) { q.SessionID = other.ID })
		theirs := r.signedRequest(other, pwd, func(q *escwire.Request) { q.SessionID = r.sess.ID })
		own := r.signedRequest(other, pwd, nil)
		got := r.send(1, wrongID, theirs, own)
		if len(got) != 3 || got[0] != escwire.FrameError || got[1] != escwire.FrameError || got[2] != "exit 0" {
			t.Fatalf("mixed identities, then the other session's own request: %q", got)
		}
	})

	t.Run("oversized, malformed and strict-JSON violations", func(t *testing.T) {
		before := r.rejectionsAt(eschost.StageDecode)
		huge := append(bytes.Repeat([]byte("A"), 16<<20), '\n')
		genuineJSON := genuine()
		unknown := bytes.Replace(genuineJSON, []byte(`{"request_id"`), []byte(`{"x":1,"request_id"`), 1)
		trailing := append(bytes.Clone(bytes.TrimSuffix(genuineJSON, []byte("\n"))), []byte(` {}`+"\n")...)
		bad := [][]byte{huge, []byte("{not json\n"), []byte("\n"), unknown, trailing, []byte("\x00\xff\xfe\n")}
		got := r.send(1, bad...)
		if len(got) != len(bad) {
			t.Fatalf("answers: %q", got)
		}
		for i, g := range got {
			if g != escwire.FrameError && g != "closed" {
				t.Errorf("payload %d: %q", i, g)
			}
		}
		if r.rejectionsAt(eschost.StageDecode) < before+len(bad)-1 {
			t.Errorf("decode rejections: %d new, want at least %d", r.rejectionsAt(eschost.StageDecode)-before, len(bad)-1)
		}
		// Control: the request the unknown-field and trailing-data cases
		// were made from is itself genuine, and the coordinator answers.
		if got := r.send(1, genuineJSON); got[0] != "exit 0" {
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("control: the genuine request they were made from: %q; last events %+v", got, r.events[max(0, len(r.events)-3):])
		}
	})

	t.Run("tampered signature", func(t *testing.T) {
		req := genuine()
		tampered := bytes.Replace(req, []byte(`"argv":["pwd"]`), []byte(`"argv":["pwd","-P"]`), 1)
		if bytes.Equal(req, tampered) {
			t.Fatal("test: argv not found in the encoding")
		}
		before := r.rejectionsAt(eschost.StageSignature)
		if got := r.send(1, tampered); got[0] != escwire.FrameError || r.rejectionsAt(eschost.StageSignature) != before+1 {
			t.Fatalf("tampered argv: %q", got)
		}
		stillAnswers(t)
	})
}
