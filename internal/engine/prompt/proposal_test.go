package prompt

import (
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// TestProposalPrompt: a proposal is shown as a rule the agent proposes,
// never as a host command, with the checker's findings and the agent's
// reason made visible; A approves it as shown (no argv of its own).
func TestProposalPrompt(t *testing.T) {
	r := escprompt.PromptRequest{RequestID: "proposal-0123abcd", Profile: "claude", Justification: "docs\x1b[2J", Cwd: "-", HostDir: "-",
		Argv: []string{"allow_domains", "example.org"}, Executable: escprompt.ProposalExecutable, Proposal: true,
		Reason: "checker v1 findings: review user-content: …"}
	rec := &recorder{}
	m := newModel(r, resolver, rec.decide)
	view := plain(m.Render())
	for _, want := range []string{"proposes a policy rule", "allow_domains += example.org", "user-content", `docs\x1b[2J`} {
		if !strings.Contains(view, want) {
			t.Errorf("view lacks %q:\n%s", want, view)
		}
	}
	if strings.Contains(view, "run a command on the HOST") || strings.Contains(view, "argv[0]") {
		t.Errorf("a proposal shown as a command:\n%s", view)
	}
	if bad := rawControls(view); len(bad) != 0 {
		t.Fatalf("raw control characters: %q", bad)
	}
	m.Update(key("a"))
	if len(rec.got) != 1 || rec.got[0].Answer.Action != escprompt.Approve || rec.got[0].Answer.Argv != nil {
		t.Fatalf("A: %+v", rec.got)
	}
	// Control: the same request without Proposal is a command's prompt.
	r.Proposal = false
	if v := plain(newModel(r, resolver, func(Decision) {}).Render()); !strings.Contains(v, "run a command on the HOST") {
		t.Fatalf("control: %s", v)
	}
}
