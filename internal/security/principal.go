package security

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// This file forms principals as Kafka's DefaultKafkaPrincipalBuilder does
// for TLS clients: the certificate's subject as an RFC 2253 distinguished
// name, in the form Java's X500Principal.getName() prints (most specific
// RDN first, no blanks after commas, Java's attribute keywords, other
// attributes as OID=#hex), mapped by ssl.principal.mapping.rules.

// PrincipalType is the type of every principal Kafka's default builder
// forms.
const PrincipalType = "User"

// Anonymous is the principal of PLAINTEXT connections and of TLS
// connections without a client certificate.
const Anonymous = "User:ANONYMOUS"

// javaKeywords are the attribute keywords Java's RFC 2253 output uses.
var javaKeywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// DistinguishedName returns the subject of cert as Java's
// X500Principal.getName() does (RFC 2253).
func DistinguishedName(cert *x509.Certificate) string {
	var rdns rawRDNSequence
	if rest, err := asn1.Unmarshal(cert.RawSubject, &rdns); err != nil || len(rest) > 0 {
		return cert.Subject.String() // unreachable for a certificate that parsed
	}
	parts := make([]string, 0, len(rdns))
	for i := len(rdns) - 1; i >= 0; i-- {
		avas := make([]string, 0, len(rdns[i]))
		for _, ava := range rdns[i] {
			avas = append(avas, formatAVA(ava))
		}
		parts = append(parts, strings.Join(avas, "+"))
	}
	return strings.Join(parts, ",")
}

// The subject with each attribute value as its original DER, which Java
// prints in hex for attributes without a keyword.
type (
	rawAVA struct {
		Type  asn1.ObjectIdentifier
		Value asn1.RawValue
	}
	rawRDNSET      []rawAVA // the SET suffix makes encoding/asn1 read a SET OF
	rawRDNSequence []rawRDNSET
)

func formatAVA(ava rawAVA) string {
	oid := ava.Type.String()
	if kw, known := javaKeywords[oid]; known && ava.Value.Class == asn1.ClassUniversal {
		switch ava.Value.Tag {
		case asn1.TagPrintableString, asn1.TagUTF8String, asn1.TagIA5String, asn1.TagT61String, asn1.TagBMPString:
			var s string
			if _, err := asn1.Unmarshal(ava.Value.FullBytes, &s); err == nil {
				return kw + "=" + escapeDNValue(s)
			}
		}
	}
	return oid + "=#" + hex.EncodeToString(ava.Value.FullBytes)
}

// escapeDNValue escapes an attribute value as RFC 2253 requires.
func escapeDNValue(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case strings.ContainsRune(",=+<>#;\"\\", r):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == ' ' && (i == 0 || i == len(s)-1):
			b.WriteString(`\ `)
		case r == 0:
			b.WriteString(`\00`)
		case r == utf8.RuneError:
			b.WriteString(`\ef\bf\bd`)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// PrincipalMapper maps distinguished names to principal names with Kafka's
// ssl.principal.mapping.rules: a comma-separated list of
//
//	RULE:pattern/replacement/[LU]   the first rule whose pattern matches the
//	                                whole name rewrites it ($1 for groups;
//	                                L and U make it lower or upper case)
//	DEFAULT                         the name unchanged
//
// A name that no rule matches cannot authenticate. The default rules are
// "DEFAULT". Patterns are Go regular expressions (RE2), which agree with
// Java's for the patterns mapping rules use.
type PrincipalMapper struct {
	rules []mappingRule
}

type mappingRule struct {
	isDefault   bool
	whole       *regexp.Regexp // ^(?:pattern)$
	pattern     *regexp.Regexp
	replacement string // in Go's $-syntax
	caseFold    byte   // 0, 'L' or 'U'
}

// ParsePrincipalMappingRules parses ssl.principal.mapping.rules; key names
// the setting in errors. Empty rules mean "DEFAULT".
func ParsePrincipalMappingRules(key, rules string) (*PrincipalMapper, error) {
	rest := strings.TrimSpace(rules)
	if rest == "" {
		return &PrincipalMapper{rules: []mappingRule{{isDefault: true}}}, nil
	}
	var m PrincipalMapper
	for n := 1; rest != ""; n++ {
		var r mappingRule
		switch {
		case strings.HasPrefix(rest, "DEFAULT"):
			r.isDefault = true
			rest = rest[len("DEFAULT"):]
		case strings.HasPrefix(rest, "RULE:"):
			var pat, repl string
			var ok bool
			rest = rest[len("RULE:"):]
			if pat, rest, ok = cutUnescaped(rest, '/'); !ok {
				return nil, configErr(key, "rule %d has no '/' after its pattern (expected RULE:pattern/replacement/[LU])", n)
			}
			if repl, rest, ok = cutUnescaped(rest, '/'); !ok {
				return nil, configErr(key, "rule %d has no '/' after its replacement (expected RULE:pattern/replacement/[LU])", n)
			}
			if rest != "" && (rest[0] == 'L' || rest[0] == 'U') {
				r.caseFold, rest = rest[0], rest[1:]
			}
			var err error
			if r.pattern, err = regexp.Compile(pat); err != nil {
				return nil, configErr(key, "rule %d: pattern %q does not compile: %v", n, pat, err)
			}
			r.whole = regexp.MustCompile(`^(?:` + pat + `)$`)
			r.replacement = javaReplacement(repl)
		default:
			return nil, configErr(key, "rule %d is neither DEFAULT nor RULE:pattern/replacement/[LU]", n)
		}
		rest = strings.TrimLeft(rest, " \t\r\n")
		if rest != "" {
			if rest[0] != ',' {
				return nil, configErr(key, "rule %d is followed by text that is not ',' and another rule", n)
			}
			rest = strings.TrimLeft(rest[1:], " \t\r\n")
			if rest == "" {
				return nil, configErr(key, "ends with ',' (expected another rule after it)")
			}
		}
		m.rules = append(m.rules, r)
	}
	return &m, nil
}

// Map returns the principal name for a distinguished name, or an error
// when no rule applies.
func (m *PrincipalMapper) Map(dn string) (string, error) {
	for _, r := range m.rules {
		if r.isDefault {
			return dn, nil
		}
		if !r.whole.MatchString(dn) {
			continue
		}
		out := r.pattern.ReplaceAllString(dn, r.replacement)
		switch r.caseFold {
		case 'L':
			out = strings.ToLower(out)
		case 'U':
			out = strings.ToUpper(out)
		}
		return out, nil
	}
	return "", fmt.Errorf("%w: no ssl.principal.mapping.rules rule applies to %q", ErrAuthentication, dn)
}

// cutUnescaped cuts s at the first sep not preceded by a backslash.
func cutUnescaped(s string, sep byte) (before, after string, ok bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case sep:
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// javaReplacement turns a Java replacement string ($1, \$ for a dollar,
// \\ for a backslash) into Go's syntax (${1}, $$, \).
func javaReplacement(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			if s[i] == '$' {
				b.WriteString("$$")
			} else {
				b.WriteByte(s[i])
			}
		case c == '$' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			j := i + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			b.WriteString("${" + s[i+1:j] + "}")
			i = j - 1
		case c == '$':
			b.WriteString("$$")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
