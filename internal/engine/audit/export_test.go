package audit

// parseRecord decodes a stored record into its entry, checking only that it
// is readable (Verifier checks the chain).
func parseRecord(rec []byte) (Entry, error) {
	_, body, err := DecodeRecord(rec)
	if err != nil {
		return Entry{}, err
	}
	return Decode(body)
}

// verifyEntries checks a chain given as decoded entries, as in an export:
// each entry is encoded again canonically, so an export kept elsewhere can
// be verified without the database. head may be nil.
func verifyEntries(entries []Entry, head *Head) Report {
	v := NewVerifier()
	for _, e := range entries {
		claimed := e.Hash
		body, err := e.Canonical()
		if err != nil {
			v.fail(e.Seq, "cannot encode: %v", err)
			break
		}
		if !v.Add(e.Seq, EncodeRecord(claimed, body)) {
			break
		}
	}
	return v.Finish(head)
}
