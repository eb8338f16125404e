package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/desktopnotify/desktoptest"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/events"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

const testSecret = "whsec-test-key"

// receiver is an HTTPS webhook endpoint that verifies as docs/NOTIFY.md
// tells a receiver to: the signature over "timestamp.body" under its
// secret, and a timestamp within five minutes.
type receiver struct {
	secret   string
	srv      *httptest.Server
	got      chan Notice
	attempts atomic.Int32
	refused  atomic.Int32
	// status, when set, is answered to every request after verifying.
	status int
	// hang holds every request until the test ends.
	hang chan struct{}
}

func newReceiver(t *testing.T, secret string) *receiver {
	r := &receiver{secret: secret, got: make(chan Notice, 4096)}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() {
		if r.hang != nil {
			close(r.hang)
		}
		r.srv.Close()
	})
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	r.attempts.Add(1)
	if r.hang != nil {
		<-r.hang
		return
	}
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if !Verify([]byte(r.secret), req.Header.Get(HeaderTimestamp), req.Header.Get(HeaderSignature), body, time.Now()) {
		r.refused.Add(1)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	if r.status != 0 {
		w.WriteHeader(r.status)
		return
	}
	var n Notice
	if err := json.Unmarshal(body, &n); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.got <- n
}

// Verify is the receiver's check, as docs/NOTIFY.md writes it.
func Verify(secret []byte, ts, sig string, body []byte, now time.Time) bool {
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || now.Sub(time.Unix(t, 0)).Abs() > 5*time.Minute {
		return false
	}
	return hmac.Equal([]byte(sig), []byte(Sign(secret, t, body)))
}

type harness struct {
	hub  *events.Hub
	svc  *desktoptest.Service
	recv *receiver
	log  *bytes.Buffer
	stop func()
}

// start runs the notifiers of cfg on a fresh hub, the desktop on a
// private bus, the webhook (if cfg has one) on r.
func start(t *testing.T, cfg config.Notify, r *receiver, opts ...Option) *harness {
	t.Helper()
	h := &harness{hub: events.New("dev", "/home/u/src/project"), recv: r, log: &bytes.Buffer{}}
	if cfg.Desktop {
		addr := desktoptest.Bus(t)
		h.svc = desktoptest.Serve(t, addr)
		opts = append(opts, WithBusAddress(addr))
	}
	if r != nil {
		cfg.Webhook = &config.Webhook{URL: r.srv.URL + "/hook"}
		opts = append(opts, WithHTTPClient(r.srv.Client()), WithSecret(testSecret))
	}
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: h.log}, nil))
	h.stop = Start(context.Background(), cfg, h.hub, log, opts...)
	t.Cleanup(h.stop)
	return h
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func pending(id, detail string) ctl.Event {
	return ctl.Event{Kind: ctl.EventApprovalPending, Session: "s1", Request: id, RequestKind: ctl.RequestEscalation, Detail: detail}
}

func TestDesktopAndSignedWebhook(t *testing.T) {
	r := newReceiver(t, testSecret)
	h := start(t, config.Notify{Desktop: true}, r)
	h.hub.Publish(ctl.Event{Kind: ctl.EventSessionStarted, Session: "s1"}) // not notified
	h.hub.Publish(pending("r-7", "rm -rf /"))
	call := <-h.svc.Calls
	if !strings.Contains(call.Summary, "approval needed") || !strings.Contains(call.Summary, "dev") ||
		!strings.Contains(call.Body, "workspace project") || !strings.Contains(call.Body, "request r-7") ||
		strings.Contains(call.Body, "/home/u") || len(call.Actions) != 0 {
		t.Errorf("desktop call %+v", call)
	}
	n := <-r.got
	if n.Kind != ctl.EventApprovalPending || n.Request != "r-7" || n.Workspace != "project" || n.Profile != "dev" || n.Seq != 2 || n.V != ctl.EventsVersion {
		t.Errorf("webhook notice %+v", n)
	}
	if n.Detail != "" || strings.Contains(call.Body, "rm -rf") {
		t.Errorf("include_request = false carried the request's text: %+v / %q", n, call.Body)
	}
}

// TestWebhookWrongSecretRefused is the positive control of the HMAC
// check: the same receiver refuses what another key signed, and a 401 is
// not retried.
func TestWebhookWrongSecretRefused(t *testing.T) {
	r := newReceiver(t, "another-key")
	h := start(t, config.Notify{}, r, WithBackoff(time.Millisecond))
	h.hub.Publish(pending("r-1", ""))
	h.stop()
	if r.refused.Load() != 1 || r.attempts.Load() != 1 || len(r.got) != 0 {
		t.Fatalf("refused %d of %d attempts, accepted %d", r.refused.Load(), r.attempts.Load(), len(r.got))
	}
	if !Verify([]byte(testSecret), "100", Sign([]byte(testSecret), 100, []byte("b")), []byte("b"), time.Unix(100, 0)) ||
		Verify([]byte(testSecret), "100", Sign([]byte(testSecret), 100, []byte("b")), []byte("b"), time.Unix(1000, 0)) {
		t.Fatal("the timestamp window is not checked")
	}
}

