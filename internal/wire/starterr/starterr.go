// Package starterr carries why a sandbox could not start across the control
// socket: the coordinator sends a typed code (ToWire), the CLI turns it back
// into the sentinel it explains with a fix (FromWire). Both processes import
// it; it imports nothing of either.
package starterr

import (
	"errors"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/locate"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// Wire error codes for why a sandbox could not start; FromWire turns them
// back into the errors the CLI knows how to explain.
const (
	CodeNoSuchImage    = "no_such_image"
	CodePodmanMissing  = "podman_missing"
	CodeRuntimeMissing = "runtime_missing"
	CodeStartFailed    = "start_failed"
)

// ToWire maps a start failure to a typed control-socket error.
func ToWire(err error) *ctl.Error {
	var we *ctl.Error
	if errors.As(err, &we) {
		return we
	}
	code := CodeStartFailed
	switch {
	case errors.Is(err, podman.ErrNoSuchImage):
		code = CodeNoSuchImage
	case errors.Is(err, podman.ErrNotInstalled):
		code = CodePodmanMissing
	case errors.Is(err, locate.ErrNotFound):
		code = CodeRuntimeMissing
	}
	return &ctl.Error{Code: code, Message: err.Error()}
}

// wireError is a coordinator error that unwraps to the local sentinel of
// its code, so internal/cli can classify it.
type wireError struct {
	err      *ctl.Error
	sentinel error
}

func (e wireError) Error() string   { return e.err.Error() }
func (e wireError) Unwrap() []error { return []error{e.err, e.sentinel} }

// FromWire maps a coordinator's typed error back to lazaret's sentinels.
func FromWire(err error) error {
	var we *ctl.Error
	if !errors.As(err, &we) {
		return err
	}
	var s error
	switch we.Code {
	case CodeNoSuchImage:
		s = podman.ErrNoSuchImage
	case CodePodmanMissing:
		s = podman.ErrNotInstalled
	case CodeRuntimeMissing:
		s = locate.ErrNotFound
	default:
		return err
	}
	return wireError{err: we, sentinel: s}
}
