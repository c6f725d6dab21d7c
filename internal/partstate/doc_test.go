package partstate

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/operations.md's partition state section from the table")

const (
	guide      = "../../docs/operations.md"
	beginGuide = "<!-- partition states: generated from internal/partstate by `go test ./internal/partstate -run TestOperationsGuide -update`; do not edit -->\n"
	endGuide   = "<!-- end of partition states -->\n"
)

// TestOperationsGuide checks that the operations guide shows the table as
// it is: it fails when either changes alone.
func TestOperationsGuide(t *testing.T) {
	b, err := os.ReadFile(guide)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, beginGuide), strings.Index(doc, endGuide)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated partition state section (%q ... %q)", guide, beginGuide, endGuide)
	}
	have, want := doc[i+len(beginGuide):j], Markdown()
	if have == want {
		return
	}
	if *update {
		if err := os.WriteFile(guide, []byte(doc[:i+len(beginGuide)]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s's partition state section differs from the table; run go test ./internal/partstate -run TestOperationsGuide -update.\nhave:\n%s\nwant:\n%s", guide, have, want)
}
