package properties

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, and what it accepts survives a round
// trip: the entries, written back with every special character escaped,
// parse to the same keys and values in the same order.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"a=b\n# comment\n! too\nc : d\ne f\n",
		"key = value \\\n   continued\n",
		"k=\\u00e9\\uD83D\\uDE00\\t\\n\n",
		"dup=1\ndup=2\n",
		"\xef\xbb\xbfx=y\r\nz=w\r",
		"k=\\u12",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		props, err := Parse(strings.NewReader(s))
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || !errors.Is(err, ErrSyntax) {
				t.Fatalf("Parse error %v is not a *SyntaxError", err)
			}
			return
		}
		var b strings.Builder
		for _, p := range props {
			b.WriteString(escapeProperty(p.Key, true) + "=" + escapeProperty(p.Value, false) + "\n")
		}
		again, err := Parse(strings.NewReader(b.String()))
		if err != nil {
			t.Fatalf("re-parsing %q: %v", b.String(), err)
		}
		if len(again) != len(props) {
			t.Fatalf("round trip: %d entries became %d", len(props), len(again))
		}
		for i := range props {
			if props[i].Key != again[i].Key || props[i].Value != again[i].Value {
				t.Fatalf("round trip: %q=%q became %q=%q", props[i].Key, props[i].Value, again[i].Key, again[i].Value)
			}
		}
	})
}

// escapeProperty escapes a key or value as java.util.Properties.store does.
func escapeProperty(s string, key bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' || c == '=' || c == ':' || c == '#' || c == '!':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == ' ' && (key || i == 0):
			b.WriteString(`\ `)
		case c == '\t' || c == '\f':
			b.WriteByte('\\')
			b.WriteByte(map[byte]byte{'\t': 't', '\f': 'f'}[c])
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// FuzzResolve: Resolve never panics; a value without "${" comes back
// unchanged; a failure is a *ReferenceError naming the key, and for a
// secret key its message never contains the value.
func FuzzResolve(f *testing.F) {
	dir := f.TempDir()
	file := dir + "/secrets.properties"
	if err := writeFile(file, "pw=hunter2\nuser=alice\n"); err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		"plain value",
		"${env:SIDEMIRROR_FUZZ}",
		"a ${file:" + file + ":pw} b ${env:SIDEMIRROR_FUZZ}",
		"${file:" + file + ":missing}",
		"${file:relative:x}",
		"${nope:x}",
		"${env:",
		"$${env:X}}",
	} {
		f.Add("sasl.jaas.config", s)
		f.Add("bootstrap.servers", s)
	}
	env := map[string]string{"SIDEMIRROR_FUZZ": "from-env"}
	f.Fuzz(func(t *testing.T, key, value string) {
		r := &Resolver{LookupEnv: func(n string) (string, bool) { v, ok := env[n]; return v, ok }}
		got, err := r.Resolve(key, value)
		if err != nil {
			var re *ReferenceError
			if !errors.As(err, &re) || re.Key != key || !errors.Is(err, ErrReference) {
				t.Fatalf("Resolve(%q, %q) error %v is not a *ReferenceError for the key", key, value, err)
			}
			// References are named in errors; the text around them may be
			// a secret and must not be.
			for _, part := range outsideReferences(value) {
				if IsSecret(key) && len(part) >= 6 && strings.Contains(re.Msg, part) {
					t.Fatalf("error %q shows %q of the secret value", err, part)
				}
			}
			return
		}
		if !strings.Contains(value, "${") && got != value {
			t.Fatalf("Resolve changed %q, which has no reference, into %q", value, got)
		}
		if !HasReference(value) && got != value {
			t.Fatalf("HasReference(%q) = false, but Resolve changed it into %q", value, got)
		}
	})
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

// outsideReferences returns the parts of value outside ${...} spans.
func outsideReferences(value string) []string {
	var parts []string
	for {
		i := strings.Index(value, "${")
		if i < 0 {
			return append(parts, value)
		}
		parts = append(parts, value[:i])
		j := strings.IndexByte(value[i:], '}')
		if j < 0 {
			return parts
		}
		value = value[i+j+1:]
	}
}
