package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"

	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// ctlOps are the operations `lazaret-netd ctl` forwards: what lazaret-kube
// asks of a running pod's netd (the live policy and denials, a proposal's
// approval). Secrets never travel through an exec's stdin, and claims,
// holds and whole-policy replacements are not its business.
var ctlOps = map[string]bool{netdapi.OpStatus: true, netdapi.OpAllow: true, netdapi.OpDecide: true}

// ctl is `lazaret-netd ctl [SOCKET]`, the client lazaret-kube runs by an
// exec into the pod's netd container (docs/KUBERNETES.md, "netd's control
// socket in the pod"): the control socket is in an emptyDir only that
// container mounts, so nothing else in the pod, the agent included, can
// reach it. It reads one request (a netdapi.Request as one JSON line) on
// stdin, sends it to SOCKET (the pod's by default) and writes netd's
// answer as one JSON line on stdout, an error answer included. Exit 0:
// netd answered; 1: it did not; 2: a bad request.
func ctl(ctx context.Context, args []string, in io.Reader, out, errw io.Writer) int {
	socket := path.Join(netdapi.PodRunDir, netdapi.PodControlSocket)
	if len(args) > 1 {
		fmt.Fprintln(errw, "usage: lazaret-netd ctl [SOCKET] < request.json")
		return 2
	}
	if len(args) == 1 {
		socket = args[0]
	}
	req, err := readCtlRequest(in)
	if err != nil {
		fmt.Fprintf(errw, "lazaret-netd ctl: %v\n", err)
		return 2
	}
	resp, err := (&netdapi.Client{Socket: socket}).Do(ctx, req)
	if resp == nil {
		fmt.Fprintf(errw, "lazaret-netd ctl: %v\n", err)
		return 1
	}
	b, err := json.Marshal(resp)
	if err != nil {
		fmt.Fprintf(errw, "lazaret-netd ctl: %v\n", err)
		return 1
	}
	if _, err := out.Write(append(b, '\n')); err != nil {
		return 1
	}
	return 0
}

// readCtlRequest reads and checks the one request line.
func readCtlRequest(in io.Reader) (netdapi.Request, error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 4096), netdapi.MaxMessage)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return netdapi.Request{}, fmt.Errorf("reading the request: %w", err)
		}
		return netdapi.Request{}, errors.New("no request on stdin")
	}
	var req netdapi.Request
	if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
		return netdapi.Request{}, fmt.Errorf("the request is not a control request: %w", err)
	}
	if !ctlOps[req.Op] {
		return netdapi.Request{}, fmt.Errorf("operation %q is not forwarded (only status, allow and decide are)", req.Op)
	}
	return req, nil
}
