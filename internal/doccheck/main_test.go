package doccheck

import (
	"fmt"
	"os"
	"testing"
)

// TestMain runs the tests from the module's root, where the documents are
// and where the go command they run finds the module.
func TestMain(m *testing.M) {
	if err := os.Chdir("../.."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}
