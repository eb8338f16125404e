package config

import (
	"os"
	"strings"
	"testing"
)

// HostErrors (what `lazaret config check` reports of the host) names a
// webhook key that cannot be read now; the control: once the variable is
// set, nothing.
func TestHostErrorsWebhookSecret(t *testing.T) {
	const src = "[notify]\nwebhook = { url = \"https://hooks.example.com/x\", secret = \"env:LZ_TEST_HOOK_KEY\" }\n"
	t.Setenv("LZ_TEST_HOOK_KEY", "") // restored at the end
	os.Unsetenv("LZ_TEST_HOOK_KEY")
	cfg, err := Parse("c.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	errs := cfg.HostErrors()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "notify.webhook.secret") {
		t.Fatalf("host errors: %v", errs)
	}
	t.Setenv("LZ_TEST_HOOK_KEY", "k3y-value-for-the-test")
	cfg, err = Parse("c.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if errs := cfg.HostErrors(); len(errs) != 0 {
		t.Fatalf("control: %v", errs)
	}
}
