package kubecli

import (
	"io"
	"log/slog"
	"strings"
	"testing"
)

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// wantLines fails t for each of wants that out (what verb printed) lacks.
func wantLines(t *testing.T, verb, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("%s lacks %q:\n%s", verb, w, out)
		}
	}
}
