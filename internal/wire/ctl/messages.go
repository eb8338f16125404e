package ctl

import "time"

// Message types of the lifecycle API. Other parts of lazaret add their own
// types (one constant each, near their handler).
const (
	// TypeHello is the first request of every connection (client → coordinator).
	TypeHello = "hello"
	// TypeStatus asks for a Status (client → coordinator).
	TypeStatus = "status"
	// TypeStop asks for a clean teardown; the reply comes once the sandbox
	// is gone (client → coordinator).
	TypeStop = "stop"
	// TypeExecSpec asks how to run a command in the sandbox (client →
	// coordinator): an ExecSpecRequest answered by an ExecSpec.
	TypeExecSpec = "exec_spec"
	// TypeShutdown tells an attached session that the sandbox is going away
	// (coordinator → client notification, payload Shutdown).
	TypeShutdown = "shutdown"
	// TypeGitSync asks for one ref sync of the agent clone to the host and
	// answers once it is done (client → coordinator; no payload). A
	// session sends it when its command ended, so that the command's last
	// commit is on the host when lazaret exec returns.
	TypeGitSync = "gitsentry.sync"
)

// StopRequest is the optional payload of TypeStop: who asked. Without it
// (or with an empty Cause) the stop is a `lazaret stop`.
type StopRequest struct {
	Cause string `json:"cause,omitempty"`
}

// StopCauseEscalationAbort: the human answered Q (abort lazaret) to an
// escalation prompt. Causes are a closed set so that the audit trail
// never records a free-text reason chosen by a client.
const StopCauseEscalationAbort = "escalation_abort"

// Hello opens a connection. A connection with Session set is an attached
// Client Session and counts as a reference that keeps the sandbox alive;
// one without (status, stop, ps) does not.
type Hello struct {
	API     int          `json:"api"`
	Version string       `json:"version,omitempty"` // lazaret build of the client
	Session *SessionInfo `json:"session,omitempty"`
}

// SessionInfo describes a Client Session as the CLI announces it.
type SessionInfo struct {
	// ID is LAZARET_SESSION_ID: 32 lowercase hex characters chosen by the CLI.
	ID      string `json:"id"`
	PID     int    `json:"pid"`
	Profile string `json:"profile"`
	TTY     bool   `json:"tty"`
	// Command is what the session runs, for status ("shell" or the argv).
	Command []string `json:"command,omitempty"`
}

// HelloReply answers a Hello once the sandbox is running.
type HelloReply struct {
	API       int    `json:"api"`
	Version   string `json:"version,omitempty"`
	PID       int    `json:"pid"`
	Domain    string `json:"domain"`
	Profile   string `json:"profile"`
	Workspace string `json:"workspace"`
	Container string `json:"container"`
}

// Status is the coordinator's view of its domain.
type Status struct {
	Domain       string          `json:"domain"`
	Profile      string          `json:"profile"`
	Workspace    string          `json:"workspace"`
	DataRoot     string          `json:"data_root"`
	PID          int             `json:"pid"`
	Version      string          `json:"version,omitempty"`
	Started      time.Time       `json:"started"`
	Uptime       Duration        `json:"uptime"`
	Container    ContainerStatus `json:"container"`
	Sessions     []SessionStatus `json:"sessions"`
	Components   []string        `json:"components"`
	ShuttingDown bool            `json:"shutting_down,omitempty"`
	// Reason says why it is shutting down (a component that died, a stop).
	Reason string `json:"reason,omitempty"`
	// Limits is the usage against each resource limit (absent from an
	// older coordinator).
	Limits *LimitsStatus `json:"limits,omitempty"`
}

// ContainerStatus is the agent container of a Status.
type ContainerStatus struct {
	Name    string `json:"name"`
	ID      string `json:"id"`
	Image   string `json:"image"`
	Runtime string `json:"runtime"`
	State   string `json:"state"`
}

// SessionStatus is one attached session of a Status.
type SessionStatus struct {
	SessionInfo
	PeerPID  int       `json:"peer_pid"`
	Attached time.Time `json:"attached"`
	// Kept: the session's terminal is held by a keeper, so it can be
	// detached and attached again (`lazaret attach`); Detached: no
	// terminal is attached to it now (TypeSessionState).
	Kept     bool `json:"kept,omitempty"`
	Detached bool `json:"detached,omitempty"`
	// Pending are the ids of its requests awaiting an answer
	// (`lazaret approvals show ID`).
	Pending []string `json:"pending,omitempty"`
}

// Duration is a time.Duration that encodes as seconds (a JSON number).
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(formatSeconds(time.Duration(d))), nil
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	f, err := parseSeconds(b)
	if err != nil {
		return err
	}
	*d = Duration(f)
	return nil
}

// ExecSpecRequest asks how to run a command for a session.
type ExecSpecRequest struct {
	SessionID string `json:"session_id"`
	TTY       bool   `json:"tty"`
}

// ExecSpec tells the CLI how to run `podman exec`: the container, and the
// environment to inject (LAZARET_SESSION_ID and whatever other parts of
// lazaret add, such as escalation credentials).
type ExecSpec struct {
	Container string `json:"container"`
	// ContainerID is the container's full ID, for a runsc exec of the
	// command without podman (internal/adapter/runscexec); empty from an older
	// coordinator.
	ContainerID string            `json:"container_id,omitempty"`
	Env         map[string]string `json:"env"`
	Workdir     string            `json:"workdir"`
	User        string            `json:"user,omitempty"`
}

// Shutdown is pushed to every attached session before teardown.
type Shutdown struct {
	Reason string `json:"reason"`
}
