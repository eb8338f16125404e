// Package refsync brings the agent clone's branches into the user's host
// repository: it asks the sandbox (through a Sandbox: podman exec locally,
// the API server's exec on Kubernetes) for its branch tips and a bundle of
// what the host lacks, verifies every object with host git (index-pack
// --strict, fsck), and moves only lazaret's refs, in one transaction,
// auditing refused branch names and commits whose text hides characters.
// It is shared by the local coordinator's Git Sentry and the Kubernetes
// backend; the sandbox's output is hostile throughout.
package refsync
