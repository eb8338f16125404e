package image

import (
	"strings"
	"testing"
)

// defaultRecipeHash is the hash identifying the default image's recipe.
func defaultRecipeHash() string { return recipes()["default"].hash() }

func TestRecipeIsStableAndSensitive(t *testing.T) {
	a := defaultRecipeHash()
	if a != defaultRecipeHash() || len(a) != 16 {
		t.Fatalf("defaultRecipeHash() = %q, not stable", a)
	}
	saved := defaultRecipe
	defer func() { defaultRecipe = saved }()
	defaultRecipe = append(append([]string{}, saved...), "--include=vim")
	if defaultRecipeHash() == a {
		t.Fatal("a changed recipe kept its hash: old images would never be rebuilt")
	}
}

func TestProgressWriter(t *testing.T) {
	var out strings.Builder
	p := &progressWriter{w: &out}
	p.Write([]byte("I: downloading\nsome apt noise\nW: careful\nI: do"))
	p.Write([]byte("ne\nE: broke\n"))
	want := "    I: downloading\n    W: careful\n    I: done\n    E: broke\n"
	if out.String() != want {
		t.Fatalf("relayed %q, want %q", out.String(), want)
	}
	if tail := p.tail(); !strings.Contains(tail, "E: broke") || !strings.Contains(tail, "some apt noise") {
		t.Fatalf("tail = %q", tail)
	}
}
