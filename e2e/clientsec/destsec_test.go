package clientsec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// destinationWay is one way for the sidecars to reach their brokers: the
// destination's listener and the destination.* keys, and the same keys
// without the credential, which must be refused.
type destinationWay struct {
	name     string
	listener string
	props    func(t *testing.T) map[string]string
	refusals []refusal
	client   string // a client the identity provider counts, for OAUTHBEARER
}

// refusal is a way's settings with the credential removed or spoiled, and
// the line the refused sidecar logs.
type refusal struct {
	name  string
	spoil func(props map[string]string)
	log   string
}

// TestDestinationSecurity restarts the sidecars with their destination
// client set to each way of reaching the brokers' secure listeners in
// turn (SASL_SSL with SCRAM, mTLS with PKCS12 and with JKS stores, an
// encrypted PKCS#8 key, OAUTHBEARER client credentials), each sidecar's
// local.bootstrap.servers naming its own broker on that listener. With
// each, every sidecar must be ready (its local broker reachable), a topic
// is mirrored and read back with kcat, identical to the source's; then
// one sidecar restarted without the credential must be refused: /readyz
// fails on its local broker and its log says why, naming the keys.
func TestDestinationSecurity(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(env.LogTails(60))
		}
	})
	saved := saveSidecarConfigs(t)
	t.Cleanup(func() {
		restartSidecars(t, func(s *testbed.Sidecar) error { return os.WriteFile(s.ConfigPath(), saved[s.BrokerID], 0o600) })
	})

	scram := fmt.Sprintf(`org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";`,
		testbed.Sidemirror.Name, testbed.Sidemirror.Password)
	dropKeystore := func(p map[string]string) {
		for _, k := range []string{"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password"} {
			delete(p, "destination."+k)
		}
	}
	const saslRefusal = "destination: the local broker refused this sidecar's SASL authentication"
	const tlsRefusal = "destination: the TLS handshake with the local broker failed"
	noClientCert := []refusal{{"no key store", dropKeystore, tlsRefusal}}
	ways := []destinationWay{
		{name: "SASL_SSL SCRAM-SHA-512 with a PEM trust store", listener: testbed.ListenerSCRAM,
			props: func(*testing.T) map[string]string {
				return map[string]string{
					"destination.security.protocol":       "SASL_SSL",
					"destination.sasl.mechanism":          "SCRAM-SHA-512",
					"destination.sasl.jaas.config":        scram,
					"destination.ssl.truststore.type":     "PEM",
					"destination.ssl.truststore.location": pki.CAFile,
				}
			},
			refusals: []refusal{
				{"a wrong password", func(p map[string]string) {
					p["destination.sasl.jaas.config"] = strings.Replace(scram, testbed.Sidemirror.Password, "wrong-password", 1)
				}, saslRefusal},
				{"no trust store (the system's CAs do not know the brokers')", func(p map[string]string) {
					delete(p, "destination.ssl.truststore.type")
					delete(p, "destination.ssl.truststore.location")
				}, tlsRefusal},
			}},
		{name: "mTLS with PKCS12 stores", listener: testbed.ListenerMTLS, refusals: noClientCert,
			props: func(t *testing.T) map[string]string {
				return map[string]string{
					"destination.security.protocol":       "SSL",
					"destination.ssl.keystore.type":       "PKCS12",
					"destination.ssl.keystore.location":   must(t)(pki.IssuePKCS12("sidecar-dest-p12", storePassword)),
					"destination.ssl.keystore.password":   storePassword,
					"destination.ssl.truststore.type":     "PKCS12",
					"destination.ssl.truststore.location": must(t)(pki.TrustStore("PKCS12", storePassword)),
					"destination.ssl.truststore.password": storePassword,
				}
			}},
		{name: "mTLS with JKS stores", listener: testbed.ListenerMTLS, refusals: noClientCert,
			props: func(t *testing.T) map[string]string {
				return map[string]string{
					"destination.security.protocol":       "SSL",
					"destination.ssl.keystore.type":       "JKS",
					"destination.ssl.keystore.location":   must(t)(pki.IssueJKS("sidecar-dest-jks", storePassword)),
					"destination.ssl.keystore.password":   storePassword,
					"destination.ssl.key.password":        storePassword,
					"destination.ssl.truststore.type":     "JKS",
					"destination.ssl.truststore.location": must(t)(pki.TrustStore("JKS", storePassword)),
					"destination.ssl.truststore.password": storePassword,
				}
			}},
		{name: "mTLS with an encrypted PKCS#8 key", listener: testbed.ListenerMTLS, refusals: noClientCert,
			props: func(t *testing.T) map[string]string {
				return map[string]string{
					"destination.security.protocol":       "SSL",
					"destination.ssl.keystore.type":       "PEM",
					"destination.ssl.keystore.location":   must(t)(pki.IssueEncryptedPEM("sidecar-dest-encrypted", storePassword)),
					"destination.ssl.key.password":        storePassword,
					"destination.ssl.truststore.type":     "PEM",
					"destination.ssl.truststore.location": pki.CAFile,
				}
			}},
		{name: "SASL_SSL OAUTHBEARER client credentials", listener: testbed.ListenerOAuth, client: idp.clientID,
			props: func(*testing.T) map[string]string {
				return map[string]string{
					"destination.security.protocol":                                 "SASL_SSL",
					"destination.sasl.mechanism":                                    "OAUTHBEARER",
					"destination.sasl.oauthbearer.token.endpoint.url":               idp.url + "/token",
					"destination.sasl.oauthbearer.client.credentials.client.id":     idp.clientID,
					"destination.sasl.oauthbearer.client.credentials.client.secret": idp.clientSecret,
					"destination.sasl.jaas.config":                                  "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
					"destination.ssl.truststore.type":                               "PEM",
					"destination.ssl.truststore.location":                           pki.CAFile,
				}
			},
			refusals: []refusal{
				{"a forged token", func(p map[string]string) {
					// Tokens of the right key ID signed by a key the JWKS lacks.
					p["destination.sasl.oauthbearer.client.credentials.client.id"] = forgerID
					p["destination.sasl.oauthbearer.client.credentials.client.secret"] = forgerSecret
				}, saslRefusal},
				{"a wrong client secret", func(p map[string]string) {
					p["destination.sasl.oauthbearer.client.credentials.client.secret"] = "wrong-secret"
				}, "destination: cannot get an OAUTHBEARER token for the local broker"},
			}},
	}
	for i, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			props := w.props(t)
			issuedBefore := idp.issued.Load()
			restartSidecars(t, func(s *testbed.Sidecar) error { return setDestination(s, w.listener, props) })
			for _, s := range env.Sidecars.Sidecars() {
				waitReadyz(t, s, http.StatusOK, fmt.Sprintf("ok   local broker %d: reachable", s.BrokerID))
			}
			if w.client != "" && idp.issued.Load() == issuedBefore {
				t.Errorf("the sidecars reach their brokers but the token endpoint issued no token")
			}

			mirror, topic := fmt.Sprintf("destsec-%d", i), fmt.Sprintf("destsec-orders-%d", i)
			mustCLI(t, "--create", "--mirror", mirror, "--mirror-config",
				writeProperties(t, map[string]string{"bootstrap.servers": env.Source.Bootstrap()}))
			createSourceTopic(t, topic, 2)
			produce(t, topic, 200)
			mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
			waitCaughtUp(t, mirror, topic)
			sameRecordsKcat(t, topic, 2)

			// The brokers check what the sidecars send: the same
			// settings without the credential are refused, and the
			// sidecar says so.
			s := env.Sidecars.Sidecars()[len(env.Sidecars.Sidecars())-1]
			for _, r := range w.refusals {
				bad := maps.Clone(props)
				r.spoil(bad)
				stopSidecar(t, s)
				logBefore := logSize(t, s)
				if err := setDestination(s, w.listener, bad); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				err := s.Start(ctx)
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				body := waitReadyz(t, s, http.StatusServiceUnavailable, fmt.Sprintf("FAIL local broker %d: ", s.BrokerID))
				t.Logf("sidecar %d with %s, /readyz:\n%s", s.BrokerID, r.name, body)
				line := waitLogLine(t, s, logBefore, r.log)
				t.Logf("sidecar %d with %s logged: %s", s.BrokerID, r.name, line)
				for _, secret := range []string{testbed.Sidemirror.Password, forgerSecret, idp.clientSecret, storePassword} {
					if strings.Contains(line, secret) {
						t.Errorf("the log line shows a secret: %s", line)
					}
				}
			}
		})
	}
}

