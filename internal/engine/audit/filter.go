package audit

import (
	"slices"
	"time"
)

// Filter selects audit entries. The zero Filter selects every entry. It
// is also the payload of the coordinator's audit.query.
type Filter struct {
	// Profile keeps only entries of this profile.
	Profile string `json:"profile,omitempty"`
	// Since keeps entries at or after this time.
	Since time.Time `json:"since,omitzero"`
	// AfterSeq keeps entries with a larger sequence number (--follow and
	// paging).
	AfterSeq uint64 `json:"after_seq,omitempty"`
	// Kinds keeps only these kinds (all when empty).
	Kinds []Kind `json:"kinds,omitempty"`
	// Last > 0 keeps only the last Last matching entries.
	Last int `json:"last,omitempty"`
	// Limit > 0 keeps only the first Limit matching entries (ignored
	// with Last).
	Limit int `json:"limit,omitempty"`
}

// Match reports whether e passes the profile, time and kind conditions
// (the sequence conditions are the reader's).
func (f Filter) Match(e *Entry) bool {
	if f.Profile != "" && e.Profile != f.Profile {
		return false
	}
	if !f.Since.IsZero() && e.Time.Before(f.Since) {
		return false
	}
	if len(f.Kinds) > 0 && !slices.Contains(f.Kinds, e.Kind) {
		return false
	}
	return true
}
