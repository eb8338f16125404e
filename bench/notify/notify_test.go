//go:build bench

// Package notify measures the time from an event's Publish to its
// notification arriving: at a Notifications service on a private session
// bus (desktop) and at an HTTPS webhook (signed, verified), both
// notifiers running at once as in the coordinator. The goal is under
// 100 ms. Run by `make bench` (scripts/bench); prints a markdown table
// for docs/PERFORMANCE.md ("Notifications").
package notify

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/desktopnotify/desktoptest"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/events"
	"github.com/lazaret-dev/lazaret/internal/engine/notify"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// rounds stays within notify.PendingPerMinute: each is notified alone.
const rounds = 25

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func BenchmarkPublishToNotification(b *testing.B) {
	const secret = "bench-key"
	arrived := make(chan time.Time, 64)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		ts, _ := strconv.ParseInt(r.Header.Get(notify.HeaderTimestamp), 10, 64)
		if r.Header.Get(notify.HeaderSignature) != notify.Sign([]byte(secret), ts, body) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		arrived <- at
	}))
	defer srv.Close()
	addr := desktoptest.Bus(b)
	svc := desktoptest.Serve(b, addr)
	var desk, hook []time.Duration
	for b.Loop() {
		hub := events.New("bench", "/home/u/project")
		cfg := config.Notify{Desktop: true, Webhook: &config.Webhook{URL: srv.URL + "/hook"}}
		stop := notify.Start(context.Background(), cfg, hub, slog.New(slog.NewTextHandler(io.Discard, nil)),
			notify.WithBusAddress(addr), notify.WithHTTPClient(srv.Client()), notify.WithSecret(secret))
		for i := range rounds {
			t0 := time.Now()
			hub.Publish(ctl.Event{Kind: ctl.EventApprovalPending, Request: "r-" + strconv.Itoa(i), RequestKind: ctl.RequestEscalation})
			<-svc.Calls
			desk = append(desk, time.Since(t0))
			hook = append(hook, (<-arrived).Sub(t0))
		}
		stop()
	}
	b.ReportMetric(float64(median(desk).Microseconds())/1000, "desktop-ms")
	b.ReportMetric(float64(median(hook).Microseconds())/1000, "webhook-ms")
	fmt.Printf("\n| measurement (median of %d) | value |\n|---|---|\n", len(desk))
	fmt.Printf("| Publish → desktop notification (private session bus) | %.2f ms |\n", float64(median(desk).Microseconds())/1000)
	fmt.Printf("| Publish → signed webhook request (HTTPS, loopback) | %.2f ms |\n", float64(median(hook).Microseconds())/1000)
}
