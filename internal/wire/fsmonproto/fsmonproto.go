// Package fsmonproto is what the coordinator and the in-sandbox fsmonitor
// (internal/insandbox/fsmonitor) agree on: where the daemon listens in the
// sandbox and the git hook protocol it speaks. It imports nothing.
package fsmonproto

// Socket is the fsmonitor daemon's socket inside the sandbox.
const Socket = "/run/lazaret/fsmonitor/daemon.sock"

// HookVersion is the fsmonitor hook protocol spoken
// (core.fsmonitorHookVersion = 2).
const HookVersion = "2"
