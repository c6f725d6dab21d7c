package coordinator

import (
	"os"
	"strings"
	"testing"
)

// TestDocsCoverEveryMirrorKey keeps docs/configuration.md in step with the
// mirror.* keys and fetch sizes a mirror config accepts (each has a row
// with its default) and the consumer properties it refuses (each named).
func TestDocsCoverEveryMirrorKey(t *testing.T) {
	docs, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for line := range strings.Lines(string(docs)) {
		cells := strings.Split(line, "|")
		if len(cells) > 3 {
			rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.TrimSpace(cells[2])
		}
	}
	for _, k := range sortedKeys(fetchKeys) {
		if def, ok := rows[k]; !ok || !strings.Contains(def, fetchKeys[k].def) {
			t.Errorf("docs/configuration.md has no row for %s with its default %s", k, fetchKeys[k].def)
		}
	}
	if _, ok := rows[RackKey]; !ok {
		t.Errorf("docs/configuration.md has no row for %s", RackKey)
	}
	for _, k := range sortedKeys(consumerOnlyKeys) {
		if !strings.Contains(string(docs), "`"+k+"`") {
			t.Errorf("docs/configuration.md does not name the refused consumer property %s", k)
		}
	}
	for _, k := range sortedKeys(mirrorKeys) {
		def, ok := rows[k]
		switch {
		case !ok:
			t.Errorf("docs/configuration.md has no row for %s", k)
		case mirrorKeys[k].def != "" && !strings.Contains(def, mirrorKeys[k].def):
			t.Errorf("docs/configuration.md gives %s the default %s, the code %q", k, def, mirrorKeys[k].def)
		}
	}
}
