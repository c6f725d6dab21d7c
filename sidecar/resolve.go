package sidecar

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/sidemirror/sidemirror/internal/properties"
)

// resolver substitutes value references, as Kafka's config providers do:
//
//	${env:NAME}       the environment variable NAME
//	${file:path:key}  the value of key in the properties file at path
//
// A reference may stand anywhere in a value, and a value may hold several.
// "${" not followed by a lower-case provider name and ':' is kept as is.
// Each referenced file is read once per resolver.
type resolver struct {
	files map[string]map[string]string
}

func newResolver() *resolver {
	return &resolver{files: make(map[string]map[string]string)}
}

// resolve returns value with its references substituted. Errors name key
// and the reference, never the value around it (it may be a secret).
func (r *resolver) resolve(key, value string) (string, error) {
	var b strings.Builder
	rest := value
	for {
		i := strings.Index(rest, "${")
		if i < 0 {
			b.WriteString(rest)
			return b.String(), nil
		}
		provider, ok := referenceProvider(rest[i+2:])
		if !ok {
			b.WriteString(rest[:i+2])
			rest = rest[i+2:]
			continue
		}
		end := strings.IndexByte(rest[i:], '}')
		if end < 0 {
			return "", configErr(key, "%s has an unterminated ${%s:...} reference (expected ${env:NAME} or ${file:path:key})",
				display(key, value), provider)
		}
		ref := rest[i : i+end+1]
		arg := ref[len("${")+len(provider)+1 : len(ref)-1]
		v, err := r.lookup(key, ref, provider, arg)
		if err != nil {
			return "", err
		}
		b.WriteString(rest[:i])
		b.WriteString(v)
		rest = rest[i+end+1:]
	}
}

// referenceProvider returns the provider name at the start of s if s starts
// with a lower-case word followed by ':'.
func referenceProvider(s string) (string, bool) {
	n := 0
	for n < len(s) && s[n] >= 'a' && s[n] <= 'z' {
		n++
	}
	if n == 0 || n >= len(s) || s[n] != ':' {
		return "", false
	}
	return s[:n], true
}

func (r *resolver) lookup(key, ref, provider, arg string) (string, error) {
	switch provider {
	case "env":
		if arg == "" {
			return "", configErr(key, "%s names no environment variable (expected ${env:NAME})", ref)
		}
		v, ok := os.LookupEnv(arg)
		if !ok {
			return "", configErr(key, "%s refers to environment variable %s, which is not set", ref, arg)
		}
		return v, nil
	case "file":
		i := strings.LastIndexByte(arg, ':')
		if i <= 0 || i == len(arg)-1 {
			return "", configErr(key, "%s names no file and key (expected ${file:/absolute/path.properties:key})", ref)
		}
		path, k := arg[:i], arg[i+1:]
		if !filepath.IsAbs(path) {
			return "", configErr(key, "%s: path %q is not absolute (expected ${file:/absolute/path.properties:key})", ref, path)
		}
		props, err := r.file(path)
		if err != nil {
			e := configErr(key, "%s: %v", ref, err)
			e.Cause = err
			return "", e
		}
		v, ok := props[k]
		if !ok {
			return "", configErr(key, "%s: %s has no key %q", ref, path, k)
		}
		return v, nil
	default:
		return "", configErr(key, "%s uses unknown provider %q (expected ${env:NAME} or ${file:path:key})", ref, provider)
	}
}

// file reads and caches the properties file at path.
func (r *resolver) file(path string) (map[string]string, error) {
	if m, ok := r.files[path]; ok {
		return m, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &readError{path: path, err: err}
	}
	defer f.Close()
	props, err := properties.Parse(f)
	if err != nil {
		return nil, &readError{path: path, err: err}
	}
	m := make(map[string]string, len(props))
	for _, p := range props {
		m[p.Key] = p.Value
	}
	r.files[path] = m
	return m, nil
}

// readError prints "cannot read <path>: <reason>" for a file that could not
// be opened, and "<path>: line N: ..." for one that does not parse.
type readError struct {
	path string
	err  error
}

func (e *readError) Error() string {
	if _, ok := e.err.(*properties.SyntaxError); ok {
		return e.path + ": " + e.err.Error()
	}
	return "cannot read " + e.path + ": " + unwrapPathError(e.err).Error()
}

func (e *readError) Unwrap() error { return e.err }
