package clientsec

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sidemirror/sidemirror/e2e/testbed"
	"github.com/sidemirror/sidemirror/internal/security"
	"github.com/sidemirror/sidemirror/internal/testwait"
	"github.com/sidemirror/sidemirror/protocol"
)

var wait = testwait.Every(250 * time.Millisecond)

const storePassword = "store-secret"

// TestClientSecurity creates one mirror per way of reaching the source's
// secure listeners, each mirror's bootstrap.servers naming only that
// listener (whose metadata advertises only itself), and checks that each
// mirrors its topic with identical records at the same offsets.
func TestClientSecurity(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(env.LogTails(60))
		}
	})
	scram := fmt.Sprintf(`org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";`,
		testbed.Sidemirror.Name, testbed.Sidemirror.Password)
	ways := []struct {
		name   string
		props  func(t *testing.T) map[string]string
		client string // a client name the identity provider counts, for OAUTHBEARER
	}{
		{name: "SASL_SSL SCRAM-SHA-512 with a PEM trust store", props: func(*testing.T) map[string]string {
			return map[string]string{
				"bootstrap.servers":       env.Source.ListenerBootstrap(testbed.ListenerSCRAM),
				"security.protocol":       "SASL_SSL",
				"sasl.mechanism":          "SCRAM-SHA-512",
				"sasl.jaas.config":        scram,
				"ssl.truststore.type":     "PEM",
				"ssl.truststore.location": pki.CAFile,
			}
		}},
		{name: "mTLS with PKCS12 stores", props: func(t *testing.T) map[string]string {
			return map[string]string{
				"bootstrap.servers":       env.Source.ListenerBootstrap(testbed.ListenerMTLS),
				"security.protocol":       "SSL",
				"ssl.keystore.type":       "PKCS12",
				"ssl.keystore.location":   must(t)(pki.IssuePKCS12("mirror-p12", storePassword)),
				"ssl.keystore.password":   storePassword,
				"ssl.truststore.type":     "PKCS12",
				"ssl.truststore.location": must(t)(pki.TrustStore("PKCS12", storePassword)),
				"ssl.truststore.password": storePassword,
			}
		}},
		{name: "mTLS with JKS stores", props: func(t *testing.T) map[string]string {
			return map[string]string{
				"bootstrap.servers":       env.Source.ListenerBootstrap(testbed.ListenerMTLS),
				"security.protocol":       "SSL",
				"ssl.keystore.type":       "JKS",
				"ssl.keystore.location":   must(t)(pki.IssueJKS("mirror-jks", storePassword)),
				"ssl.keystore.password":   storePassword,
				"ssl.key.password":        storePassword,
				"ssl.truststore.type":     "JKS",
				"ssl.truststore.location": must(t)(pki.TrustStore("JKS", storePassword)),
				"ssl.truststore.password": storePassword,
			}
		}},
		{name: "mTLS with an encrypted PKCS#8 key", props: func(t *testing.T) map[string]string {
			return map[string]string{
				"bootstrap.servers":       env.Source.ListenerBootstrap(testbed.ListenerMTLS),
				"security.protocol":       "SSL",
				"ssl.keystore.type":       "PEM",
				"ssl.keystore.location":   must(t)(pki.IssueEncryptedPEM("mirror-encrypted", storePassword)),
				"ssl.key.password":        storePassword,
				"ssl.truststore.type":     "PEM",
				"ssl.truststore.location": pki.CAFile,
			}
		}},
		{name: "SASL_SSL OAUTHBEARER client credentials", client: idp.clientID, props: func(*testing.T) map[string]string {
			return map[string]string{
				"bootstrap.servers":                   env.Source.ListenerBootstrap(testbed.ListenerOAuth),
				"security.protocol":                   "SASL_SSL",
				"sasl.mechanism":                      "OAUTHBEARER",
				"sasl.login.callback.handler.class":   "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
				"sasl.oauthbearer.token.endpoint.url": idp.url + "/token",
				"sasl.jaas.config": fmt.Sprintf(`org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="%s" clientSecret="%s";`,
					idp.clientID, idp.clientSecret),
				"ssl.truststore.type":     "PEM",
				"ssl.truststore.location": pki.CAFile,
			}
		}},
	}
	for i, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			mirror, topic := fmt.Sprintf("clientsec-%d", i), fmt.Sprintf("clientsec-orders-%d", i)
			props := w.props(t)
			issuedBefore := idp.issued.Load()
			mustCLI(t, "--create", "--mirror", mirror, "--mirror-config", writeProperties(t, props))
			createSourceTopic(t, topic, 2)
			produce(t, topic, 400)
			mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
			waitCaughtUp(t, mirror, topic)
			sameRecords(t, topic)
			if w.client != "" && idp.issued.Load() == issuedBefore {
				t.Errorf("the mirror caught up but the token endpoint issued no token")
			}
			// The mirror's settings reach the listener only as written:
			// the same settings without the credential are refused by the
			// broker, so the listener does check what the mirror sent.
			assertRefusedWithout(t, props)
		})
	}

	t.Run("unsupported settings are refused at create", func(t *testing.T) {
		for key, value := range map[string]string{"ssl.keystore.type": "BCFKS", "sasl.mechanism": "GSSAPI"} {
			props := map[string]string{
				"bootstrap.servers":       env.Source.ListenerBootstrap(testbed.ListenerSCRAM),
				"security.protocol":       "SASL_SSL",
				"sasl.mechanism":          "SCRAM-SHA-512",
				"sasl.jaas.config":        scram,
				"ssl.truststore.location": pki.CAFile,
			}
			props[key] = value
			r := cli(t, "--create", "--mirror", "refused", "--mirror-config", writeProperties(t, props))
			if r.Code != 2 || !strings.Contains(r.Stderr+r.Stdout, key) {
				t.Errorf("%s=%s: exit %d, want exit 2 (settings refused) and an error naming the key\nstdout: %s\nstderr: %s", key, value, r.Code, r.Stdout, r.Stderr)
			}
			t.Logf("%s=%s: exit %d: %s", key, value, r.Code, strings.TrimSpace(r.Stderr+r.Stdout))
			if strings.Contains(r.Stderr+r.Stdout, testbed.Sidemirror.Password) {
				t.Errorf("%s=%s: the output shows the SCRAM password", key, value)
			}
		}
		if out := mustCLI(t, "--list"); strings.Contains(out, "refused") {
			t.Errorf("--list shows the refused mirror:\n%s", out)
		}
	})
}

