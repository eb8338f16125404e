package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/secretfetch"
	"github.com/lazaret-dev/lazaret/internal/version"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// The webhook's signature headers (docs/NOTIFY.md: how a receiver
// verifies them).
const (
	HeaderTimestamp = "X-Lazaret-Timestamp"
	HeaderSignature = "X-Lazaret-Signature"
	HeaderEvent     = "X-Lazaret-Event"
)

// Delivery bounds: attempts per notice, each attempt's time, the longest
// wait between two.
const (
	MaxAttempts    = 5
	attemptTimeout = 10 * time.Second
	maxBackoff     = 30 * time.Second
)

// Sign is the signature header's value for body sent at ts (unix
// seconds): "sha256=" and the hex HMAC-SHA256 of "ts.body" under secret.
// The timestamp inside the MAC lets a receiver refuse a replay.
func Sign(secret []byte, ts int64, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// poster POSTs with bounded retries: a network error, 429 or 5xx is
// tried again after 1, 2, 4… backoff units, at most MaxAttempts times;
// any other answer is final.
type poster struct {
	label   string
	client  *http.Client
	backoff time.Duration
	log     *slog.Logger
	// request builds each attempt's request (a webhook signs each with
	// its own timestamp).
	request func(ctx context.Context, n Notice) (*http.Request, error)
}

func newClient(c *http.Client) *http.Client {
	if c == nil {
		c = &http.Client{}
	} else {
		cp := *c
		c = &cp
	}
	// A redirect could take the body elsewhere, or to plain http.
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

func (p *poster) name() string { return p.label }

func (p *poster) run(ctx context.Context, q <-chan Notice) {
	for n := range q {
		if ctx.Err() != nil {
			return
		}
		if err := p.deliver(ctx, n); err != nil {
			p.log.Warn("notify: not delivered", "notifier", p.label, "kind", n.Kind, "seq", n.Seq, "err", err)
		}
	}
}

func (p *poster) deliver(ctx context.Context, n Notice) error {
	wait := p.backoff
	var err error
	for attempt := 1; ; attempt++ {
		var retry bool
		retry, err = p.attempt(ctx, n)
		if !retry || attempt == MaxAttempts {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, maxBackoff)
	}
}

func (p *poster) attempt(ctx context.Context, n Notice) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	req, err := p.request(ctx, n)
	if err != nil {
		return false, err
	}
	req.Header.Set("User-Agent", "lazaret/"+version.Version)
	resp, err := p.client.Do(req)
	if err != nil {
		return true, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return false, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return true, fmt.Errorf("answered %s", resp.Status)
	}
	return false, fmt.Errorf("answered %s", resp.Status)
}

// newWebhook reads the key (once: a variable is then removed from the
// environment, so that no child inherits it) and makes the notifier.
func newWebhook(ctx context.Context, w *config.Webhook, o *options, log *slog.Logger) (*poster, error) {
	var key string
	if o.secret != nil {
		key = *o.secret
	} else {
		v, err := secretfetch.Value(ctx, w.Secret)
		if err != nil {
			return nil, err
		}
		key = v
		if w.Secret.Env != "" {
			os.Unsetenv(w.Secret.Env)
		}
	}
	if key == "" {
		return nil, errors.New("empty webhook secret")
	}
	secret := []byte(key)
	return &poster{label: "webhook", client: newClient(o.httpClient), backoff: o.backoff, log: log,
		request: func(ctx context.Context, n Notice) (*http.Request, error) {
			body, err := json.Marshal(n)
			if err != nil {
				return nil, err
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
			if err != nil {
				return nil, err
			}
			ts := time.Now().Unix()
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(HeaderEvent, n.Kind)
			req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
			req.Header.Set(HeaderSignature, Sign(secret, ts, body))
			return req, nil
		}}, nil
}

// newNtfy posts a notice's title and body as text to URL/topic.
func newNtfy(nt *config.Ntfy, o *options, log *slog.Logger) *poster {
	endpoint := nt.Endpoint()
	return &poster{label: "ntfy", client: newClient(o.httpClient), backoff: o.backoff, log: log,
		request: func(ctx context.Context, n Notice) (*http.Request, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader([]byte(Body(n))))
			if err != nil {
				return nil, err
			}
			// Header values: Title is lazaret's words, one line.
			req.Header.Set("Title", Title(n))
			req.Header.Set("Tags", "lazaret")
			if n.Kind == ctl.EventApprovalPending {
				req.Header.Set("Priority", "high")
			}
			return req, nil
		}}
}
