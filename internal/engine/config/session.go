package config

// Session is the [session] section: what a shell does when its terminal
// goes away, and the keys that detach it.
type Session struct {
	// OnClose is OnCloseDetach (the default: the session keeps running,
	// `lazaret attach` takes it back) or OnCloseEnd (the session's
	// terminal hangs up, as a plain terminal's would).
	OnClose string
	// DetachKeys is the key sequence that detaches an attached shell, as
	// written (DefaultDetachKeys).
	DetachKeys string
}

// Values of [session] on_close.
const (
	OnCloseDetach = "detach"
	OnCloseEnd    = "end"
)

// DefaultDetachKeys detach an attached session: Ctrl-\ then d.
const DefaultDetachKeys = `ctrl-\,d`

type fileSession struct {
	OnClose    *string `toml:"on_close"`
	DetachKeys *string `toml:"detach_keys"`
}

// sessionTable reads [session].
func (v *validator) sessionTable(fc *fileConfig, cfg *Config) {
	cfg.Session = Session{OnClose: OnCloseDetach, DetachKeys: DefaultDetachKeys}
	if f := fc.Session.OnClose; f != nil {
		switch *f {
		case OnCloseDetach, OnCloseEnd:
			cfg.Session.OnClose = *f
		default:
			v.fail(keyPath{"session", "on_close"}, ruleErrf("invalid on_close %s: want %q (closing the terminal detaches the session) or %q (it ends it)",
				quoteValue(*f), OnCloseDetach, OnCloseEnd))
		}
	}
	if f := fc.Session.DetachKeys; f != nil {
		if _, err := ParseDetachKeys(*f); err != nil {
			v.fail(keyPath{"session", "detach_keys"}, ruleErrf("invalid detach_keys %s: %v (e.g. %q)", quoteValue(*f), err, DefaultDetachKeys))
		} else {
			cfg.Session.DetachKeys = *f
		}
	}
}