// assertRefusedWithout connects to the source with props minus their
// credential (the key store, or the SASL settings with a wrong password or
// client secret) through sidemirror's client security and checks that the
// broker refuses the connection.
func assertRefusedWithout(t *testing.T, props map[string]string) {
	t.Helper()
	bad := maps.Clone(props)
	switch {
	case bad["sasl.mechanism"] == "SCRAM-SHA-512":
		bad["sasl.jaas.config"] = strings.Replace(bad["sasl.jaas.config"], testbed.Sidemirror.Password, "wrong-password", 1)
	case bad["sasl.mechanism"] == "OAUTHBEARER":
		// A token of the right key ID signed by a key the JWKS lacks.
		bad["sasl.jaas.config"] = fmt.Sprintf(`org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="%s" clientSecret="%s";`,
			forgerID, forgerSecret)
	default:
		for _, k := range []string{"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password"} {
			delete(bad, k)
		}
	}
	bootstrap := bad["bootstrap.servers"]
	delete(bad, "bootstrap.servers")
	cfg, err := security.ParseClientConfig(bad, "")
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg.BootstrapServers = strings.Split(bootstrap, ",")
	opts, err := cfg.KgoOpts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.RequestRetries(0))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err == nil {
		t.Errorf("the broker served metadata to a client without the credential")
	} else {
		t.Logf("without the credential: %v", err)
	}
}

