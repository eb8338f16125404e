package kubespec

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The NetworkPolicy enforcement probe: a server pod listens on ProbePort;
// a control client (no policy) must reach it, proving the probe can
// connect at all; a denied client, selected by a deny-all-egress
// NetworkPolicy, must not. Their exit codes say what happened.
const (
	ProbePort      = 8080
	LabelProbe     = "lazaret.dev/probe"
	LabelProbeRole = "lazaret.dev/probe-role"
	// ProbeRecord is the ConfigMap where the last probe's result is kept
	// for the starts that follow.
	ProbeRecord = "lazaret-netpolicy-probe"

	ProbeConnected = 0 // the client connected
	ProbeFailed    = 1 // it could not connect
	ProbeNoTool    = 3 // the image has no tool to listen or connect
)

// probeServer listens with whatever the image has (busybox's nc: -ll
// keeps listening, each connection runs true and is closed at once).
const probeServer = `p=8080
if command -v busybox >/dev/null 2>&1; then exec busybox nc -ll -p $p -e true; fi
if command -v nc >/dev/null 2>&1; then while :; do nc -l -p $p </dev/null; done; fi
if command -v python3 >/dev/null 2>&1; then exec python3 -m http.server $p; fi
exit 3`

// probeClient tries to connect three times, two seconds apart, and exits
// with the last attempt's result (a policy programmed a moment after the
// pod started is still seen).
const probeClient = `try() {
  if command -v busybox >/dev/null 2>&1; then busybox nc -w 3 "$1" 8080 </dev/null; return $?; fi
  if command -v bash >/dev/null 2>&1 && command -v timeout >/dev/null 2>&1; then timeout 3 bash -c 'exec 3<>/dev/tcp/$0/8080' "$1" 2>/dev/null; return $?; fi
  if command -v nc >/dev/null 2>&1; then nc -z -w 3 "$1" 8080; return $?; fi
  if command -v python3 >/dev/null 2>&1; then python3 -c 'import socket,sys; socket.create_connection((sys.argv[1],8080),3)' "$1"; return $?; fi
  exit 3
}
r=1
for i in 1 2 3; do if try "$PROBE_SERVER"; then r=0; else r=1; fi; sleep 2; done
exit $r`

// ProbeInput names one probe run.
type ProbeInput struct {
	ID           string // unique, lower-case hex
	Image        string
	PullPolicy   string
	RuntimeClass string
}

// ProbeServer is the listening pod.
func ProbeServer(in ProbeInput) *corev1.Pod {
	return probePod(in, "server", []string{"/bin/sh", "-c", probeServer}, nil)
}

// ProbeClient is a client pod of role "control" or "denied" connecting
// to serverIP.
func ProbeClient(in ProbeInput, role, serverIP string) *corev1.Pod {
	return probePod(in, role, []string{"/bin/sh", "-c", probeClient}, []corev1.EnvVar{{Name: "PROBE_SERVER", Value: serverIP}})
}

// ProbeDenyPolicy denies all egress of the probe's denied client.
func ProbeDenyPolicy(in ProbeInput) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "lazaret-probe-" + in.ID, Labels: probeLabels(in.ID, "")},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelProbe: in.ID, LabelProbeRole: "denied"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		},
	}
}

func probeLabels(id, role string) map[string]string {
	l := map[string]string{LabelManagedBy: ManagedByValue, LabelProbe: id}
	if role != "" {
		l[LabelProbeRole] = role
	}
	return l
}

func probePod(in ProbeInput, role string, cmd []string, env []corev1.EnvVar) *corev1.Pod {
	f := false
	rc := in.RuntimeClass
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "lazaret-probe-" + in.ID + "-" + role, Labels: probeLabels(in.ID, role)},
		Spec: corev1.PodSpec{
			RuntimeClassName:              &rc,
			AutomountServiceAccountToken:  &f,
			EnableServiceLinks:            &f,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr64(0),
			Containers: []corev1.Container{{
				Name: "probe", Image: in.Image, ImagePullPolicy: corev1.PullPolicy(in.PullPolicy), Command: cmd, Env: env,
				SecurityContext: &corev1.SecurityContext{
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					AllowPrivilegeEscalation: &f,
				},
			}},
		},
	}
}
