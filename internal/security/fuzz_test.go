package security

import (
	"strings"
	"testing"
)

// FuzzParseJAAS: parseJAAS never panics, and what it accepts survives a
// round trip: the parsed module, flag and options, written back as a JAAS
// string with every value quoted, parse to the same result.
func FuzzParseJAAS(f *testing.F) {
	for _, s := range []string{
		plainLoginModule + ` required username="u" password="p";`,
		scramLoginModule + ` required username=alice password="p\"w;d" tokenauth=true ;`,
		oauthBearerLoginModule + ` required clientId="id" clientSecret="s\\x";`,
		"org.Foo required a=b a=c;",
		`org.Foo required a="b`,
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		j, err := parseJAAS(s)
		if err != nil {
			return
		}
		var b strings.Builder
		b.WriteString(j.module + " " + j.flag)
		for k, v := range j.options {
			b.WriteString(" " + k + "=" + quoteJAAS(v))
		}
		b.WriteString(";")
		j2, err := parseJAAS(b.String())
		if err != nil {
			t.Fatalf("re-parsing %q: %v", b.String(), err)
		}
		if j2.module != j.module || j2.flag != j.flag || len(j2.options) != len(j.options) {
			t.Fatalf("round trip changed %+v into %+v", j, j2)
		}
		for k, v := range j.options {
			if j2.options[k] != v {
				t.Fatalf("option %s: %q became %q", k, v, j2.options[k])
			}
		}
	})
}

// quoteJAAS quotes a value with the escapes parseJAAS reads.
func quoteJAAS(v string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// FuzzPrincipalMappingRules: parsing and mapping never panic, and a mapper
// that parsed maps every name to something or to ErrAuthentication.
func FuzzPrincipalMappingRules(f *testing.F) {
	f.Add(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT`, "CN=a,OU=ServiceUsers")
	f.Add(`RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L`, "O=x,CN=Bob")
	f.Add(`RULE:(/\$$1$/U`, "x")
	f.Fuzz(func(t *testing.T, rules, dn string) {
		m, err := ParsePrincipalMappingRules("k", rules)
		if err != nil {
			return
		}
		_, _ = m.Map(dn)
	})
}
