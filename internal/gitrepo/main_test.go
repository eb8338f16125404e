package gitrepo

import (
	"testing"

	"github.com/lazaret-dev/lazaret/internal/gitrepo/gittest"
)

func TestMain(m *testing.M) { gittest.Main(m) }

func newRepo(t testing.TB) string { t.Helper(); return gittest.NewRepo(t) }
