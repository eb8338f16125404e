// Package gitsentry is the Git Sentry of DESIGN §6: the agent clone and its
// mounts (branch mode), the read-only .git of direct mode, the real-time ref
// sync that brings the agent's commits into the host repository as verified
// git objects, and the host-side review commands (diff, log, merge, reset).
//
// The principle every function here keeps: the host never runs git against
// metadata the agent can write (the clone is only touched by host git when
// lazaret creates it, before any sandbox has seen it), and data crosses from
// the agent to the host only as a pack that host git checks with
// `index-pack --strict` followed by a connectivity check.
package gitsentry
