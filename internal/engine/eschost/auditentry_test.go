package eschost

import (
	"context"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
)

func TestEntryMapping(t *testing.T) {
	code := 3
	var got []audit.Entry
	a := EntryAuditor(func(_ context.Context, e audit.Entry) (uint64, error) { got = append(got, e); return 1, nil })
	for _, e := range []Event{
		{Kind: EventRejected, Stage: StageReplay, Reason: "nonce seen before", RequestID: "r"},
		{Kind: EventRequest, RequestID: "r", Argv: []string{"make"}, Reason: "no auto_approve entry matches"},
		{Kind: EventDecision, RequestID: "r", Decision: DecisionAuto, Rule: "make lint"},
		{Kind: EventResult, RequestID: "r", ExitCode: &code, Duration: 1500 * time.Millisecond},
	} {
		if err := a.Audit(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	if got[0].Kind != audit.KindEscalationRejected || got[0].Rejection.Stage != "replay" ||
		got[1].Kind != audit.KindEscalationRequest || got[1].Request.Argv[0] != "make" ||
		got[2].Decision.Outcome != audit.OutcomeAuto || got[2].Decision.Rule != "make lint" ||
		got[3].Result.ExitCode != 3 || got[3].Result.DurationMS != 1500 {
		t.Fatalf("%+v", got)
	}
	for _, e := range got {
		if !e.Kind.Known() {
			t.Fatalf("unknown kind %q", e.Kind)
		}
	}
	// Every decision outcome is one the audit package knows.
	for _, d := range []string{DecisionAuto, DecisionApproved, DecisionEdited, DecisionDenied} {
		switch audit.Outcome(d) {
		case audit.OutcomeAuto, audit.OutcomeApproved, audit.OutcomeEdited, audit.OutcomeDenied:
		default:
			t.Fatalf("decision %q unknown to audit", d)
		}
	}
}

func TestEntryRecordsWhereTheAnswerCameFrom(t *testing.T) {
	en := Entry(Event{Kind: EventDecision, Decision: DecisionApproved, AskedOn: "terminal of session s",
		AnsweredFrom: "lazaret approvals (pid 7, uid 1000)", AnswerFrom: "any"})
	if en.Fields["answered_from"] != "lazaret approvals (pid 7, uid 1000)" || en.Fields["answer_from"] != "any" || en.Fields["asked_on"] == "" {
		t.Fatalf("fields %v", en.Fields)
	}
	exp := Entry(Event{Kind: EventDecision, Decision: DecisionDenied, Expired: true, AnsweredFrom: "timeout"})
	if exp.Fields["expired"] != "true" {
		t.Fatalf("expired fields %v", exp.Fields)
	}
	if none := Entry(Event{Kind: EventDecision, Decision: DecisionAuto}); none.Fields != nil {
		t.Fatalf("fields of an auto decision %v", none.Fields)
	}
}
