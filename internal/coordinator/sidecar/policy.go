package sidecar

import (
	"encoding/json"
	"fmt"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
)

// PolicyOf is the permanent policy of a profile: its allow_egress and
// allow_domains, already merged with the global [network] ones by config.
func PolicyOf(p *config.Profile) (netpolicy.Policy, error) {
	return netpolicy.FromConfig(p.AllowEgress, p.AllowDomains)
}

func jsonPolicy(p netpolicy.Policy) (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("policy: %w", err)
	}
	return string(b), nil
}
