package config

import "testing"

func TestPolicyProposals(t *testing.T) {
	if got := mustParse(t, "").Policy.Proposals; got != ProposalsManual {
		t.Errorf("default proposals = %q, want %q", got, ProposalsManual)
	}
	for _, v := range []string{ProposalsOff, ProposalsManual, ProposalsAuto} {
		if got := mustParse(t, "[policy]\nproposals = \""+v+"\"\n").Policy.Proposals; got != v {
			t.Errorf("proposals = %q: got %q", v, got)
		}
	}
	wantErr(t, "[policy]\nproposals = \"yes\"\n", "policy.proposals", `invalid proposals "yes"`, false)
	wantErr(t, "[policy]\nproposals = true\n", "policy.proposals", "", false)
	wantErr(t, "[policy]\nproposal = \"auto\"\n", "policy.proposal", "", false)
}
