package secret

// Stat counts one secret's use on one host.
type Stat struct {
	Secret   string `json:"secret"`
	Host     string `json:"host"`
	Injected uint64 `json:"injected"`
	Refused  uint64 `json:"refused"`
}
