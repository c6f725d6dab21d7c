package properties

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrReference is matched by every *ReferenceError.
var ErrReference = errors.New("properties: unresolvable reference")

// MaxReferencedFileBytes bounds a file that a ${file:...} reference reads.
const MaxReferencedFileBytes = 1 << 20

// ReferenceError reports a value reference that cannot be resolved. Its
// message names the key and the reference, never the value around it (it
// may hold a secret), nor the referenced value.
type ReferenceError struct {
	Key   string // the key whose value holds the reference
	Msg   string // what is wrong, naming the reference
	Cause error  // underlying error, such as an *fs.PathError
}

func (e *ReferenceError) Error() string { return e.Key + ": " + e.Msg }

// Unwrap returns ErrReference and the cause.
func (e *ReferenceError) Unwrap() []error {
	if e.Cause != nil {
		return []error{ErrReference, e.Cause}
	}
	return []error{ErrReference}
}

// Resolver substitutes value references as Kafka's config providers
// (FileConfigProvider, EnvVarConfigProvider) do:
//
//	${env:NAME}       the environment variable NAME
//	${file:path:key}  the value of key in the .properties file at path (absolute)
//
// A reference may stand anywhere in a value, and a value may hold several;
// substituted text is not searched for references again. "${" not followed
// by a lower-case provider name and ':' is kept as it is. Each referenced
// file is read once per Resolver, so that one configuration sees one version
// of a file. The sidecar's own file is resolved when it is loaded; mirror
// configs keep their references in the raft state and are resolved by each
// sidecar when it connects to the source.
//
// A Resolver is not safe for concurrent use.
type Resolver struct {
	// LookupEnv looks up environment variables; nil means os.LookupEnv.
	LookupEnv func(name string) (string, bool)

	files map[string]map[string]string
}

// NewResolver returns a Resolver over the process environment and the file
// system.
func NewResolver() *Resolver { return &Resolver{} }

// HasReference reports whether value holds a ${provider:...} reference that
// Resolve would substitute (or fail on).
func HasReference(value string) bool {
	for rest := value; ; {
		i := strings.Index(rest, "${")
		if i < 0 {
			return false
		}
		if _, ok := referenceProvider(rest[i+2:]); ok {
			return true
		}
		rest = rest[i+2:]
	}
}

// Resolve returns value with its references substituted. Errors are
// *ReferenceError naming key and the reference.
func (r *Resolver) Resolve(key, value string) (string, error) {
	if !strings.Contains(value, "${") {
		return value, nil
	}
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
			return "", r.fail(key, nil, "%s has an unterminated ${%s:...} reference (expected ${env:NAME} or ${file:path:key})",
				shown(key, value), provider)
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

// ResolveAll resolves every value of props and returns a new map.
func (r *Resolver) ResolveAll(props map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(props))
	for _, k := range slices.Sorted(maps.Keys(props)) {
		v, err := r.Resolve(k, props[k])
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

func (r *Resolver) fail(key string, cause error, format string, args ...any) *ReferenceError {
	return &ReferenceError{Key: key, Msg: fmt.Sprintf(format, args...), Cause: cause}
}

// shown quotes a value for an error message, or hides it if key is secret.
func shown(key, value string) string {
	if IsSecret(key) {
		return Hidden
	}
	return strconv.Quote(value)
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

func (r *Resolver) lookup(key, ref, provider, arg string) (string, error) {
	switch provider {
	case "env":
		if arg == "" {
			return "", r.fail(key, nil, "%s names no environment variable (expected ${env:NAME})", ref)
		}
		lookup := r.LookupEnv
		if lookup == nil {
			lookup = os.LookupEnv
		}
		v, ok := lookup(arg)
		if !ok {
			return "", r.fail(key, nil, "%s refers to environment variable %s, which is not set", ref, arg)
		}
		return v, nil
	case "file":
		i := strings.LastIndexByte(arg, ':')
		if i <= 0 || i == len(arg)-1 {
			return "", r.fail(key, nil, "%s names no file and key (expected ${file:/absolute/path.properties:key})", ref)
		}
		path, k := arg[:i], arg[i+1:]
		if !filepath.IsAbs(path) {
			return "", r.fail(key, nil, "%s: path %q is not absolute (expected ${file:/absolute/path.properties:key})", ref, path)
		}
		props, err := r.file(path)
		if err != nil {
			return "", r.fail(key, err, "%s: %v", ref, err)
		}
		v, ok := props[k]
		if !ok {
			return "", r.fail(key, nil, "%s: %s has no key %q", ref, path, k)
		}
		return v, nil
	default:
		return "", r.fail(key, nil, "%s uses unknown provider %q (expected ${env:NAME} or ${file:path:key})", ref, provider)
	}
}

// file reads and caches the properties file at path.
func (r *Resolver) file(path string) (map[string]string, error) {
	if m, ok := r.files[path]; ok {
		return m, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > MaxReferencedFileBytes {
		return nil, &FileError{Path: path, Err: fmt.Errorf("%d bytes is larger than the limit of %d bytes", st.Size(), MaxReferencedFileBytes)}
	}
	props, err := Parse(f)
	if err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	m := make(map[string]string, len(props))
	for _, p := range props {
		m[p.Key] = p.Value
	}
	if r.files == nil {
		r.files = make(map[string]map[string]string)
	}
	r.files[path] = m
	return m, nil
}

// FileError prints "cannot read <path>: <reason>" for a file that could not
// be opened, and "<path>: line N: ..." for one that does not parse.
type FileError struct {
	Path string
	Err  error
}

func (e *FileError) Error() string {
	if _, ok := e.Err.(*SyntaxError); ok {
		return e.Path + ": " + e.Err.Error()
	}
	err := e.Err
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the path is named already
	}
	return "cannot read " + e.Path + ": " + err.Error()
}

func (e *FileError) Unwrap() error { return e.Err }
