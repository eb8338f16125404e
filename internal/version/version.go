// Package version holds the build's version strings and the pinned
// versions of the outside components lazaret was built and tested with.
package version

// Version is set at link time (-ldflags "-X ...version.Version=...").
var Version = "dev"

// RunscVersion is the gVisor module pseudo-version scripts/setup builds
// statically. runsc itself prints VERSION_MISSING, so this pin is how the
// build is identified.
const RunscVersion = "v0.0.0-20260905035102-160fafc42237"

// RunscBuild names how scripts/setup builds that version: with its seccomp
// filters precompiled (tools/runsc/seccompgen), as gVisor's release build
// does. The installed runsc's stamp file holds RunscStamp, so a runsc
// built otherwise (an older setup) is rebuilt and `lazaret doctor` says
// so. Change it whenever the build changes.
const RunscBuild = "precompiled-seccomp"

// RunscStamp is the content of the runsc.version file beside the
// installed runsc.
const RunscStamp = RunscVersion + "+" + RunscBuild

// APIVersion is the control-socket protocol version spoken between the CLI
// and the Session Coordinator. Bump it on any incompatible wire change.
const APIVersion = 1
