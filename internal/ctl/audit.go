package ctl

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/lazaret-dev/lazaret/internal/audit"
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

// auditPageOut is AuditPage as the server writes it: the entries' JSON as
// the store produces it, without decoding and encoding them again.
type auditPageOut struct {
	Entries []json.RawMessage `json:"entries"`
	More    bool              `json:"more,omitempty"`
}

// auditPageEntries and auditPageBytes bound one page well below
// MaxMessage, whatever the size of the entries.
const (
	auditPageEntries = 1000
	auditPageBytes   = MaxMessage / 2
)

// AuditStore is what the audit handlers need of the state store.
type AuditStore interface {
	// AuditJSON returns the entries f selects, each as its JSON object.
	AuditJSON(ctx context.Context, f audit.Filter) ([]json.RawMessage, error)
	Verify(ctx context.Context) (audit.Report, error)
	AppendAudit(ctx context.Context, e audit.Entry) (uint64, error)
}

// AuditHandlers returns the coordinator's handlers of the audit requests,
// keyed by type, for Server.Handle.
func AuditHandlers(st AuditStore) map[string]HandlerFunc {
	return map[string]HandlerFunc{
		TypeAuditQuery: func(ctx context.Context, req *Request) (any, error) {
			var f audit.Filter
			if err := req.Decode(&f); err != nil {
				return nil, err
			}
			return auditPage(ctx, st, f)
		},
		TypeAuditVerify: func(ctx context.Context, _ *Request) (any, error) {
			return st.Verify(ctx)
		},
		TypeAuditPolicyChange: func(ctx context.Context, req *Request) (any, error) {
			var pc PolicyChange
			if err := req.Decode(&pc); err != nil {
				return nil, err
			}
			if pc.Action == "" {
				return nil, Errorf(ErrBadRequest.Code, "%s: no action", req.Type)
			}
			f := map[string]string{"action": pc.Action}
			for k, v := range pc.Fields {
				if k != "action" {
					f[k] = v
				}
			}
			return st.AppendAudit(ctx, audit.Entry{Kind: audit.KindPolicyChange, Fields: f})
		},
	}
}

// RecordPolicyChange asks the coordinator to write a policy.change entry.
func RecordPolicyChange(ctx context.Context, c *Conn, pc PolicyChange) (uint64, error) {
	var seq uint64
	if err := c.Call(ctx, TypeAuditPolicyChange, pc, &seq); err != nil {
		return 0, fmt.Errorf("audit policy change: %w", err)
	}
	return seq, nil
}

func auditPage(ctx context.Context, st AuditStore, f audit.Filter) (*auditPageOut, error) {
	capped := false
	if f.Last <= 0 && (f.Limit <= 0 || f.Limit > auditPageEntries) {
		f.Limit, capped = auditPageEntries, true
	}
	entries, err := st.AuditJSON(ctx, f)
	if err != nil {
		return nil, err
	}
	page := &auditPageOut{Entries: entries, More: capped && len(entries) == auditPageEntries}
	size := 0
	for i, b := range entries {
		size += len(b) + 1
		if size > auditPageBytes {
			if i == 0 {
				return nil, Errorf(ErrInternal.Code, "an audit entry of %d bytes is too large for a control message", len(b))
			}
			page.Entries, page.More = entries[:i], true
			break
		}
	}
	return page, nil
}

// QueryAudit asks the coordinator for the entries matching f, following
// pages, and calls fn with each page in order.
func QueryAudit(ctx context.Context, c *Conn, f audit.Filter, fn func([]audit.Entry) error) error {
	return QueryAuditJSON(ctx, c, f, func(raw []json.RawMessage) error {
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
func QueryAuditJSON(ctx context.Context, c *Conn, f audit.Filter, fn func([]json.RawMessage) error) error {
	for {
		var page auditPageOut
		if err := c.Call(ctx, TypeAuditQuery, f, &page); err != nil {
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
func VerifyAudit(ctx context.Context, c *Conn) (audit.Report, error) {
	var r audit.Report
	if err := c.Call(ctx, TypeAuditVerify, nil, &r); err != nil {
		return r, fmt.Errorf("audit verify: %w", err)
	}
	return r, nil
}
