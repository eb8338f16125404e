package kube

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
)

func fakeClient() *Client {
	kinds := map[schema.GroupVersionResource]string{SandboxesGVR: "SandboxList", TemplatesGVR: "SandboxTemplateList", WarmPoolsGVR: "SandboxWarmPoolList", ClaimsGVR: "SandboxClaimList"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kinds)
	return &Client{Core: fake.NewClientset(), Dynamic: dyn, Namespace: "ns"}
}

func TestErrorKinds(t *testing.T) {
	gr := schema.GroupResource{Group: kubespec.ExtensionsGroup, Resource: "sandboxclaims"}
	crdGone := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound,
		Details: &metav1.StatusDetails{Group: gr.Group, Kind: gr.Resource}, Message: "the server could not find the requested resource"}}
	cases := []struct {
		err  error
		crd  bool
		want error
	}{
		{apierrors.NewNotFound(gr, "lazaret-x"), true, ErrNotFound},
		{crdGone, true, ErrCRDMissing},
		{crdGone, false, ErrNotFound},
		{apierrors.NewForbidden(gr, "x", errors.New("no")), false, ErrForbidden},
		{apierrors.NewUnauthorized("who"), false, ErrForbidden},
		{apierrors.NewAlreadyExists(gr, "x"), true, ErrAlreadyExists},
		{apierrors.NewConflict(gr, "x", errors.New("rv")), true, ErrConflict},
		{&url.Error{Op: "Get", URL: "https://10.0.0.1:6443", Err: errors.New("connection refused")}, false, ErrUnreachable},
	}
	for _, c := range cases {
		err := wrap("op", c.err, c.crd)
		if !errors.Is(err, c.want) {
			t.Errorf("wrap(%v) = %v, want kind %v", c.err, err, c.want)
		}
		if !strings.HasPrefix(err.Error(), "op: ") {
			t.Errorf("message %q does not name the operation", err)
		}
	}
	if err := wrap("op", errors.New("odd"), false); errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnreachable) {
		t.Errorf("an unknown error got a kind: %v", err)
	}
}

func TestApplyCreatesThenUpdates(t *testing.T) {
	c := fakeClient()
	ctx := context.Background()
	tpl := &kubespec.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "lazaret-p-1"}}
	tpl.Spec.NetworkPolicyManagement = "Managed"
	for i, want := range []string{"created", ""} {
		if got, err := c.ApplyTemplate(ctx, tpl); err != nil || got != want {
			t.Fatalf("apply %d = %q, %v; want %q", i, got, err, want)
		}
	}
	// The server's defaults in the stored spec are not a change.
	u, err := c.res(TemplatesGVR).Get(ctx, tpl.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.Object["spec"].(map[string]any)["defaulted"] = "by the server"
	if _, err := c.res(TemplatesGVR).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.ApplyTemplate(ctx, tpl); err != nil || got != "" {
		t.Fatalf("apply over server defaults = %q, %v", got, err)
	}
	tpl.Spec.EnvVarsInjectionPolicy = "Disallowed"
	if got, err := c.ApplyTemplate(ctx, tpl); err != nil || got != "updated" {
		t.Fatalf("changed apply = %q, %v", got, err)
	}
	got, err := c.Templates(ctx, "")
	if err != nil || len(got) != 1 || got[0].Spec.EnvVarsInjectionPolicy != "Disallowed" {
		t.Fatalf("templates %+v, %v", got, err)
	}
}

func TestCreateClaimTwice(t *testing.T) {
	c := fakeClient()
	ctx := context.Background()
	claim := kubespec.Claim(kubespec.ClaimInput{Profile: "pp", DomainHash: "0123456789ab", Workspace: "/w", WarmPool: "pool"})
	if _, created, err := c.CreateClaim(ctx, claim); err != nil || !created {
		t.Fatalf("first: created %v, %v", created, err)
	}
	got, created, err := c.CreateClaim(ctx, claim)
	if err != nil || created || got.Name != claim.Name {
		t.Fatalf("second: %+v created %v, %v", got, created, err)
	}
	if err := c.Delete(ctx, ClaimsGVR, claim.Name); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, ClaimsGVR, claim.Name); err != nil {
		t.Fatalf("deleting a missing claim: %v", err)
	}
	if _, err := c.Claim(ctx, claim.Name); !errors.Is(err, ErrNotFound) {
		t.Fatalf("claim after delete: %v", err)
	}
}

func TestExitCode(t *testing.T) {
	cases := []struct {
		err   error
		code  int
		start bool
		fails bool
	}{
		{nil, 0, false, false},
		{utilexec.CodeExitError{Err: errors.New("command terminated with exit code 3"), Code: 3}, 3, false, false},
		{fmt.Errorf("wrapped: %w", utilexec.CodeExitError{Err: errors.New("x"), Code: 42}), 42, false, false},
		{errors.New(`OCI runtime exec failed: exec failed: unable to start container process: exec: "nope": executable file not found in $PATH: unknown`), 127, true, false},
		{errors.New(`failed to exec in container: exec /x: permission denied`), 126, true, false},
		{errors.New("error dialing backend: connection refused"), 0, false, true},
		{&exec.ExitError{}, 0, false, true},
	}
	for _, c := range cases {
		code, err := ExitCode(c.err)
		var se *StartError
		if code != c.code || errors.As(err, &se) != c.start || (err != nil && !c.start) != c.fails {
			t.Errorf("ExitCode(%v) = %d, %v", c.err, code, err)
		}
	}
}

// FuzzStartFailure: the runtime's message is the sandbox's text; any
// message maps to 0, 126 or 127 and never panics.
func FuzzStartFailure(f *testing.F) {
	for _, s := range []string{`exec: "x": executable file not found in $PATH`, "exec /a: permission denied", "", "EXEC NO SUCH FILE OR DIRECTORY"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		switch c := startFailure(s); c {
		case 0, 126, 127:
		default:
			t.Fatalf("startFailure(%q) = %d", s, c)
		}
	})
}
