package kubespec

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
)

func testSidecar(cm string) *Sidecar {
	always := corev1.ContainerRestartPolicyAlways
	return &Sidecar{
		Container:     corev1.Container{Name: "netd", Image: "netd:1", RestartPolicy: &always},
		ConfigMapData: map[string]string{"policy.json": "{}"},
		Volumes:       []corev1.Volume{{Name: "netd", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}},
	}
}

func mustHash(t *testing.T, v any) string {
	t.Helper()
	h, err := contentHash(v)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func stateInput(t *testing.T) Input {
	in := testInput(t)
	in.State = &State{Claim: StateName("dev_box", ""), Dirs: []string{"/usr", "/var/lib/dpkg"}}
	return in
}

// TestTemplateState: the PVC is a volume of the pod, the seed container
// runs first and sees the whole volume, the agent mounts each dir's
// sub-path and never the volume's root (where the markers are).
func TestTemplateState(t *testing.T) {
	in := stateInput(t)
	in.Sidecar = func(_ netpolicy.Policy, cm string) (*Sidecar, error) { return testSidecar(cm), nil }
	objs, err := Template(in)
	if err != nil {
		t.Fatal(err)
	}
	pod := objs.Template.Spec.PodTemplate.Spec
	if len(pod.InitContainers) != 2 || pod.InitContainers[0].Name != SeedContainer || pod.InitContainers[1].Name != "netd" {
		t.Fatalf("init containers %+v: want the seed container before the sidecar", pod.InitContainers)
	}
	var vol *corev1.Volume
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == StateVolume {
			vol = &pod.Volumes[i]
		}
	}
	if vol == nil || vol.PersistentVolumeClaim == nil || vol.PersistentVolumeClaim.ClaimName != "lazaret-state-dev-box-"+mustHash(t, "dev_box") || vol.PersistentVolumeClaim.ReadOnly {
		t.Fatalf("state volume %+v", vol)
	}
	got := map[string]string{}
	for _, m := range pod.Containers[0].VolumeMounts {
		if m.Name == StateVolume {
			if m.SubPath == "" {
				t.Errorf("the agent mounts the volume's root at %s", m.MountPath)
			}
			got[m.MountPath] = m.SubPath
		}
	}
	if len(got) != 2 || got["/usr"] != "usr" || got["/var/lib/dpkg"] != "var_lib_dpkg" {
		t.Errorf("agent mounts %v", got)
	}
	seed := pod.InitContainers[0]
	if seed.Image != in.Image || len(seed.VolumeMounts) != 1 || seed.VolumeMounts[0].MountPath != StateMount || seed.VolumeMounts[0].SubPath != "" {
		t.Errorf("seed container %+v", seed)
	}
	if args := strings.Join(seed.Command[3:], " "); args != "lazaret-seed /usr usr /var/lib/dpkg var_lib_dpkg" {
		t.Errorf("seed args %q", args)
	}
	if len(seed.Env) != 1 || seed.Env[0].Name != SeedImageEnv || seed.Env[0].Value != in.Image {
		t.Errorf("seed env %+v: only the image, none of the profile's", seed.Env)
	}
	if seed.RestartPolicy != nil {
		t.Error("the seed container is a sidecar: the agent would not wait for it")
	}
	plain, _ := Template(testInput(t))
	if plain.Template.Name == objs.Template.Name {
		t.Error("the state does not change the template's name")
	}
}

