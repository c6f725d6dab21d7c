package sidecar

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sidemirror/sidemirror/internal/properties"
	"github.com/sidemirror/sidemirror/internal/security"
)

// baseProps is a minimal valid configuration; cases edit it.
var baseProps = map[string]string{
	"local.broker.id":         "1",
	"local.bootstrap.servers": "127.0.0.1:9092",
	"data.dir":                "/var/lib/sidemirror",
}

// propsText renders base with edits applied (an empty edit value deletes the
// key; the key "" appends raw lines).
func propsText(base map[string]string, edits map[string]string) string {
	m := make(map[string]string)
	for k, v := range base {
		m[k] = v
	}
	raw := ""
	for k, v := range edits {
		switch {
		case k == "":
			raw += v + "\n"
		case v == "":
			delete(m, k)
		default:
			m[k] = v
		}
	}
	var b strings.Builder
	for k, v := range m {
		b.WriteString(k + "=" + v + "\n")
	}
	return b.String() + raw
}

func parseText(t *testing.T, text string) (Config, error) {
	t.Helper()
	props, err := properties.Parse(strings.NewReader(text))
	if err != nil {
		t.Fatalf("properties.Parse: %v", err)
	}
	return ParseConfig(props)
}

const secretPassword = "s3cr3t-pw"

