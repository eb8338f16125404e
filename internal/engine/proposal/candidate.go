package proposal

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/policycheck"
	"github.com/lazaret-dev/lazaret/internal/engine/session"
	"github.com/lazaret-dev/lazaret/internal/visible"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
	"github.com/lazaret-dev/lazaret/internal/wire/escwire"
)

// hashTag names the candidate's canonical encoding.
const hashTag = "lazaret/proposal/v1"

// check runs the checker on a proposal: a network target with CheckNet,
// an exec proposal's words as one auto_approve entry with CheckExec. An
// exec argument that the entry's own parsing would not give back (a
// space, a quote) is refused: the human would approve another rule than
// the agent's words.
func check(pol policycheck.Policy, kind, target string, argv []string) (policycheck.Result, error) {
	switch kind {
	case escwire.ProposeNet:
		return policycheck.CheckNet(pol, target)
	case escwire.ProposeExec:
		entry := strings.Join(argv, " ")
		if len(entry) > policycheck.MaxCandidate {
			return policycheck.Result{}, fmt.Errorf("%d bytes: longer than any rule a human can review", len(entry))
		}
		if words, err := config.ParseAutoApprove(entry); err == nil && !slices.Equal(words, argv) {
			return policycheck.Result{}, errors.New("an argument holds a space or a quote: an auto_approve entry is plain words")
		}
		return policycheck.CheckExec(pol, entry)
	}
	return policycheck.Result{}, fmt.Errorf("unknown proposal kind %q", kind)
}

// key is the configuration key r's rule belongs in.
func key(r policycheck.Result) string {
	switch {
	case r.Kind == escwire.ProposeExec:
		return config.KeyAutoApprove
	case strings.Contains(r.Rule, "/"):
		return config.KeyAllowEgress
	}
	return config.KeyAllowDomains
}

// hash binds a decision to the exact candidate: kind, rule, port,
// checker version and every finding.
func hash(r policycheck.Result) string {
	fs := make([]string, 0, 3*len(r.Findings))
	for _, f := range r.Findings {
		fs = append(fs, f.Code, f.Severity.String(), f.Message)
	}
	return escprompt.HashHex(session.NewEncoder(hashTag).String(r.Kind).String(r.Rule).Int64(int64(r.Port)).
		Int64(int64(r.Version)).List(fs).Sum())
}

// findings are r's findings on the control wire.
func findings(r policycheck.Result) []ctl.ProposalFinding {
	out := make([]ctl.ProposalFinding, len(r.Findings))
	for i, f := range r.Findings {
		out[i] = ctl.ProposalFinding{Code: f.Code, Severity: f.Severity.String(), Message: visible.Line(f.Message)}
	}
	return out
}

// findingsLine is every finding on one line (the prompt, the agent's
// refusal).
func findingsLine(fs []ctl.ProposalFinding) string {
	if len(fs) == 0 {
		return "the checker found nothing"
	}
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = f.Severity + " " + f.Code + ": " + f.Message
	}
	return strings.Join(parts, "; ")
}

// promptRequest shows p on its session's terminal through the escalation
// prompt: the candidate as the command, every finding as the reason it
// needs the human, the agent's why as the request's reason.
func promptRequest(p ctl.Proposal, profile string) escprompt.PromptRequest {
	port := ""
	if p.Port != 0 {
		port = fmt.Sprintf(" (port %d asked)", p.Port)
	}
	return escprompt.PromptRequest{RequestID: "proposal-" + p.ID, Profile: profile, Justification: p.Why, Cwd: "-", HostDir: "-",
		Command: fmt.Sprintf("policy proposal %s: add %s to %s%s (checker v%d)", p.ID, p.Rule, p.Key, port, p.CheckerVersion),
		Argv:    []string{p.Key, p.Rule + port}, Executable: escprompt.ProposalExecutable, Proposal: true,
		Reason:      fmt.Sprintf("checker v%d findings: %s", p.CheckerVersion, findingsLine(p.Findings)),
		RequestHash: p.Hash, PendingID: p.ID, AnswerElsewhere: true, SessionID: p.Session}
}
