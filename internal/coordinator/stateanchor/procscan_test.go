package stateanchor

import "testing"

func TestFuseMountPoint(t *testing.T) {
	for in, want := range map[string]string{
		"fuse-overlayfs\x00-o\x00lowerdir=/a,upperdir=/b,workdir=/c\x00/d/m\x00": "/d/m",
		"/usr/bin/fuse-overlayfs\x00-o\x00lowerdir=/a\x00/d/m\x00":               "/d/m",
		"fuse-overlayfs\x00-o\x00x\x00relative\x00":                              "",
		"fuse-overlayfs\x00-o\x00x\x00/d/../m\x00":                               "",
		"sh\x00-c\x00fuse-overlayfs\x00/d/m\x00":                                 "",
		"":                                                                       "",
		"fuse-overlayfs\x00":                                                     "",
	} {
		got, ok := fuseMountPoint([]byte(in))
		if got != want || ok != (want != "") {
			t.Errorf("fuseMountPoint(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func FuzzFuseMountPoint(f *testing.F) {
	f.Add([]byte("fuse-overlayfs\x00-o\x00lowerdir=/a\x00/d/m\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if mp, ok := fuseMountPoint(data); ok && (mp == "" || mp[0] != '/') {
			t.Fatalf("%q", mp)
		}
	})
}