func TestParseConfigErrors(t *testing.T) {
	plainJAAS := `org.apache.kafka.common.security.plain.PlainLoginModule required username="sm" password="` + secretPassword + `";`
	cases := []struct {
		name      string
		edits     map[string]string
		wantKey   string   // the message names this key
		wantValue string   // and contains this offending value ("" for none)
		wantAlso  []string // further substrings
	}{
		{
			name:    "unknown key",
			edits:   map[string]string{"bogus.setting": "1"},
			wantKey: "bogus.setting", wantAlso: []string{"unknown key"},
		},
		{
			name:    "typo key gets a suggestion",
			edits:   map[string]string{"local.broker.id": "", "locl.broker.id": "1"},
			wantKey: "locl.broker.id", wantAlso: []string{`did you mean "local.broker.id"?`},
		},
		{
			name:    "client key without prefix gets the prefixed suggestion",
			edits:   map[string]string{"security.protocol": "SSL"},
			wantKey: "security.protocol", wantAlso: []string{`did you mean "destination.security.protocol"?`},
		},
		{
			name:    "missing local.broker.id",
			edits:   map[string]string{"local.broker.id": ""},
			wantKey: "local.broker.id", wantAlso: []string{"missing required key"},
		},
		{
			name:    "missing data.dir",
			edits:   map[string]string{"data.dir": ""},
			wantKey: "data.dir", wantAlso: []string{"missing required key"},
		},
		{
			name:      "non-integer broker id",
			edits:     map[string]string{"local.broker.id": "abc"},
			wantKey:   "local.broker.id",
			wantValue: `"abc"`, wantAlso: []string{"is not an integer (expected a broker ID >= 0)"},
		},
		{
			name:      "negative throttled rate",
			edits:     map[string]string{"mirror.replication.throttled.rate": "-1"},
			wantKey:   "mirror.replication.throttled.rate",
			wantValue: "-1", wantAlso: []string{"expected bytes per second, or 0 for no limit"},
		},
		{
			name:      "non-integer throttled rate",
			edits:     map[string]string{"mirror.replication.throttled.rate": "10MB"},
			wantKey:   "mirror.replication.throttled.rate",
			wantValue: `"10MB"`, wantAlso: []string{"is not an integer"},
		},
		{
			name:      "buffer memory too small",
			edits:     map[string]string{"mirror.buffer.memory.bytes": "65536"},
			wantKey:   "mirror.buffer.memory.bytes",
			wantValue: "65536", wantAlso: []string{"at least 1048576"},
		},
		{
			name:      "negative cpu cores",
			edits:     map[string]string{"sidecar.cpu.cores": "-1"},
			wantKey:   "sidecar.cpu.cores",
			wantValue: "-1", wantAlso: []string{"expected 0 for every core, or 1 to 1024"},
		},
		{
			name:      "non-integer cpu cores",
			edits:     map[string]string{"sidecar.cpu.cores": "two"},
			wantKey:   "sidecar.cpu.cores",
			wantValue: `"two"`, wantAlso: []string{"is not an integer"},
		},
		{
			name:      "negative broker id",
			edits:     map[string]string{"local.broker.id": "-3"},
			wantKey:   "local.broker.id",
			wantValue: "-3", wantAlso: []string{"negative"},
		},
		{
			name:      "bootstrap server without port",
			edits:     map[string]string{"local.bootstrap.servers": "127.0.0.1:9092,kafka1"},
			wantKey:   "local.bootstrap.servers",
			wantValue: `"kafka1"`, wantAlso: []string{"missing port"},
		},
		{
			name:      "bootstrap server with port out of range",
			edits:     map[string]string{"local.bootstrap.servers": "kafka1:99999"},
			wantKey:   "local.bootstrap.servers",
			wantValue: "99999",
		},
		{
			name:      "bad security protocol",
			edits:     map[string]string{"destination.security.protocol": "TLS"},
			wantKey:   "destination.security.protocol",
			wantValue: `"TLS"`, wantAlso: []string{"SASL_SSL"},
		},
		{
			name:      "unsupported SASL mechanism",
			edits:     map[string]string{"destination.security.protocol": "SASL_PLAINTEXT", "destination.sasl.mechanism": "GSSAPI", "destination.sasl.jaas.config": plainJAAS},
			wantKey:   "destination.sasl.mechanism",
			wantValue: `"GSSAPI"`,
		},
		{
			name:    "SASL protocol without jaas config",
			edits:   map[string]string{"destination.security.protocol": "SASL_PLAINTEXT"},
			wantKey: "destination.sasl.jaas.config", wantAlso: []string{"is missing", "SASL_PLAINTEXT"},
		},
		{
			name: "malformed jaas config hides the password",
			edits: map[string]string{
				"destination.security.protocol": "SASL_SSL",
				"destination.sasl.jaas.config":  strings.TrimSuffix(plainJAAS, `";`),
			},
			wantKey: "destination.sasl.jaas.config", wantValue: "[hidden]", wantAlso: []string{"not terminated"},
		},
		{
			name: "jaas config without ';' hides the password",
			edits: map[string]string{
				"destination.security.protocol": "SASL_SSL",
				"destination.sasl.jaas.config":  strings.TrimSuffix(plainJAAS, ";"),
			},
			wantKey: "destination.sasl.jaas.config", wantValue: "[hidden]", wantAlso: []string{"';'"},
		},
		{
			name: "jaas login module does not fit the mechanism",
			edits: map[string]string{
				"destination.security.protocol": "SASL_SSL",
				"destination.sasl.mechanism":    "SCRAM-SHA-512",
				"destination.sasl.jaas.config":  plainJAAS,
			},
			wantKey: "destination.sasl.jaas.config", wantAlso: []string{"ScramLoginModule", "SCRAM-SHA-512"},
		},
		{
			name:      "unknown store type",
			edits:     map[string]string{"destination.ssl.truststore.type": "JCEKS"},
			wantKey:   "destination.ssl.truststore.type",
			wantValue: `"JCEKS"`, wantAlso: []string{"PEM, PKCS12 or JKS"},
		},
		{
			name:    "JKS trust store without its password",
			edits:   map[string]string{"destination.ssl.truststore.type": "JKS", "destination.ssl.truststore.location": "/etc/kafka/truststore.jks"},
			wantKey: "destination.ssl.truststore.password", wantAlso: []string{"is missing", "JKS"},
		},
		{
			name:      "bad endpoint identification algorithm",
			edits:     map[string]string{"destination.ssl.endpoint.identification.algorithm": "http"},
			wantKey:   "destination.ssl.endpoint.identification.algorithm",
			wantValue: `"http"`,
		},
		{
			name:      "raft.peers with duplicate id",
			edits:     map[string]string{"raft.peers": "1@10.0.0.1:9192,1@10.0.0.2:9192"},
			wantKey:   "raft.peers",
			wantValue: `"1@10.0.0.2:9192"`, wantAlso: []string{"ID 1 appears twice"},
		},
		{
			name:      "raft.peers without local id",
			edits:     map[string]string{"raft.peers": "2@10.0.0.2:9192,3@10.0.0.3:9192"},
			wantKey:   "raft.peers",
			wantValue: `"2@10.0.0.2:9192,3@10.0.0.3:9192"`, wantAlso: []string{"local.broker.id 1"},
		},
		{
			name:      "raft.peers entry without id",
			edits:     map[string]string{"raft.peers": "10.0.0.1:9192"},
			wantKey:   "raft.peers",
			wantValue: `"10.0.0.1:9192"`, wantAlso: []string{"id@host:port"},
		},
		{
			name:      "bad http.listener",
			edits:     map[string]string{"http.listener": "localhost"},
			wantKey:   "http.listener",
			wantValue: `"localhost"`,
		},
		{
			name:      "bad log.format",
			edits:     map[string]string{"log.format": "xml"},
			wantKey:   "log.format",
			wantValue: `"xml"`, wantAlso: []string{"json or console"},
		},
		{
			name:      "bad log.level",
			edits:     map[string]string{"log.level": "verbose"},
			wantKey:   "log.level",
			wantValue: `"verbose"`, wantAlso: []string{"debug, info, warn or error"},
		},
		{
			name:      "relative data.dir",
			edits:     map[string]string{"data.dir": "var/lib/sidemirror"},
			wantKey:   "data.dir",
			wantValue: `"var/lib/sidemirror"`, wantAlso: []string{"absolute"},
		},
		{
			name:      "missing environment variable",
			edits:     map[string]string{"local.broker.id": "${env:SIDEMIRROR_TEST_SURELY_UNSET}"},
			wantKey:   "local.broker.id",
			wantValue: "${env:SIDEMIRROR_TEST_SURELY_UNSET}", wantAlso: []string{"not set"},
		},
		{
			name:      "missing secrets file",
			edits:     map[string]string{"destination.ssl.key.password": "${file:/nonexistent/secrets.properties:pw}"},
			wantKey:   "destination.ssl.key.password",
			wantValue: "/nonexistent/secrets.properties", wantAlso: []string{"no such file"},
		},
		{
			name:      "unknown reference provider",
			edits:     map[string]string{"data.dir": "${vault:secret/x}"},
			wantKey:   "data.dir",
			wantValue: `"vault"`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseText(t, propsText(baseProps, tc.edits))
			if err == nil {
				t.Fatal("ParseConfig succeeded, want an error")
			}
			msg := err.Error()
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %q does not match ErrInvalidConfig", msg)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error is more than one line:\n%s", msg)
			}
			if !strings.HasPrefix(msg, "config: ") {
				t.Errorf("error %q does not start with \"config: \"", msg)
			}
			if !strings.Contains(msg, tc.wantKey) {
				t.Errorf("error %q does not name key %q", msg, tc.wantKey)
			}
			if tc.wantValue != "" && !strings.Contains(msg, tc.wantValue) {
				t.Errorf("error %q does not contain the offending value %s", msg, tc.wantValue)
			}
			for _, s := range tc.wantAlso {
				if !strings.Contains(msg, s) {
					t.Errorf("error %q does not contain %q", msg, s)
				}
			}
			if strings.Contains(msg, secretPassword) {
				t.Errorf("error %q reveals the password", msg)
			}
		})
	}
}

