package refsync

import (
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo/gittest"
)

func TestMain(m *testing.M) { gittest.Main(m) }
