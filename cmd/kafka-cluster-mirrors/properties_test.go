package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseProperties(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		want []property
	}{
		{
			name: "separators and blanks",
			text: "a=1\nb: 2\nc 3\n  d  =  4  \ne\n",
			want: []property{{"a", "1", 1}, {"b", "2", 2}, {"c", "3", 3}, {"d", "4  ", 4}, {"e", "", 5}},
		},
		{
			name: "comments and blank lines",
			text: "# comment\n! also\n\n   \t\nkey=value # not a comment\n",
			want: []property{{"key", "value # not a comment", 5}},
		},
		{
			name: "continuation lines",
			text: "bootstrap.servers=a:1,\\\n    b:2,\\\n    c:3\nnext=x\n",
			want: []property{{"bootstrap.servers", "a:1,b:2,c:3", 1}, {"next", "x", 4}},
		},
		{
			name: "an even number of backslashes does not continue",
			text: "path=C:\\\\\nnext=x\n",
			want: []property{{"path", `C:\`, 1}, {"next", "x", 2}},
		},
		{
			name: "escapes",
			text: `k\=ey\:x=tab\there\nnew\u00e9\uD83D\uDE00\q` + "\n",
			want: []property{{"k=ey:x", "tab\there\nnewé😀q", 1}},
		},
		{
			name: "CRLF and CR line ends, byte order mark",
			text: "\uFEFFa=1\r\nb=2\rc=3",
			want: []property{{"a", "1", 1}, {"b", "2", 2}, {"c", "3", 3}},
		},
		{
			name: "jaas config with quotes and semicolon",
			text: `sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";`,
			want: []property{{"sasl.jaas.config", `org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";`, 1}},
		},
		{
			name: "continuation at the end of the file",
			text: "a=1\\",
			want: []property{{"a", "1", 1}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProperties(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParsePropertiesErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
	}{
		{"duplicate key", "a=1\nb=2\na=3\n", "line 3: a is already set on line 1"},
		{"short unicode escape", "ssl.key.password=abc\\u12", `line 1: value of ssl.key.password: malformed \uXXXX escape`},
		{"bad unicode escape in a key", "a\\uZZZZ=1", `line 1: key: malformed \uXXXX escape`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseProperties(tc.text)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "abc") {
				t.Fatalf("error shows a value: %v", err)
			}
		})
	}
}

func TestIsSecretKey(t *testing.T) {
	for key, want := range map[string]bool{
		"sasl.jaas.config":        true,
		"ssl.keystore.password":   true,
		"ssl.key.password":        true,
		"ssl.truststore.password": true,
		"ssl.keystore.key":        true,
		"SSL.KEYSTORE.KEY":        true,
		"bootstrap.servers":       false,
		"ssl.keystore.location":   false,
		"sasl.mechanism":          false,
	} {
		if got := isSecretKey(key); got != want {
			t.Errorf("isSecretKey(%q) = %v", key, got)
		}
	}
}
