package dashboard

import (
	"os"
	"os/exec"
	"testing"
)

// The dashboard builds where an int has 32 bits (GOARCH=386), as the rest
// of the module does: its constants fit there too.
func TestBuildsWithA32BitInt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package with the go command")
	}
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", os.DevNull, ".")
	cmd.Env = append(os.Environ(), "GOARCH=386", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GOARCH=386 go build: %v\n%s", err, out)
	}
}
