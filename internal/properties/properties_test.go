package properties

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []Property
	}{
		{
			name: "separators",
			in:   "a=1\nb: 2\nc 3\nd = 4\ne\t:\t5\nf=\ng\n",
			want: []Property{{"a", "1", 1}, {"b", "2", 2}, {"c", "3", 3}, {"d", "4", 4}, {"e", "5", 5}, {"f", "", 6}, {"g", "", 7}},
		},
		{
			name: "value may contain separators",
			in:   "url=http://host:80/a=b c\n",
			want: []Property{{"url", "http://host:80/a=b c", 1}},
		},
		{
			name: "comments and blank lines",
			in:   "# comment\n! also a comment\n   # indented comment\n\n   \nk=v # not a comment\n",
			want: []Property{{"k", "v # not a comment", 6}},
		},
		{
			name: "leading whitespace trimmed, trailing kept",
			in:   "   \t k = v  \n",
			want: []Property{{"k", "v  ", 1}},
		},
		{
			name: "continuation",
			in:   "list = a,\\\n       b,\\\n\tc\nnext=1\n",
			want: []Property{{"list", "a,b,c", 1}, {"next", "1", 4}},
		},
		{
			name: "continuation line starting with # is not a comment",
			in:   "k = a\\\n  #b\n",
			want: []Property{{"k", "a#b", 1}},
		},
		{
			name: "escaped backslash at end is no continuation",
			in:   "path=C:\\\\dir\\\\\nnext=1\n",
			want: []Property{{"path", `C:\dir\`, 1}, {"next", "1", 2}},
		},
		{
			name: "escaped backslash then continuation",
			in:   "k=a\\\\\\\n b\n",
			want: []Property{{"k", `a\b`, 1}},
		},
		{
			name: "escapes",
			in:   `k=tab\tnl\ncr\rff\fbs\\eq\=co\:sp\ hash\#bang\!other\q` + "\n",
			want: []Property{{"k", "tab\tnl\ncr\rff\fbs\\eq=co:sp hash#bang!otherq", 1}},
		},
		{
			name: "escaped separators in key",
			in:   `a\=b\:c\ d=v` + "\n",
			want: []Property{{"a=b:c d", "v", 1}},
		},
		{
			name: "unicode escapes",
			in:   `k=caf\u00e9 \u20AC \uD83D\uDE00` + "\n",
			want: []Property{{"k", "café € 😀", 1}},
		},
		{
			name: "CRLF and CR line ends",
			in:   "a=1\r\nb=2\rc=3",
			want: []Property{{"a", "1", 1}, {"b", "2", 2}, {"c", "3", 3}},
		},
		{
			name: "byte order mark",
			in:   "\xef\xbb\xbfa=1\n",
			want: []Property{{"a", "1", 1}},
		},
		{
			name: "continuation at end of file",
			in:   "a=1\\",
			want: []Property{{"a", "1", 1}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tc.in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want string
	}{
		{"duplicate key", "a=1\n# x\nb=2\na=3\n", `line 4: duplicate key "a" (first set on line 1)`},
		{"duplicate key after continuation", "a=1,\\\n 2\na=3\n", `line 3: duplicate key "a" (first set on line 1)`},
		{"malformed unicode escape", "k=\\u12g4\n", `line 1: in the value of "k": malformed \uXXXX escape (expected 4 hex digits)`},
		{"short unicode escape", "k=\\u12", `line 1: in the value of "k": malformed \uXXXX escape (expected 4 hex digits)`},
		{"empty key", "=value\n", "line 1: empty key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.in))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Parse error = %v, want %q", err, tc.want)
			}
			if !errors.Is(err, ErrSyntax) {
				t.Errorf("error does not match ErrSyntax")
			}
		})
	}
}
