package kube

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
)

// The kinds of API failure every caller tells apart; an *Error wraps the
// API server's own error under one of them.
var (
	ErrNotFound      = errors.New("not found")
	ErrAlreadyExists = errors.New("already exists")
	ErrForbidden     = errors.New("forbidden")
	ErrCRDMissing    = errors.New("the agent-sandbox v1beta1 resources are not installed")
	ErrUnreachable   = errors.New("cluster unreachable")
	ErrConflict      = errors.New("changed concurrently")
)

// Error is an API call that failed: Op says which, Kind is one of the
// sentinels above (nil when none fits), Err the client's own error.
type Error struct {
	Op   string
	Kind error
	Err  error
}

func (e *Error) Error() string {
	if e.Kind != nil && !strings.Contains(e.Err.Error(), e.Kind.Error()) {
		return fmt.Sprintf("%s: %v: %v", e.Op, e.Kind, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Op, e.Err)
}

func (e *Error) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Kind, e.Err}
}

// wrap maps err of op once, for every caller; crd is true for calls on
// agent-sandbox's resources, where "not found" of the resource type
// itself means the CRDs are missing.
func wrap(op string, err error, crd bool) error {
	if err == nil {
		return nil
	}
	return &Error{Op: op, Kind: kindOf(err, crd), Err: err}
}

func kindOf(err error, crd bool) error {
	var se apierrors.APIStatus
	switch {
	case meta.IsNoMatchError(err):
		return ErrCRDMissing
	case crd && apierrors.IsNotFound(err) && errors.As(err, &se) && se.Status().Details != nil && se.Status().Details.Name == "":
		// A 404 without an object name is the resource type missing.
		return ErrCRDMissing
	case apierrors.IsNotFound(err):
		return ErrNotFound
	case apierrors.IsAlreadyExists(err):
		return ErrAlreadyExists
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return ErrForbidden
	case apierrors.IsConflict(err):
		return ErrConflict
	}
	var ue *url.Error
	var ne net.Error
	if errors.As(err, &ue) || errors.As(err, &ne) {
		return ErrUnreachable
	}
	return nil
}