// saveSidecarConfigs returns every sidecar's configuration file.
func saveSidecarConfigs(t *testing.T) map[int32][]byte {
	t.Helper()
	saved := map[int32][]byte{}
	for _, s := range env.Sidecars.Sidecars() {
		b, err := os.ReadFile(s.ConfigPath())
		if err != nil {
			t.Fatal(err)
		}
		saved[s.BrokerID] = b
	}
	return saved
}

// setDestination points a sidecar's destination client at its broker's
// listener with props as its only destination.* keys.
func setDestination(s *testbed.Sidecar, listener string, props map[string]string) error {
	var addr string
	for _, n := range env.Destination.Nodes() {
		if n.ID == s.BrokerID {
			addr = n.ListenerAddr(listener)
		}
	}
	if addr == "" {
		return fmt.Errorf("broker %d has no %s listener", s.BrokerID, listener)
	}
	return s.EditConfig(func(p map[string]string) {
		for k := range p {
			if strings.HasPrefix(k, "destination.") {
				delete(p, k)
			}
		}
		maps.Copy(p, props)
		p["local.bootstrap.servers"] = addr
	})
}

// restartSidecars stops every sidecar, edits its configuration and starts
// them all again, then waits until the group answers --list.
func restartSidecars(t *testing.T, edit func(*testbed.Sidecar) error) {
	t.Helper()
	for _, s := range env.Sidecars.Sidecars() {
		stopSidecar(t, s)
		if err := edit(s); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(env.Sidecars.Sidecars()))
	for i, s := range env.Sidecars.Sidecars() {
		wg.Go(func() { errs[i] = s.Start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("start the sidecars: %v", err)
	}
	wait.For(t, time.Minute, "the sidecars to answer --list", func() bool { return cli(t, "--list").Code == 0 })
}

func stopSidecar(t *testing.T, s *testbed.Sidecar) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("stop sidecar %d: %v", s.BrokerID, err)
	}
}

