package config

// Notify is the [notify] section: the notifiers told of a pending
// approval and the other events of an unattended sandbox. Zero: none.
type Notify struct {
}

type fileNotify struct {
}

// notifyTable reads [notify].
func (v *validator) notifyTable(fc *fileConfig, cfg *Config) {
}
