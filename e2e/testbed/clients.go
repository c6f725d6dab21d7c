package testbed

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// ClientOptions returns franz-go options that connect to the cluster as u
// (u is ignored on PLAINTEXT clusters).
func (c *Cluster) ClientOptions(u User) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(c.Bootstrap(), ",")...)}
	if c.opts.SASL {
		opts = append(opts, kgo.SASL(plain.Auth{User: u.Name, Pass: u.Password}.AsMechanism()))
	}
	return opts
}

// NewClient returns a franz-go client connected to the cluster as u.
func (c *Cluster) NewClient(u User, extra ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append(c.ClientOptions(u), extra...)...)
}

// ClientProperties returns Kafka client properties (bootstrap.servers,
// security.protocol and SASL settings) for connecting as u.
func (c *Cluster) ClientProperties(u User) map[string]string {
	p := map[string]string{
		"bootstrap.servers": c.Bootstrap(),
		"security.protocol": c.SecurityProtocol(),
	}
	if c.opts.SASL {
		p["sasl.mechanism"] = "PLAIN"
		p["sasl.jaas.config"] = fmt.Sprintf(`org.apache.kafka.common.security.plain.PlainLoginModule required username=%q password=%q;`, u.Name, u.Password)
	}
	return p
}

// WriteClientProperties writes ClientProperties(u) as a properties file, for
// Kafka's console tools (--command-config) and the CLI.
func (c *Cluster) WriteClientProperties(path string, u User) error {
	p := c.ClientProperties(u)
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(p)) {
		fmt.Fprintf(&b, "%s=%s\n", k, p[k])
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// KcatArgs returns the kcat arguments that connect to the cluster as u:
// -b with the bootstrap servers and, on SASL clusters, the -X settings.
func (c *Cluster) KcatArgs(u User) []string {
	args := []string{"-b", c.Bootstrap()}
	if c.opts.SASL {
		args = append(args,
			"-X", "security.protocol=SASL_PLAINTEXT",
			"-X", "sasl.mechanisms=PLAIN",
			"-X", "sasl.username="+u.Name,
			"-X", "sasl.password="+u.Password)
	}
	return args
}