// TestSeedHardening: the seed container reads what the agent wrote, so it
// has the agent container's restrictions, one by one; the pod's runtime
// class (gVisor) covers it too.
func TestSeedHardening(t *testing.T) {
	objs, err := Template(stateInput(t))
	if err != nil {
		t.Fatal(err)
	}
	pod := objs.Template.Spec.PodTemplate.Spec
	if pod.RuntimeClassName == nil || *pod.RuntimeClassName != "gvisor" || pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Error("runtime class or host namespaces")
	}
	sc := pod.InitContainers[0].SecurityContext
	if sc == nil || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0 {
		t.Fatal("seed container: capabilities not all dropped")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Privileged == nil || *sc.Privileged ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("seed container: privilege escalation, privileged or seccomp")
	}
	// Its own copy: hardening the agent later cannot be lost by aliasing.
	if sc == pod.Containers[0].SecurityContext {
		t.Error("the seed container shares the agent's SecurityContext pointer")
	}
	r := pod.InitContainers[0].Resources
	if r.Limits.Cpu().String() != "1500m" || r.Limits.Memory().String() != "4Gi" {
		t.Errorf("seed container limits %v", r.Limits)
	}
}

func TestStatePVC(t *testing.T) {
	p, err := StatePVC(StateInput{Profile: "dev_box", Size: "10Gi"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != StateName("dev_box", "") || p.Labels[LabelManagedBy] != ManagedByValue || p.Labels[LabelProfile] != "dev_box" ||
		p.Labels[LabelStateScope] != "profile" || p.Labels[LabelDomain] != "" || len(p.OwnerReferences) != 0 || p.Spec.StorageClassName != nil {
		t.Errorf("profile PVC %+v", p)
	}
	if q := p.Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "10Gi" || p.Spec.AccessModes[0] != corev1.ReadWriteOnce {
		t.Errorf("request %v, modes %v", q, p.Spec.AccessModes)
	}
	w, err := StatePVC(StateInput{Profile: "dev_box", DomainHash: "0123456789ab", Workspace: "/w", StorageClass: "fast", Size: "1Gi"})
	if err != nil {
		t.Fatal(err)
	}
	if w.Name != "lazaret-state-0123456789ab" || w.Labels[LabelStateScope] != "workspace" || w.Labels[LabelDomain] != "0123456789ab" ||
		w.Annotations[AnnotationWorkspace] != "/w" || w.Spec.StorageClassName == nil || *w.Spec.StorageClassName != "fast" {
		t.Errorf("workspace PVC %+v", w)
	}
	if _, err := StatePVC(StateInput{Profile: "p", Size: "lots"}); err == nil {
		t.Error("a bad size accepted")
	}
	if StateName("a_b", "") == StateName("a-b", "") || CheckName(StateName("a_b", "")) != nil {
		t.Errorf("profile names a_b and a-b: %s, %s", StateName("a_b", ""), StateName("a-b", ""))
	}
}

func TestStateDirsChecked(t *testing.T) {
	for _, dirs := range [][]string{{"usr"}, {"/"}, {"/usr/"}, {StateMount}, {StateMount + "/x"}, {"/a/b", "/a_b"}, {"/.x.image"}} {
		in := testInput(t)
		in.State = &State{Claim: "c", Dirs: dirs}
		if _, err := Template(in); err == nil {
			t.Errorf("dirs %q accepted", dirs)
		}
	}
}

// TestSeedScript runs the seed script with the host's sh and cp on a
// fake image and volume: first use copies, the marker skips, an image
// change copies the new image's files over and keeps the agent's, a
// symbolic link in the image is refused.
func TestSeedScript(t *testing.T) {
	if _, err := exec.LookPath("cp"); err != nil {
		t.Skip("no cp")
	}
	// dash (Debian's sh) and busybox's sh (the tier's test image).
	for _, sh := range [][]string{{"/bin/sh"}, {"/bin/busybox", "sh"}} {
		if _, err := os.Stat(sh[0]); err != nil {
			continue
		}
		t.Run(filepath.Base(sh[0]), func(t *testing.T) { testSeedScript(t, sh) })
	}
}

func testSeedScript(t *testing.T, sh []string) {
	tmp := t.TempDir()
	img, vol := filepath.Join(tmp, "img"), filepath.Join(tmp, "vol")
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	read := func(p string) string { b, _ := os.ReadFile(p); return string(b) }
	write(img+"/usr/bin/tool", "v1")
	if err := os.MkdirAll(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	script := strings.Replace(seedScript, "root="+StateMount, "root="+vol, 1)
	seed := func(image string, args ...string) error {
		cmd := exec.Command(sh[0], append(append(sh[1:], "-c", script, "lazaret-seed"), args...)...)
		cmd.Env = []string{SeedImageEnv + "=" + image, "PATH=/usr/bin:/bin"}
		out, err := cmd.CombinedOutput()
		t.Logf("seed %s: %s", image, out)
		return err
	}
	if err := seed("img:1", img+"/usr", "usr", img+"/none", "none"); err != nil {
		t.Fatal(err)
	}
	if read(vol+"/usr/bin/tool") != "v1" || read(vol+"/.usr.image") != "img:1\n" || read(vol+"/.none.image") != "img:1\n" {
		t.Fatal("first use did not copy the image's dir")
	}
	write(vol+"/usr/local/bin/mine", "agent")
	write(img+"/usr/bin/tool", "v2")
	if err := seed("img:1", img+"/usr", "usr"); err != nil || read(vol+"/usr/bin/tool") != "v1" {
		t.Fatal("the same image copied again")
	}
	if err := seed("img:2", img+"/usr", "usr"); err != nil {
		t.Fatal(err)
	}
	if read(vol+"/usr/bin/tool") != "v2" || read(vol+"/usr/local/bin/mine") != "agent" || read(vol+"/.usr.image") != "img:2\n" {
		t.Error("an image change: want the new image's file and the agent's kept")
	}
	if err := os.Symlink("usr", img+"/lnk"); err != nil {
		t.Fatal(err)
	}
	if err := seed("img:3", img+"/lnk", "lnk"); err == nil {
		t.Error("a symbolic link in the image seeded")
	}
	if _, err := os.Stat(vol + "/lnk"); err == nil {
		t.Error("the link was copied")
	}
}

// TestSeedScriptWithoutCapabilities runs the seed as the pod does: root
// without capabilities (setpriv drops them all). A directory of another
// user closed to others (Debian's /var/lib/apt/lists/partial) cannot be
// read: it is skipped and logged, the rest is copied. Control: cp alone,
// as restricted, fails on it.
func TestSeedScriptWithoutCapabilities(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and setpriv")
	}
	tmp := t.TempDir()
	img, vol := filepath.Join(tmp, "img"), filepath.Join(tmp, "vol")
	for _, d := range []string{img + "/lib/apt/partial", vol} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(img+"/lib/apt/pkgs", []byte("list"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(img+"/lib/apt/partial", 1234, 1234); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(img+"/lib/apt/partial", 0o700); err != nil {
		t.Fatal(err)
	}
	// The temp dir's parents must be searchable without capabilities.
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	nocaps := []string{setpriv, "--inh-caps=-all", "--bounding-set=-all", "--securebits=+noroot"}
	run := func(args ...string) ([]byte, error) {
		cmd := exec.Command(nocaps[0], append(nocaps[1:], args...)...)
		cmd.Env = []string{SeedImageEnv + "=img:1", "PATH=/usr/bin:/bin"}
		return cmd.CombinedOutput()
	}
	if out, err := run("cp", "-a", img+"/lib", filepath.Join(tmp, "control")); err == nil {
		t.Fatalf("control: cp without capabilities read the closed dir:\n%s", out)
	}
	script := strings.Replace(seedScript, "root="+StateMount, "root="+vol, 1)
	out, err := run("/bin/sh", "-c", script, "lazaret-seed", img+"/lib", "lib")
	t.Logf("seed: %s", out)
	if err != nil {
		t.Fatalf("seed failed: %v", err)
	}
	if !strings.Contains(string(out), "skipped: ") || !strings.Contains(string(out), "Permission denied") {
		t.Error("the skipped dir is not logged")
	}
	if b, _ := os.ReadFile(vol + "/lib/apt/pkgs"); string(b) != "list" {
		t.Error("the readable rest was not copied")
	}
}
