package ctl

// Network denial notices and prompts (coordinator → CLI). Every string
// that names a destination came from the sandbox: the CLI escapes it
// again when it shows it (internal/visible), whatever the coordinator did.
const (
	// TypeNetNotice is one line for the session's terminal (notification,
	// payload NetNotice).
	TypeNetNotice = "net.notice"
	// TypeNetPrompt asks the session's human about a denied DNS name
	// (request NetPrompt, answered by NetAnswer).
	TypeNetPrompt = "net.prompt"
)

// NetNotice is a line that starts with "lazaret: ".
type NetNotice struct {
	Line string `json:"line"`
}

// NetPrompt describes a denied DNS name the agent's lookup waits on.
type NetPrompt struct {
	Name string `json:"name"`
	// Unicode is the name's Unicode form when it is punycode;
	// Registrable is its registrable domain.
	Unicode     string `json:"unicode,omitempty"`
	Registrable string `json:"registrable,omitempty"`
	Profile     string `json:"profile"`
	// ConfigLine is what "always" tells the user to add to the config.
	ConfigLine string `json:"config_line"`
	// WaitSeconds is how long the lookup waits for the answer.
	WaitSeconds int `json:"wait_seconds"`
	// ID names this prompt for its withdrawal (escprompt.TypePromptCancel
	// with RequestID = ID) once the lookup stopped waiting; empty from an
	// older coordinator.
	ID string `json:"id,omitempty"`
}

// Choices of a NetAnswer.
const (
	NetOnce   = "once"   // allow for this sandbox run
	NetAlways = "always" // allow for this run; the config line was printed
	NetDeny   = "deny"
	NetIgnore = "ignore" // deny, and no more notices of it this run
	NetNone   = "none"   // no terminal, or it was busy: nobody was asked
)

// NetAnswer is the human's choice.
type NetAnswer struct {
	Choice string `json:"choice"`
	// Withdrawn, with NetNone, says the prompt was on the terminal and was
	// withdrawn, and why (escprompt's Withdraw*), rather than never shown.
	Withdrawn string `json:"withdrawn,omitempty"`
}
