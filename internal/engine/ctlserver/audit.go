package ctlserver

import (
	"context"
	"encoding/json"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// auditPageEntries and auditPageBytes bound one page well below
// ctl.MaxMessage, whatever the size of the entries.
const (
	auditPageEntries = 1000
	auditPageBytes   = ctl.MaxMessage / 2
)

// AuditStore is what the audit handlers need of the state store.
type AuditStore interface {
	// AuditJSON returns the entries f selects, each as its JSON object.
	AuditJSON(ctx context.Context, f audit.Filter) ([]json.RawMessage, error)
	Verify(ctx context.Context) (audit.Report, error)
	AppendAudit(ctx context.Context, e audit.Entry) (uint64, error)
}

// AuditHandlers returns the coordinator's handlers of the audit requests
// (ctl.TypeAudit*), keyed by type, for Server.Handle.
func AuditHandlers(st AuditStore) map[string]HandlerFunc {
	return map[string]HandlerFunc{
		ctl.TypeAuditQuery: func(ctx context.Context, req *Request) (any, error) {
			var f audit.Filter
			if err := req.Decode(&f); err != nil {
				return nil, err
			}
			return auditPage(ctx, st, f)
		},
		ctl.TypeAuditVerify: func(ctx context.Context, _ *Request) (any, error) {
			return st.Verify(ctx)
		},
		ctl.TypeAuditPolicyChange: func(ctx context.Context, req *Request) (any, error) {
			var pc ctl.PolicyChange
			if err := req.Decode(&pc); err != nil {
				return nil, err
			}
			if pc.Action == "" {
				return nil, ctl.Errorf(ctl.ErrBadRequest.Code, "%s: no action", req.Type)
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

func auditPage(ctx context.Context, st AuditStore, f audit.Filter) (*ctl.AuditPageJSON, error) {
	capped := false
	if f.Last <= 0 && (f.Limit <= 0 || f.Limit > auditPageEntries) {
		f.Limit, capped = auditPageEntries, true
	}
	entries, err := st.AuditJSON(ctx, f)
	if err != nil {
		return nil, err
	}
	page := &ctl.AuditPageJSON{Entries: entries, More: capped && len(entries) == auditPageEntries}
	size := 0
	for i, b := range entries {
		size += len(b) + 1
		if size > auditPageBytes {
			if i == 0 {
				return nil, ctl.Errorf(ctl.ErrInternal.Code, "an audit entry of %d bytes is too large for a control message", len(b))
			}
			page.Entries, page.More = entries[:i], true
			break
		}
	}
	return page, nil
}
