package lint

import (
	"os"
	"strconv"
	"testing"
)

func itoa(i int) string { return strconv.Itoa(i) }

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