func TestParseConfigGood(t *testing.T) {
	dir := t.TempDir()
	secrets := filepath.Join(dir, "secrets.properties")
	if err := os.WriteFile(secrets, []byte("sidemirror.password = "+secretPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SIDEMIRROR_TEST_BROKER_ID", "2")
	text := `# a sidecar
local.broker.id = ${env:SIDEMIRROR_TEST_BROKER_ID}
local.bootstrap.servers = 127.0.0.1:9092, localhost:9093
data.dir = /var/lib/sidemirror/
raft.peers = 1@10.0.0.1:9192,2@10.0.0.2:9192,3@[fd00::3]:9192
admin.listener = :9191
admin.advertised.listener = 10.0.0.2:9191
raft.listener = :9192
destination.security.protocol = SASL_PLAINTEXT
destination.sasl.mechanism = SCRAM-SHA-512
destination.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required \
    username="sidemirror" \
    password="${file:` + secrets + `:sidemirror.password}";
log.level = debug
`
	cfg, err := parseText(t, text)
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}

	want := DefaultConfig()
	want.LocalBrokerID = 2
	want.LocalBootstrapServers = []string{"127.0.0.1:9092", "localhost:9093"}
	want.DataDir = "/var/lib/sidemirror"
	want.RaftPeers = []RaftPeer{{1, "10.0.0.1:9192"}, {2, "10.0.0.2:9192"}, {3, "[fd00::3]:9192"}}
	want.AdminListener, want.AdminAdvertised, want.RaftListener = ":9191", "10.0.0.2:9191", ":9192"
	want.LogLevel = "debug"
	want.Destination.BootstrapServers = want.LocalBootstrapServers
	want.Destination.SecurityProtocol = "SASL_PLAINTEXT"
	want.Destination.SASLMechanism = "SCRAM-SHA-512"
	want.Destination.SASLJAASConfig = `org.apache.kafka.common.security.scram.ScramLoginModule required username="sidemirror" password="` + secretPassword + `";`
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("ParseConfig =\n%#v\nwant\n%#v", cfg, want)
	}

	// Defaults the operator did not set.
	for _, d := range []struct{ key, got, want string }{
		{KeyAdminListener, DefaultConfig().AdminListener, "127.0.0.1:9191"},
		{KeyRaftListener, DefaultConfig().RaftListener, "127.0.0.1:9192"},
		{KeyRaftAdvertised, cfg.RaftAdvertisedAddr(), "10.0.0.2:9192"}, // this sidecar's raft.peers entry
		{KeyHTTPListener, cfg.HTTPListener, "127.0.0.1:9193"},
		{KeyLogFormat, cfg.LogFormat, "json"},
		{"destination.ssl.truststore.type", cfg.Destination.SSL.TruststoreType, ""}, // detected from the file
		{"destination.ssl.endpoint.identification.algorithm", cfg.Destination.SSLEndpointIdentificationAlgorithm, "https"},
	} {
		if d.got != d.want {
			t.Errorf("default of %s = %q, want %q", d.key, d.got, d.want)
		}
	}

	s := cfg.String()
	if strings.Contains(s, secretPassword) {
		t.Errorf("String reveals the password:\n%s", s)
	}
	for _, line := range []string{"destination.sasl.jaas.config=[hidden]\n", "local.broker.id=2\n", "raft.peers=1@10.0.0.1:9192,2@10.0.0.2:9192,3@[fd00::3]:9192\n", "destination.ssl.key.password=\n"} {
		if !strings.Contains(s, line) {
			t.Errorf("String lacks %q:\n%s", line, s)
		}
	}
	if n := strings.Count(s, "\n"); n != len(fields)+len(security.ClientKeys) {
		t.Errorf("String has %d lines, want one per key (%d)", n, len(fields)+len(security.ClientKeys))
	}

	opts, err := cfg.Destination.KgoOpts()
	if err != nil || len(opts) != 2 { // seed brokers and SASL
		t.Errorf("KgoOpts = %d options, %v; want 2, nil", len(opts), err)
	}
}

