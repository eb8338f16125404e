package ctl

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
)

// Audit trail requests (client → coordinator). The coordinator owns the
// state store while it runs, so `lazaret audit` asks it instead of opening
// the file.
const (
	// TypeAuditQuery is an audit.Filter answered by an AuditPage.
	TypeAuditQuery = "audit.query"
	// TypeAuditVerify has no payload and is answered by an audit.Report.
	TypeAuditVerify = "audit.verify"
	// TypeAuditPolicyChange records a run-time policy change made by a
	// CLI of the same user (`lazaret net allow`, `net reload`): a
	// PolicyChange answered by the entry's sequence number.
	TypeAuditPolicyChange = "audit.policy_change"
)

// PolicyChange describes a policy change for the audit trail.
type PolicyChange struct {
	// Action names the command ("net allow", "net reload").
	Action string `json:"action"`
	// Fields are its details (target, duration, counts).
	Fields map[string]string `json:"fields,omitempty"`
}

// AuditPage is one page of an audit query. More says that entries after
// the last one returned may match: ask again with AfterSeq set to it.
type AuditPage struct {
	Entries []audit.Entry `json:"entries"`
	More    bool          `json:"more,omitempty"`
}

// AuditPageJSON is AuditPage as the coordinator writes it and the client
// reads it first: the entries' JSON as the store produced it, without
// decoding and encoding them again.
type AuditPageJSON struct {
	Entries []json.RawMessage `json:"entries"`
	More    bool              `json:"more,omitempty"`
}

// RecordPolicyChange asks the coordinator to write a policy.change entry
// and returns its sequence number.
func (c *Client) RecordPolicyChange(ctx context.Context, pc PolicyChange) (uint64, error) {
	var seq uint64
	if err := c.call(ctx, TypeAuditPolicyChange, pc, &seq); err != nil {
		return 0, fmt.Errorf("audit policy change: %w", err)
	}
	return seq, nil
}

// QueryAudit asks the coordinator for the entries matching f, following
// pages, and calls fn with each page in order.
func (c *Client) QueryAudit(ctx context.Context, f audit.Filter, fn func([]audit.Entry) error) error {
	return c.QueryAuditJSON(ctx, f, func(raw []json.RawMessage) error {
		entries := make([]audit.Entry, len(raw))
		for i, r := range raw {
			if err := json.Unmarshal(r, &entries[i]); err != nil {
				return fmt.Errorf("audit query: %w", err)
			}
		}
		return fn(entries)
	})
}

// QueryAuditJSON is QueryAudit handing over each entry's JSON object as it
// came, for callers that print JSON.
func (c *Client) QueryAuditJSON(ctx context.Context, f audit.Filter, fn func([]json.RawMessage) error) error {
	for {
		var page AuditPageJSON
		if err := c.call(ctx, TypeAuditQuery, f, &page); err != nil {
			return fmt.Errorf("audit query: %w", err)
		}
		if len(page.Entries) > 0 {
			if err := fn(page.Entries); err != nil {
				return err
			}
		}
		if !page.More || len(page.Entries) == 0 {
			return nil
		}
		// The rest of the selection is what follows the last entry
		// received: for "last N", the remaining count of them.
		var last struct {
			Seq uint64 `json:"seq"`
		}
		if err := json.Unmarshal(page.Entries[len(page.Entries)-1], &last); err != nil {
			return fmt.Errorf("audit query: %w", err)
		}
		f.AfterSeq = last.Seq
		if f.Last > 0 {
			f.Limit, f.Last = f.Last-len(page.Entries), 0
		} else if f.Limit > 0 {
			f.Limit -= len(page.Entries)
		}
	}
}

// VerifyAudit asks the coordinator to verify the audit chain.
func (c *Client) VerifyAudit(ctx context.Context) (audit.Report, error) {
	var r audit.Report
	if err := c.call(ctx, TypeAuditVerify, nil, &r); err != nil {
		return r, fmt.Errorf("audit verify: %w", err)
	}
	return r, nil
}
