package layout

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestFileMaps checks that every package of the module has a file map, in
// its DESIGN.md or its package comment, that names every non-test Go file
// it has and no Go file that does not exist: a newcomer finds each file's
// role from the docs, and a file added, renamed or removed without its map
// fails here. A package of one file is
// its own map, and doc.go, where a package comment lives, need not name
// itself.
func TestFileMaps(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "../../...").Output()
	if err != nil {
		t.Skipf("go list is not available here: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	for dec.More() {
		var pkg struct {
			ImportPath string
			Dir        string
			GoFiles    []string
		}
		if err := dec.Decode(&pkg); err != nil {
			t.Fatal(err)
		}
		if len(pkg.GoFiles) < 2 {
			continue
		}
		checked++
		docs := packageComments(t, pkg.Dir, pkg.GoFiles)
		if b, err := os.ReadFile(filepath.Join(pkg.Dir, "DESIGN.md")); err == nil {
			docs += string(b)
		}
		for _, f := range pkg.GoFiles {
			if f != "doc.go" && !strings.Contains(docs, f) {
				t.Errorf("%s: the file map (DESIGN.md or the package comment) does not name %s", pkg.ImportPath, f)
			}
		}
		// And it names no file that is gone: a Go file it names exists in
		// the package's directory (a path, under it or under the
		// repository's root).
		for _, name := range goFileName.FindAllString(docs, -1) {
			if !exists(filepath.Join(pkg.Dir, name)) && !exists(filepath.Join("..", "..", name)) {
				t.Errorf("%s: the file map (DESIGN.md or the package comment) names %s, which does not exist", pkg.ImportPath, name)
			}
		}
	}
	if checked < 5 {
		t.Fatalf("checked only %d packages: go list found too little", checked)
	}
}

// goFileName matches the name or path of a Go file in prose.
var goFileName = regexp.MustCompile(`[A-Za-z0-9_][A-Za-z0-9_/.-]*\.go\b`)

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// packageComments returns the package comments of files in dir.
func packageComments(t *testing.T, dir string, files []string) string {
	t.Helper()
	var b strings.Builder
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc != nil {
			b.WriteString(f.Doc.Text())
		}
	}
	return b.String()
}
