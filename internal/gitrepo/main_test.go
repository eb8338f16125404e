package gitrepo

import (
	"testing"

	"github.com/lazaret-dev/lazaret/internal/domain"
	"github.com/lazaret-dev/lazaret/internal/gitrepo/gittest"
)

func TestMain(m *testing.M) { gittest.Main(m) }

func hg(t testing.TB, dir string, args ...string) string {
	t.Helper()
	return gittest.Git(t, dir, args...)
}
func write(t testing.TB, path, content string) { t.Helper(); gittest.Write(t, path, content) }
func newRepo(t testing.TB) string              { t.Helper(); return gittest.NewRepo(t) }
func testAnchor(t testing.TB, ws, profile string) *domain.Anchor {
	t.Helper()
	return gittest.Anchor(t, ws, profile)
}
