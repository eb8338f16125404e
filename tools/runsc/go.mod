// Module tools/runsc pins the gVisor runsc that scripts/setup builds and
// holds seccompgen, which precompiles runsc's seccomp filters for that
// build, as gVisor's own release build does (docs/PERFORMANCE.md). The
// version must be internal/version.RunscVersion (a test checks it).
module github.com/lazaret-dev/lazaret/tools/runsc

go 1.26.3

require gvisor.dev/gvisor v0.0.0-20260905035102-160fafc42237

require (
	golang.org/x/exp v0.0.0-20250711185948-6ae5c78190dc // indirect
	golang.org/x/mod v0.34.0 // indirect
	golang.org/x/sync v0.20.0 // indirect
	golang.org/x/sys v0.43.0 // indirect
	golang.org/x/time v0.15.0 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)
