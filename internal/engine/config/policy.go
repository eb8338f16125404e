package config

// Policy is the [policy] section: what becomes of a rule the agent
// proposes through `lazaret-escalate --propose` (docs/POLICY.md).
type Policy struct {
	// Proposals is ProposalsOff (every proposal refused), ProposalsManual
	// (the default: a human approves or denies each) or ProposalsAuto (a
	// proposal the checker finds nothing above "info" in is applied at
	// once; any other still waits for a human).
	Proposals string
}

// Values of [policy] proposals.
const (
	ProposalsOff    = "off"
	ProposalsManual = "manual"
	ProposalsAuto   = "auto"
)

type filePolicy struct {
	Proposals *string `toml:"proposals"`
}

// policyTable reads [policy].
func (v *validator) policyTable(fc *fileConfig, cfg *Config) {
	cfg.Policy = Policy{Proposals: ProposalsManual}
	f := fc.Policy.Proposals
	if f == nil {
		return
	}
	switch *f {
	case ProposalsOff, ProposalsManual, ProposalsAuto:
		cfg.Policy.Proposals = *f
	default:
		v.fail(keyPath{"policy", "proposals"}, ruleErrf("invalid proposals %s: want %q (refuse every proposal), %q (a human decides each) or %q (apply one the checker finds nothing in)",
			quoteValue(*f), ProposalsOff, ProposalsManual, ProposalsAuto))
	}
}