func TestRaftMembers(t *testing.T) {
	cfg := DefaultConfig()
	cfg.LocalBrokerID = 4
	if got, want := cfg.RaftMembers(), []RaftPeer{{4, "127.0.0.1:9192"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("RaftMembers with no peers = %v, want %v", got, want)
	}
}

func TestLoadConfigFileErrors(t *testing.T) {
	dir := t.TempDir()
	dup := filepath.Join(dir, "dup.properties")
	if err := os.WriteFile(dup, []byte("local.broker.id=1\n\nlocal.broker.id=2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct{ path, want string }{
		"missing file":  {filepath.Join(dir, "none.properties"), "config: cannot read " + filepath.Join(dir, "none.properties") + ": no such file or directory"},
		"duplicate key": {dup, "config: " + dup + `: line 3: duplicate key "local.broker.id" (first set on line 1)`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadConfig(tc.path)
			if err == nil || err.Error() != tc.want || !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("LoadConfig = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestDidYouMean(t *testing.T) {
	known := append([]string{}, KeyLocalBrokerID, KeyLogLevel, KeyLogFormat, KeyDataDir, DestinationPrefix+"ssl.truststore.location")
	for key, want := range map[string]string{
		"local.brokerid":                       KeyLocalBrokerID,
		"log.levle":                            KeyLogLevel,
		"datadir":                              KeyDataDir,
		"destination.ssl.trustore.location":    DestinationPrefix + "ssl.truststore.location",
		"something.completely.different.value": "",
		"x":                                    "",
	} {
		if got := suggest(key, known, DestinationPrefix); got != want {
			t.Errorf("suggest(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestExampleAndDocsCoverEveryKey keeps deploy/examples/sidecar.properties
// and docs/configuration.md in step with the keys the parser accepts.
func TestExampleAndDocsCoverEveryKey(t *testing.T) {
	keys := make([]string, 0, len(fields)+len(security.ClientKeys))
	for _, f := range fields {
		keys = append(keys, f.key)
	}
	for _, k := range security.ClientKeys {
		keys = append(keys, DestinationPrefix+k)
	}
	const examplePath = "../deploy/examples/sidecar.properties"
	if _, err := LoadConfig(examplePath); err != nil {
		t.Errorf("the example does not load: %v", err)
	}
	example, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.Contains(string(example), k+"=") && !strings.Contains(string(example), k+" =") {
			t.Errorf("example does not mention %s", k)
		}
		if !strings.Contains(string(docs), "`"+k+"`") {
			t.Errorf("docs/configuration.md does not document %s", k)
		}
	}
}

// TestExampleSASL uncomments the SASL_PLAINTEXT example block of
// deploy/examples/sidecar.properties and loads it with a secrets file.
func TestExampleSASL(t *testing.T) {
	example, err := os.ReadFile("../deploy/examples/sidecar.properties")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "# Uncomment all five lines:\n"
	_, block, ok := strings.Cut(string(example), marker)
	if !ok {
		t.Fatalf("example lacks %q", marker)
	}
	lines := strings.SplitN(block, "\n", 6)[:5]
	secrets := filepath.Join(t.TempDir(), "secrets.properties")
	if err := os.WriteFile(secrets, []byte("sidemirror.password="+secretPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	text := string(example)
	for _, l := range lines {
		text += strings.ReplaceAll(strings.TrimPrefix(l, "#"), "/etc/sidemirror/secrets.properties", secrets) + "\n"
	}
	cfg, err := parseText(t, text)
	if err != nil {
		t.Fatalf("the SASL example does not load: %v", err)
	}
	d := cfg.Destination
	if d.SecurityProtocol != "SASL_PLAINTEXT" || d.SASLMechanism != "SCRAM-SHA-512" || !strings.Contains(d.SASLJAASConfig, `password="`+secretPassword+`";`) {
		t.Errorf("SASL example parsed as %+v", d)
	}
}
