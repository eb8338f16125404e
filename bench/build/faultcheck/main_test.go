package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The register check sees a change in any register (its control: a
// check that could not fail would prove nothing in the sandbox).
func TestHoldVectorsRoundTrip(t *testing.T) {
	if !haveAVX512() {
		t.Skip("no AVX-512")
	}
	var in, out [256]uint64
	var kin, kout [8]uint64
	for j := range in {
		in[j] = uint64(j)*0x0101010101010101 + 7
	}
	for j := range kin {
		kin[j] = uint64(j) << 33
	}
	holdVectors(&in, &out, &kin, &kout, 1, 10)
	if err := compareVectors(&in, &out, &kin, &kout); err != nil {
		t.Fatal(err)
	}
	out[8*17+3] ^= 1 << 40
	if err := compareVectors(&in, &out, &kin, &kout); err == nil || !strings.Contains(err.Error(), "zmm17 qword 3") {
		t.Fatalf("a flipped bit in zmm17: %v", err)
	}
	out[8*17+3] ^= 1 << 40
	kout[5] ^= 1
	if err := compareVectors(&in, &out, &kin, &kout); err == nil || !strings.Contains(err.Error(), "k5") {
		t.Fatalf("a flipped bit in k5: %v", err)
	}
}

// The mmap check sees a file whose content is not what was written.
func TestReadBackSeesACorruptedFile(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	data := content(42, 8192)
	if err := writeFile(name, data, true); err != nil {
		t.Fatal(err)
	}
	if err := readBack(name, 42, len(data)); err != nil {
		t.Fatal(err)
	}
	data[5000] ^= 0xff
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := readBack(name, 42, len(data)); err == nil || !strings.Contains(err.Error(), "byte 5000") {
		t.Fatalf("a corrupted byte: %v", err)
	}
}
