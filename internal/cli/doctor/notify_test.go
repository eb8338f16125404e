package doctor

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/desktopnotify/desktoptest"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

func notifyConfig(t *testing.T, doc string) config.Notify {
	t.Helper()
	c, err := config.Parse("test.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return c.Notify
}

func byName(rs []Result) map[string]Result {
	m := map[string]Result{}
	for _, r := range rs {
		m[r.Name] = r
	}
	return m
}

// TestNotifyDesktop: a bus without a notification server is a warning
// with a fix; the same bus with one is ok.
func TestNotifyDesktop(t *testing.T) {
	addr := desktoptest.Bus(t)
	n := config.Notify{Desktop: true}
	r := byName(checkNotify(context.Background(), n, addr))["notify desktop"]
	if r.OK || !r.Warning || !strings.Contains(r.Detail, "no notification server") || r.Fix == "" {
		t.Fatalf("no server: %+v", r)
	}
	desktoptest.Serve(t, addr)
	if r := byName(checkNotify(context.Background(), n, addr))["notify desktop"]; !r.OK || !strings.Contains(r.Detail, "lazaret-test") {
		t.Fatalf("server: %+v", r)
	}
	if r := byName(checkNotify(context.Background(), n, "unix:path=/nonexistent/bus"))["notify desktop"]; r.OK || !r.Warning {
		t.Fatalf("no bus: %+v", r)
	}
}

// TestNotifyEndpoints: a TLS receiver is reached and its certificate
// checked (the test's own CA is not trusted: the handshake ran), a
// closed port is a warning, a loopback http receiver is ok; nothing is
// posted to either.
func TestNotifyEndpoints(t *testing.T) {
	t.Setenv("LZT_HOOK", "k")
	posted := 0
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { posted++ }))
	defer tlsSrv.Close()
	plain := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { posted++ }))
	defer plain.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()

	rs := byName(checkNotify(context.Background(), notifyConfig(t, `[notify]
webhook = { url = "`+tlsSrv.URL+`/hook", secret = "env:LZT_HOOK" }
ntfy = { url = "http://`+closed+`", topic = "t" }
`), ""))
	if r := rs["notify webhook"]; r.OK || !strings.Contains(r.Detail, "certificate not trusted") {
		t.Errorf("untrusted TLS receiver: %+v", r)
	}
	if r := rs["notify ntfy"]; r.OK || !r.Warning || !strings.Contains(r.Detail, "refused") {
		t.Errorf("closed port: %+v", r)
	}
	if r := rs["notify webhook secret"]; !r.OK {
		t.Errorf("secret: %+v", r)
	}
	rs = byName(checkNotify(context.Background(), notifyConfig(t, `[notify]
ntfy = { url = "`+plain.URL+`", topic = "t" }
command = ["lazaret-no-such-notifier"]
`), ""))
	if r := rs["notify ntfy"]; !r.OK {
		t.Errorf("loopback http: %+v", r)
	}
	if r := rs["notify command"]; r.OK || !r.Warning || r.Fix == "" {
		t.Errorf("missing command: %+v", r)
	}
	if posted != 0 {
		t.Errorf("doctor posted %d requests", posted)
	}
}

func TestNotifySecretAndCommand(t *testing.T) {
	n := notifyConfig(t, "[notify]\nwebhook = { url = \"https://127.0.0.1:1/\", secret = \"env:LZT_UNSET_HOOK\" }\ncommand = [\"/bin/true\"]\n")
	rs := byName(checkNotify(context.Background(), n, ""))
	if r := rs["notify webhook secret"]; r.OK || !strings.Contains(r.Detail, "LZT_UNSET_HOOK is not set") {
		t.Errorf("unset secret: %+v", r)
	}
	if r := rs["notify command"]; !r.OK || r.Detail != "/bin/true" {
		t.Errorf("command: %+v", r)
	}
}
