package netd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
)

// MaxPolicyFile bounds a policy file (pod mode reads it from a ConfigMap,
// whose data is at most 1 MiB anyway).
const MaxPolicyFile = 1 << 20

// LoadPolicyFile reads the policy of pod mode from path: the JSON of
// --policy (allow_egress, allow_domains). Its errors name the file and,
// where there is one, the key.
func LoadPolicyFile(path string) (netpolicy.Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return netpolicy.Policy{}, fmt.Errorf("policy file %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxPolicyFile+1))
	if err != nil {
		return netpolicy.Policy{}, fmt.Errorf("policy file %s: %w", path, err)
	}
	if len(b) > MaxPolicyFile {
		return netpolicy.Policy{}, fmt.Errorf("policy file %s: larger than %d bytes", path, MaxPolicyFile)
	}
	p, err := ParsePolicy(b)
	if err != nil {
		return netpolicy.Policy{}, fmt.Errorf("policy file %s: %w", path, err)
	}
	return p, nil
}

// ParsePolicy decodes and validates a policy in JSON: one object, no
// unknown key, every entry valid. An error names the key it is about.
func ParsePolicy(b []byte) (netpolicy.Policy, error) {
	// Entries are decoded one by one so an error names its index (the
	// decoder does not for a text value such as a prefix).
	var raw struct {
		AllowEgress  []json.RawMessage `json:"allow_egress"`
		AllowDomains []json.RawMessage `json:"allow_domains"`
	}
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] != '{' {
		return netpolicy.Policy{}, errors.New("not a JSON object (want allow_egress and allow_domains)")
	}
	if err := decodeStrict(b, &raw); err != nil {
		return netpolicy.Policy{}, err
	}
	var p netpolicy.Policy
	for i, r := range raw.AllowEgress {
		var c netpolicy.CIDR
		if err := decodeStrict(r, &c); err != nil {
			return netpolicy.Policy{}, fmt.Errorf("key allow_egress[%d]: %w", i, err)
		}
		if !c.Prefix.IsValid() {
			return netpolicy.Policy{}, fmt.Errorf("key allow_egress[%d].prefix: missing", i)
		}
		p.AllowEgress = append(p.AllowEgress, c)
	}
	for i, r := range raw.AllowDomains {
		var d netpolicy.Domain
		if err := decodeStrict(r, &d); err != nil {
			return netpolicy.Policy{}, fmt.Errorf("key allow_domains[%d]: %w", i, err)
		}
		if _, err := netpolicy.NormalizePattern(d.Pattern); err != nil {
			return netpolicy.Policy{}, fmt.Errorf("key allow_domains[%d].pattern: %w", i, err)
		}
		p.AllowDomains = append(p.AllowDomains, d)
	}
	return p, p.Validate()
}

// decodeStrict decodes exactly one JSON value with no unknown key.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSONError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON value")
	}
	return nil
}

// describeJSONError names the key of a decoding error.
func describeJSONError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te) && te.Field != "":
		return fmt.Errorf("key %s: %s is not a %s", te.Field, te.Value, te.Type)
	case errors.As(err, &se):
		return fmt.Errorf("invalid JSON at byte %d: %v", se.Offset, err)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Errorf("unknown key %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	case errors.Is(err, io.EOF):
		return errors.New("empty (want a JSON object with allow_egress and allow_domains)")
	}
	return fmt.Errorf("invalid: %w", err)
}