// waitReadyz waits until the sidecar's /readyz (sources left out) answers
// code with a body containing want, and returns the body.
func waitReadyz(t *testing.T, s *testbed.Sidecar, code int, want string) string {
	t.Helper()
	var last string
	client := &http.Client{Timeout: 5 * time.Second}
	defer func() {
		if t.Failed() {
			t.Logf("sidecar %d: last /readyz: %s", s.BrokerID, last)
		}
	}()
	wait.For(t, time.Minute, fmt.Sprintf("sidecar %d: /readyz %d with %q", s.BrokerID, code, want), func() bool {
		resp, err := client.Get("http://" + s.HTTPAddr + "/readyz?exclude=sources")
		if err != nil {
			last = err.Error()
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		last = fmt.Sprintf("%d %s", resp.StatusCode, b)
		return resp.StatusCode == code && strings.Contains(string(b), want)
	})
	return last
}

func logSize(t *testing.T, s *testbed.Sidecar) int64 {
	t.Helper()
	st, err := os.Stat(s.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// waitLogLine waits until the sidecar's log, from offset on, has a line
// containing want, and returns it.
func waitLogLine(t *testing.T, s *testbed.Sidecar, offset int64, want string) string {
	t.Helper()
	var line string
	wait.For(t, time.Minute, fmt.Sprintf("sidecar %d to log %q", s.BrokerID, want), func() bool {
		b, err := os.ReadFile(s.LogPath())
		if err != nil || int64(len(b)) < offset {
			return false
		}
		for l := range strings.Lines(string(b[offset:])) {
			if strings.Contains(l, want) {
				line = strings.TrimSpace(l)
				return true
			}
		}
		return false
	})
	return line
}

// sameRecordsKcat dumps every partition of topic on both clusters with
// kcat (offset, timestamp, key, value, headers) and checks that the dumps
// are identical and not empty.
func sameRecordsKcat(t *testing.T, topic string, partitions int32) {
	t.Helper()
	total := 0
	for p := range partitions {
		src, dst := kcatDump(t, env.Source, topic, p), kcatDump(t, env.Destination, topic, p)
		if len(src) == 0 || !bytes.Equal(src, dst) {
			t.Fatalf("%s-%d: kcat dumps differ (%d and %d bytes)\nsource:\n%s\ndestination:\n%s", topic, p, len(src), len(dst), head(src), head(dst))
		}
		total += bytes.Count(src, []byte("\n"))
	}
	t.Logf("kcat: %d records of %s identical on both clusters", total, topic)
}

func kcatDump(t *testing.T, c *testbed.Cluster, topic string, p int32) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.DumpPartition(ctx, testbed.Admin, topic, p, testbed.DumpFormat)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func head(b []byte) []byte {
	lines := bytes.SplitAfterN(b, []byte("\n"), 6)
	return bytes.Join(lines[:min(len(lines), 5)], nil)
}