func must(t *testing.T) func(string, error) string {
	return func(s string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

func writeProperties(t *testing.T, props map[string]string) string {
	t.Helper()
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(props)) {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	file := filepath.Join(t.TempDir(), "mirror.properties")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// cliResult is what one kafka-cluster-mirrors run printed.
type cliResult = testbed.CLIResult

func cli(t *testing.T, args ...string) cliResult {
	t.Helper()
	return testbed.RunCLI(t, env.Bin.CLI, append([]string{"--bootstrap-server", env.Sidecars.AdminBootstrap()}, args...)...)
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	r := cli(t, args...)
	if r.Code != 0 {
		t.Fatalf("kafka-cluster-mirrors %v: exit %d\nstdout: %s\nstderr: %s", args, r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

func describe(t *testing.T, mirror string) protocol.DescribedMirror {
	t.Helper()
	out := mustCLI(t, "--describe", "--mirror", mirror, "--json")
	var resp protocol.DescribeClusterMirrorsResponse
	if err := json.Unmarshal([]byte(out), &resp); err != nil || len(resp.Mirrors) != 1 {
		t.Fatalf("describe --json: %v\n%s", err, out)
	}
	return resp.Mirrors[0]
}

func newClient(t *testing.T, c *testbed.Cluster, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := c.NewClient(testbed.Admin, extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createSourceTopic(t *testing.T, name string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(newClient(t, env.Source)).CreateTopic(ctx, partitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create source topic %s: %v", name, err)
	}
}

func produce(t *testing.T, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%s-%d", topic, i),
			Headers: []kgo.RecordHeader{{Key: "n", Value: fmt.Appendf(nil, "%d", i)}}})
	}
	if err := newClient(t, env.Source).ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// waitCaughtUp waits until the destination's end offsets equal the
// source's and describe shows every partition MIRRORING with lag 0.
func waitCaughtUp(t *testing.T, mirror, topic string) {
	t.Helper()
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("last seen: %s", last)
		}
	}()
	wait.For(t, 3*time.Minute, "the mirror to catch up", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		src, err1 := env.Source.EndOffsets(ctx, topic)
		dst, err2 := env.Destination.EndOffsets(ctx, topic)
		if err1 != nil || err2 != nil || len(src) == 0 || len(src) != len(dst) {
			last = fmt.Sprintf("%v %v %v %v; describe: %+v", src, dst, err1, err2, describe(t, mirror))
			return false
		}
		for p, o := range src {
			if dst[p] != o {
				last = fmt.Sprintf("source %v, destination %v", src, dst)
				return false
			}
		}
		rows := 0
		for _, tp := range describe(t, mirror).Topics {
			for _, p := range tp.Partitions {
				if tp.TopicName == topic && p.State == "MIRRORING" && p.Lag == 0 {
					rows++
				}
			}
		}
		last = fmt.Sprintf("source %v, destination %v, %d partitions MIRRORING with lag 0", src, dst, rows)
		return rows == len(src)
	})
	t.Logf("caught up: %s", last)
}

// sameRecords reads the topic on both clusters and checks that every
// partition holds the same records (offset, key, value, headers,
// timestamp).
func sameRecords(t *testing.T, topic string) {
	t.Helper()
	src, dst := readAll(t, env.Source, topic), readAll(t, env.Destination, topic)
	if len(src) == 0 || len(src) != len(dst) {
		t.Fatalf("%d records on the source, %d on the destination", len(src), len(dst))
	}
	for i := range src {
		if src[i] != dst[i] {
			t.Fatalf("record %d differs:\nsource      %s\ndestination %s", i, src[i], dst[i])
		}
	}
	t.Logf("%d records identical on both clusters", len(src))
}

// readAll returns every record of topic, one line each, ordered by
// partition and offset.
func readAll(t *testing.T, c *testbed.Cluster, topic string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends, err := c.EndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, o := range ends {
		want += o
	}
	cl := newClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var recs []*kgo.Record
	for int64(len(recs)) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %s on %s: %d of %d records: %v", topic, c.Name(), len(recs), want, err)
		}
		recs = append(recs, fs.Records()...)
	}
	slices.SortFunc(recs, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	lines := make([]string, len(recs))
	for i, r := range recs {
		lines[i] = fmt.Sprintf("p%d@%d %s=%s %v %d", r.Partition, r.Offset, r.Key, r.Value, r.Headers, r.Timestamp.UnixMilli())
	}
	return lines
}
