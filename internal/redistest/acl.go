package redistest

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// DocumentedACL returns the ACL rules docs/deployment.md gives for
// feature: the "ACL SETUSER relock ..." line after the comment line that
// starts with "# "+feature, without "on" and the password. Tests build
// their users from it, so that the documented user is the tested one.
func DocumentedACL(t testing.TB, feature string) []string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	f, err := os.Open(filepath.Join(root, "docs", "deployment.md"))
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	defer f.Close()
	found := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "# "+feature):
			found = true
		case found && strings.HasPrefix(line, "ACL SETUSER relock "):
			var rules []string
			for _, r := range strings.Fields(strings.TrimPrefix(line, "ACL SETUSER relock ")) {
				if r != "on" && !strings.HasPrefix(r, ">") {
					rules = append(rules, r)
				}
			}
			return rules
		}
	}
	t.Fatalf("redistest: docs/deployment.md has no ACL line for %q", feature)
	return nil
}

// moduleRoot is the directory of relock's go.mod, above the working
// directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/relock-go/relock\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}
