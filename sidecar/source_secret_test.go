package sidecar

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/internal/properties"
)

// TestSourceKgoOptsSecretReferences connects to a SASL/SCRAM source (kfake)
// with the password in a ${file:...} and in an ${env:...} reference, as a
// mirror config stores it: SourceKgoOpts resolves the reference and the
// client authenticates. A reference that does not resolve (missing file,
// missing key, unset variable) is refused with the key and the reference
// named, and no error shows the secret or the value around the reference,
// not even a JAAS config that is malformed once resolved.
func TestSourceKgoOptsSecretReferences(t *testing.T) {
	const user, secret = "mirror-user", "Zq8-unit-secret-7Hx"
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-512", user, secret))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "secret.properties")
	if err := os.WriteFile(file, []byte("password="+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const envName = "SIDEMIRROR_TEST_SCRAM_PASSWORD"
	t.Setenv(envName, secret)
	config := func(ref string) map[string]string {
		return map[string]string{
			"bootstrap.servers": strings.Join(src.ListenAddrs(), ","),
			"security.protocol": "SASL_PLAINTEXT",
			"sasl.mechanism":    "SCRAM-SHA-512",
			"sasl.jaas.config":  `org.apache.kafka.common.security.scram.ScramLoginModule required username="` + user + `" password="` + ref + `";`,
		}
	}

	// The whole JAAS config may come from a file too, as runbook 3 of
	// docs/runbooks.md writes it.
	jaasFile := filepath.Join(dir, "secrets.properties")
	if err := os.WriteFile(jaasFile, []byte(`b.jaas=org.apache.kafka.common.security.scram.ScramLoginModule required username="`+user+`" password="`+secret+`";`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wholeJAAS := config("")
	wholeJAAS["sasl.jaas.config"] = "${file:" + jaasFile + ":b.jaas}"
	for _, cfg := range []map[string]string{config("${file:" + file + ":password}"), config("${env:" + envName + "}"), wholeJAAS} {
		ref := cfg["sasl.jaas.config"]
		opts, err := SourceKgoOpts(cfg)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		cl, err := kgo.NewClient(append(opts, kgo.RequestRetries(0))...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = cl.Ping(ctx)
		cancel()
		cl.Close()
		if err != nil {
			t.Fatalf("%s: the source refused the resolved credentials: %v", ref, err)
		}
	}

	// A wrong password from the file is refused by the source: the client
	// did send what the file holds, not the reference.
	wrong := filepath.Join(dir, "wrong.properties")
	if err := os.WriteFile(wrong, []byte("password=not-"+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := SourceKgoOpts(config("${file:" + wrong + ":password}"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.RequestRetries(0))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := cl.Ping(ctx); err == nil {
		t.Fatal("a wrong password from the secret file was accepted")
	}
	cancel()
	cl.Close()

	for _, tc := range []struct{ ref, want string }{
		{"${file:" + filepath.Join(dir, "missing.properties") + ":password}", "cannot read"},
		{"${file:" + file + ":pass}", `has no key "pass"`},
		{"${env:SIDEMIRROR_TEST_UNSET_VARIABLE}", "not set"},
	} {
		_, err := SourceKgoOpts(config(tc.ref))
		if err == nil {
			t.Fatalf("%s resolved", tc.ref)
		}
		msg := err.Error()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key != "sasl.jaas.config" || !errors.Is(err, properties.ErrReference) {
			t.Fatalf("%s: error %T %q is not a reference error of sasl.jaas.config", tc.ref, err, msg)
		}
		if !strings.Contains(msg, "sasl.jaas.config") || !strings.Contains(msg, tc.ref) || !strings.Contains(msg, tc.want) {
			t.Fatalf("%s: error %q does not name the key, the reference and %q", tc.ref, msg, tc.want)
		}
		if strings.Contains(msg, secret) || strings.Contains(msg, user) {
			t.Fatalf("%s: error %q shows a secret or the value around the reference", tc.ref, msg)
		}
	}

	// A JAAS config that is malformed once the secret is in it: the error
	// hides the whole value.
	broken := filepath.Join(dir, "broken.properties")
	if err := os.WriteFile(broken, []byte("jaas=org.apache.kafka.common.security.scram.ScramLoginModule required username=\""+user+"\" password=\""+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config("")
	cfg["sasl.jaas.config"] = "${file:" + broken + ":jaas}"
	_, err = SourceKgoOpts(cfg)
	if err == nil {
		t.Fatal("a malformed JAAS config from a file was accepted")
	}
	if msg := err.Error(); !strings.Contains(msg, "sasl.jaas.config") || strings.Contains(msg, secret) || strings.Contains(msg, user) {
		t.Fatalf("malformed resolved JAAS: error %q does not name the key, or shows the value", msg)
	}
}