// TestBadWebhookNeverDelaysDesktop: a webhook that hangs, answers 500 or
// refuses the connection; the desktop notification of every event still
// arrives, and the retries are bounded.
func TestBadWebhookNeverDelaysDesktop(t *testing.T) {
	for _, mode := range []string{"hang", "500", "refused"} {
		t.Run(mode, func(t *testing.T) {
			r := newReceiver(t, testSecret)
			switch mode {
			case "hang":
				r.hang = make(chan struct{})
			case "500":
				r.status = http.StatusInternalServerError
			case "refused":
				r.srv.Close()
			}
			h := start(t, config.Notify{Desktop: true}, r, WithBackoff(time.Millisecond))
			for i := range 3 {
				h.hub.Publish(pending("r-"+strconv.Itoa(i), ""))
				if c := <-h.svc.Calls; !strings.Contains(c.Body, "request r-"+strconv.Itoa(i)) {
					t.Fatalf("desktop call %+v", c)
				}
			}
			if mode == "500" {
				h.stop()
				if got := r.attempts.Load(); got != 3*MaxAttempts {
					t.Fatalf("%d attempts for 3 notices, want %d", got, 3*MaxAttempts)
				}
			}
		})
	}
}

func TestIncludeRequest(t *testing.T) {
	const detail = `<b>curl</b> evil.test &amp; <a href="http://x">` + "\x1b[31m"
	r := newReceiver(t, testSecret)
	h := start(t, config.Notify{Desktop: true, IncludeRequest: true}, r)
	h.hub.Publish(pending("r-1", detail+strings.Repeat("x", 500)))
	call := <-h.svc.Calls
	n := <-r.got
	if !strings.Contains(call.Body, "&lt;b&gt;curl&lt;/b&gt; evil.test &amp;amp; &lt;a href=&quot;") || strings.Contains(call.Body, "<") {
		t.Errorf("desktop body not escaped: %q", call.Body)
	}
	if !strings.HasPrefix(n.Detail, `<b>curl</b> evil.test &amp; <a href="http://x">\x1b[31m`) || strings.ContainsRune(n.Detail, 0x1b) {
		t.Errorf("webhook detail %q", n.Detail)
	}
	if len([]rune(n.Detail)) != MaxDetail {
		t.Errorf("detail of %d characters, want at most %d", len([]rune(n.Detail)), MaxDetail)
	}
}

// TestFloodIsBounded: 1000 denials and 1000 pending requests become a
// bounded number of notifications, the merged ones counted.
func TestFloodIsBounded(t *testing.T) {
	r := newReceiver(t, testSecret)
	h := start(t, config.Notify{Desktop: true}, r)
	for i := range 1000 {
		h.hub.Publish(ctl.Event{Kind: ctl.EventNetDenied, Session: "s1"})
		h.hub.Publish(pending("r-"+strconv.Itoa(i), ""))
	}
	h.stop()
	calls, merged := 0, 0
	for len(h.svc.Calls) > 0 {
		calls++
		c := <-h.svc.Calls
		if strings.Contains(c.Body, "events since the last notification") {
			merged++
		}
	}
	var counted int
	for len(r.got) > 0 {
		counted += max(1, (<-r.got).Merged)
	}
	// One denial, 30 pending, then one summary of each kind. The merged
	// counts add up to the flood, less what the dispatcher missed if it
	// fell behind further than the hub keeps (logged).
	missed := 0
	for _, l := range strings.Split(h.log.String(), "\n") {
		if _, c, ok := strings.Cut(l, "events missed while behind\" count="); ok {
			n, _ := strconv.Atoi(c)
			missed += n
		}
	}
	if calls != 1+PendingPerMinute+2 || merged != 2 || counted+missed != 2000 {
		t.Fatalf("%d desktop calls (%d merged), webhook counted %d events, %d missed\n%s", calls, merged, counted, missed, h.log)
	}
}

func TestNoBusIsOneWarning(t *testing.T) {
	h := &harness{hub: events.New("dev", "/w"), log: &bytes.Buffer{}}
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: h.log}, nil))
	stop := Start(context.Background(), config.Notify{Desktop: true}, h.hub, log, WithBusAddress("unix:path=/nonexistent/bus"))
	for i := range 50 {
		h.hub.Publish(pending("r-"+strconv.Itoa(i), ""))
	}
	stop()
	if n := strings.Count(h.log.String(), "level=WARN"); n != 1 || !strings.Contains(h.log.String(), "no desktop notifications") {
		t.Fatalf("%d warnings:\n%s", n, h.log.String())
	}
}
