package netd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParsePolicy(t *testing.T) {
	p, err := ParsePolicy([]byte(`{"allow_egress":[{"prefix":"203.0.113.0/24"}],"allow_domains":[{"pattern":"*.example.com"},{"pattern":"api.example.org"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.AllowEgress) != 1 || p.AllowEgress[0].Prefix.String() != "203.0.113.0/24" || len(p.AllowDomains) != 2 {
		t.Fatalf("got %+v", p)
	}
	if _, err := ParsePolicy([]byte(`{}`)); err != nil {
		t.Fatalf("empty policy: %v", err)
	}
}

func TestParsePolicyErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{``, "empty"},
		{`{"allow_domains":[{"pattern":"*.com"}]}`, "key allow_domains[0].pattern"},
		{`{"allow_domains":[{"pattern":"ok.example"},{"pattern":""}]}`, "key allow_domains[1].pattern"},
		{`{"allow_egress":[{}]}`, "key allow_egress[0].prefix"},
		{`{"allow_egress":[{"prefix":"nope"}]}`, "key allow_egress[0]"},
		{`{"allow_egress":"x"}`, "key allow_egress"},
		{`{"allow_domain":[]}`, `unknown key "allow_domain"`},
		{`{"allow_domains":[]} {}`, "data after"},
		{`{"allow_domains":[`, "invalid"},
		{`null`, "not a JSON object"},
	} {
		_, err := ParsePolicy([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParsePolicy(%q) = %v, want one line with %q", tc.in, err, tc.want)
		}
	}
}

func TestLoadPolicyFileNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.json")
	if _, err := LoadPolicyFile(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "policy.json")
	os.WriteFile(bad, []byte(`{"allow_domains":[{"pattern":"*"}]}`), 0o600)
	_, err := LoadPolicyFile(bad)
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "allow_domains[0].pattern") {
		t.Errorf("bad file: %v", err)
	}
	big := filepath.Join(dir, "big.json")
	os.WriteFile(big, make([]byte, MaxPolicyFile+1), 0o600)
	if _, err := LoadPolicyFile(big); err == nil || !strings.Contains(err.Error(), "larger") {
		t.Errorf("big file: %v", err)
	}
}

// FuzzParsePolicy: any bytes (a ConfigMap is written by whoever may edit
// it) give a valid policy or a one-line error, never a panic.
func FuzzParsePolicy(f *testing.F) {
	for _, s := range []string{
		`{}`, ``, `{"allow_egress":[{"prefix":"10.0.0.0/8"}]}`,
		`{"allow_domains":[{"pattern":"*.example.com","expires":"2030-01-01T00:00:00Z"}]}`,
		`{"allow_egress":[{"prefix":"::/0"}],"allow_domains":[{"pattern":"a.b"}]}`,
		`{"allow_egress":1}`, `[]`, `null`, `{"allow_domains":[{"pattern":"*"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePolicy(b)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted an invalid policy: %v", err)
		}
		for _, c := range p.AllowEgress {
			if !c.Prefix.IsValid() {
				t.Fatalf("accepted invalid prefix")
			}
		}
	})
}
