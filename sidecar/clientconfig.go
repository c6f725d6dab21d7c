package sidecar

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sidemirror/sidemirror/internal/properties"
)

// ClientKeys are the Kafka client properties a ClientConfig reads, without
// their prefix, with Kafka's names and meanings.
var ClientKeys = []string{
	"security.protocol",
	"sasl.mechanism",
	"sasl.jaas.config",
	"ssl.truststore.location",
	"ssl.truststore.type",
	"ssl.truststore.password",
	"ssl.truststore.certificates",
	"ssl.keystore.location",
	"ssl.keystore.type",
	"ssl.keystore.password",
	"ssl.key.password",
	"ssl.keystore.certificate.chain",
	"ssl.keystore.key",
	"ssl.endpoint.identification.algorithm",
}

// Accepted values of the client properties.
var (
	securityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}
	saslMechanisms    = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}
	storeTypes        = []string{"PEM", "PKCS12"}
)

// ClientConfig is how a Kafka client reaches one cluster: Kafka's client
// security properties under a key prefix ("destination." for the sidecar's
// own cluster). Fields hold the property values as written; KgoOpts turns
// them into franz-go options.
type ClientConfig struct {
	// Prefix is the key prefix, used to name keys in errors and output.
	Prefix string
	// BootstrapServers are the seed brokers (host:port). They are set by the
	// owner of the ClientConfig, not read from the prefixed keys: the
	// destination client uses local.bootstrap.servers.
	BootstrapServers []string

	SecurityProtocol string // security.protocol
	SASLMechanism    string // sasl.mechanism
	SASLJAASConfig   string // sasl.jaas.config (secret)

	SSLTruststoreLocation     string // ssl.truststore.location
	SSLTruststoreType         string // ssl.truststore.type: PEM or PKCS12
	SSLTruststorePassword     string // ssl.truststore.password (secret)
	SSLTruststoreCertificates string // ssl.truststore.certificates: inline PEM

	SSLKeystoreLocation         string // ssl.keystore.location
	SSLKeystoreType             string // ssl.keystore.type: PEM or PKCS12
	SSLKeystorePassword         string // ssl.keystore.password (secret)
	SSLKeyPassword              string // ssl.key.password (secret)
	SSLKeystoreCertificateChain string // ssl.keystore.certificate.chain: inline PEM
	SSLKeystoreKey              string // ssl.keystore.key: inline PEM (secret)

	// SSLEndpointIdentificationAlgorithm is "https" (verify the broker's
	// host name) or "" (verify the certificate chain only).
	SSLEndpointIdentificationAlgorithm string
}

// DefaultClientConfig returns the defaults for a client whose keys start
// with prefix. Unlike Kafka, store types default to PEM (JKS is not
// supported) and the SASL mechanism to PLAIN (GSSAPI is not supported).
func DefaultClientConfig(prefix string) ClientConfig {
	return ClientConfig{
		Prefix:                             prefix,
		SecurityProtocol:                   "PLAINTEXT",
		SASLMechanism:                      "PLAIN",
		SSLTruststoreType:                  "PEM",
		SSLKeystoreType:                    "PEM",
		SSLEndpointIdentificationAlgorithm: "https",
	}
}

// field returns the field that holds the property name (a ClientKeys entry).
func (c *ClientConfig) field(name string) *string {
	switch name {
	case "security.protocol":
		return &c.SecurityProtocol
	case "sasl.mechanism":
		return &c.SASLMechanism
	case "sasl.jaas.config":
		return &c.SASLJAASConfig
	case "ssl.truststore.location":
		return &c.SSLTruststoreLocation
	case "ssl.truststore.type":
		return &c.SSLTruststoreType
	case "ssl.truststore.password":
		return &c.SSLTruststorePassword
	case "ssl.truststore.certificates":
		return &c.SSLTruststoreCertificates
	case "ssl.keystore.location":
		return &c.SSLKeystoreLocation
	case "ssl.keystore.type":
		return &c.SSLKeystoreType
	case "ssl.keystore.password":
		return &c.SSLKeystorePassword
	case "ssl.key.password":
		return &c.SSLKeyPassword
	case "ssl.keystore.certificate.chain":
		return &c.SSLKeystoreCertificateChain
	case "ssl.keystore.key":
		return &c.SSLKeystoreKey
	case "ssl.endpoint.identification.algorithm":
		return &c.SSLEndpointIdentificationAlgorithm
	}
	return nil
}

// ParseClientConfig reads the keys of props that start with prefix into a
// ClientConfig (on top of DefaultClientConfig) and validates it. Keys
// without the prefix are ignored; an unknown key with the prefix is an
// error. Values must already be resolved (see LoadConfig). BootstrapServers
// is left for the caller to set.
func ParseClientConfig(props map[string]string, prefix string) (ClientConfig, error) {
	c := DefaultClientConfig(prefix)
	known := make([]string, len(ClientKeys))
	for i, k := range ClientKeys {
		known[i] = prefix + k
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		f := c.field(strings.TrimPrefix(k, prefix))
		if f == nil {
			return ClientConfig{}, unknownKeyError(k, known, "")
		}
		*f = strings.TrimSpace(props[k])
	}
	if err := c.Validate(); err != nil {
		return ClientConfig{}, err
	}
	return c, nil
}

func (c ClientConfig) protocol() string { return strings.ToUpper(c.SecurityProtocol) }
func (c ClientConfig) usesSASL() bool   { return strings.HasPrefix(c.protocol(), "SASL_") }
func (c ClientConfig) usesTLS() bool    { return c.protocol() == "SSL" || c.protocol() == "SASL_SSL" }

// Validate checks the properties and returns the first problem as a
// one-line *ConfigError; secrets are never part of the message.
func (c ClientConfig) Validate() error {
	k := func(name string) string { return c.Prefix + name }
	if !slices.Contains(securityProtocols, c.protocol()) {
		return configErr(k("security.protocol"), "%q is not supported (expected %s)", c.SecurityProtocol, orList(securityProtocols))
	}
	if c.usesSASL() {
		if err := c.validateSASL(); err != nil {
			return err
		}
	}
	for _, s := range []struct{ name, typ string }{
		{"ssl.truststore.type", c.SSLTruststoreType},
		{"ssl.keystore.type", c.SSLKeystoreType},
	} {
		switch t := strings.ToUpper(s.typ); {
		case t == "JKS":
			return configErr(k(s.name), "%q is not supported (expected PEM or PKCS12; convert a JKS store with keytool -importkeystore -deststoretype PKCS12)", s.typ)
		case !slices.Contains(storeTypes, t):
			return configErr(k(s.name), "%q is not supported (expected PEM or PKCS12)", s.typ)
		}
	}
	trustPEM := strings.EqualFold(c.SSLTruststoreType, "PEM")
	keyPEM := strings.EqualFold(c.SSLKeystoreType, "PEM")
	switch {
	case c.SSLTruststoreCertificates != "" && c.SSLTruststoreLocation != "":
		return configErr(k("ssl.truststore.certificates"), "is set together with %s (expected only one of them)", k("ssl.truststore.location"))
	case c.SSLTruststoreCertificates != "" && !trustPEM:
		return configErr(k("ssl.truststore.type"), "%q does not fit %s (expected PEM)", c.SSLTruststoreType, k("ssl.truststore.certificates"))
	case c.SSLTruststorePassword != "" && trustPEM:
		return configErr(k("ssl.truststore.password"), "is set, but PEM trust stores have no password (expected it empty with %s PEM)", k("ssl.truststore.type"))
	case c.SSLKeystoreCertificateChain != "" && c.SSLKeystoreKey == "":
		return configErr(k("ssl.keystore.key"), "is missing, but %s is set (expected both)", k("ssl.keystore.certificate.chain"))
	case c.SSLKeystoreKey != "" && c.SSLKeystoreCertificateChain == "":
		return configErr(k("ssl.keystore.certificate.chain"), "is missing, but %s is set (expected both)", k("ssl.keystore.key"))
	case c.SSLKeystoreKey != "" && c.SSLKeystoreLocation != "":
		return configErr(k("ssl.keystore.key"), "is set together with %s (expected only one of them)", k("ssl.keystore.location"))
	case c.SSLKeystoreKey != "" && !keyPEM:
		return configErr(k("ssl.keystore.type"), "%q does not fit %s (expected PEM)", c.SSLKeystoreType, k("ssl.keystore.key"))
	case c.SSLKeystorePassword != "" && keyPEM:
		return configErr(k("ssl.keystore.password"), "is set, but a PEM key store takes only %s (expected it empty with %s PEM)", k("ssl.key.password"), k("ssl.keystore.type"))
	}
	if a := c.SSLEndpointIdentificationAlgorithm; a != "" && !strings.EqualFold(a, "https") {
		return configErr(k("ssl.endpoint.identification.algorithm"), "%q is not supported (expected https, or empty to skip host name verification)", a)
	}
	return nil
}

func (c ClientConfig) validateSASL() error {
	mechKey, jaasKey := c.Prefix+"sasl.mechanism", c.Prefix+"sasl.jaas.config"
	if !slices.Contains(saslMechanisms, c.SASLMechanism) {
		return configErr(mechKey, "%q is not supported (expected %s)", c.SASLMechanism, orList(saslMechanisms))
	}
	module := loginModuleFor(c.SASLMechanism)
	example := module + ` required username="..." password="...";`
	if c.SASLMechanism == "OAUTHBEARER" {
		example = module + " required;"
	}
	if c.SASLJAASConfig == "" {
		return configErr(jaasKey, "is missing, but %s is %s (expected e.g. %s)", c.Prefix+"security.protocol", c.protocol(), example)
	}
	j, err := parseJAAS(c.SASLJAASConfig)
	if err != nil {
		return configErr(jaasKey, "%s is malformed: %v (expected e.g. %s)", properties.Hidden, err, example)
	}
	if j.module != module {
		shown := "the login module"
		if strings.HasSuffix(j.module, "LoginModule") {
			shown = "login module " + j.module
		}
		return configErr(jaasKey, "%s does not fit %s %s (expected %s)", shown, mechKey, c.SASLMechanism, module)
	}
	if c.SASLMechanism == "OAUTHBEARER" {
		return nil
	}
	for _, opt := range []string{"username", "password"} {
		if j.options[opt] == "" {
			return configErr(jaasKey, "%s has no %s option (expected e.g. %s)", properties.Hidden, opt, example)
		}
	}
	return nil
}

// Redacted returns the client properties with their prefix in ClientKeys
// order; secrets are shown as [hidden] and inline PEM by its size.
func (c ClientConfig) Redacted() []Property {
	props := make([]Property, 0, len(ClientKeys))
	for _, name := range ClientKeys {
		v := *c.field(name)
		switch {
		case v != "" && properties.IsSecret(name):
			v = properties.Hidden
		case v != "" && (name == "ssl.truststore.certificates" || name == "ssl.keystore.certificate.chain"):
			v = fmt.Sprintf("[PEM, %d bytes]", len(v))
		}
		props = append(props, Property{Key: c.Prefix + name, Value: v})
	}
	return props
}

// KgoOpts validates the configuration and returns the franz-go options that
// connect to the cluster: seed brokers, SASL and TLS. PEM files are read
// now. PKCS12 stores, encrypted private keys and OAUTHBEARER fail with
// ErrNotSupported.
func (c ClientConfig) KgoOpts() ([]kgo.Opt, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if len(c.BootstrapServers) == 0 {
		return nil, fmt.Errorf("%w: the %sclient has no bootstrap servers", ErrInvalidConfig, c.Prefix)
	}
	opts := []kgo.Opt{kgo.SeedBrokers(c.BootstrapServers...)}
	if c.usesSASL() {
		j, err := parseJAAS(c.SASLJAASConfig)
		if err != nil { // unreachable after Validate
			return nil, configErr(c.Prefix+"sasl.jaas.config", "%s is malformed: %v", properties.Hidden, err)
		}
		user, pass := j.options["username"], j.options["password"]
		switch c.SASLMechanism {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
		case "SCRAM-SHA-256", "SCRAM-SHA-512":
			a := scram.Auth{User: user, Pass: pass, IsToken: strings.EqualFold(j.options["tokenauth"], "true")}
			if c.SASLMechanism == "SCRAM-SHA-256" {
				opts = append(opts, kgo.SASL(a.AsSha256Mechanism()))
			} else {
				opts = append(opts, kgo.SASL(a.AsSha512Mechanism()))
			}
		default:
			return nil, fmt.Errorf("%w: %ssasl.mechanism %s (use PLAIN or SCRAM-SHA-256/512)", ErrNotSupported, c.Prefix, c.SASLMechanism)
		}
	}
	if c.usesTLS() {
		cfg, err := c.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	return opts, nil
}

// tlsConfig builds the TLS configuration from PEM trust and key stores.
func (c ClientConfig) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}

	trust := []byte(c.SSLTruststoreCertificates)
	if c.SSLTruststoreLocation != "" {
		if strings.EqualFold(c.SSLTruststoreType, "PKCS12") {
			return nil, fmt.Errorf("%w: %sssl.truststore.type PKCS12; convert the store to PEM (openssl pkcs12 -in %s -nokeys -out truststore.pem) and set type PEM",
				ErrNotSupported, c.Prefix, c.SSLTruststoreLocation)
		}
		b, err := os.ReadFile(c.SSLTruststoreLocation)
		if err != nil {
			return nil, fmt.Errorf("%w: %sssl.truststore.location: cannot read %s: %v", ErrInvalidConfig, c.Prefix, c.SSLTruststoreLocation, unwrapPathError(err))
		}
		trust = b
	}
	if len(trust) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(trust) {
			return nil, fmt.Errorf("%w: %sssl.truststore: no PEM certificate found (expected -----BEGIN CERTIFICATE----- blocks)", ErrInvalidConfig, c.Prefix)
		}
		cfg.RootCAs = pool
	}

	chain, key := []byte(c.SSLKeystoreCertificateChain), []byte(c.SSLKeystoreKey)
	if c.SSLKeystoreLocation != "" {
		if strings.EqualFold(c.SSLKeystoreType, "PKCS12") {
			return nil, fmt.Errorf("%w: %sssl.keystore.type PKCS12; convert the store to PEM (openssl pkcs12 -in %s -nodes -out keystore.pem) and set type PEM",
				ErrNotSupported, c.Prefix, c.SSLKeystoreLocation)
		}
		b, err := os.ReadFile(c.SSLKeystoreLocation)
		if err != nil {
			return nil, fmt.Errorf("%w: %sssl.keystore.location: cannot read %s: %v", ErrInvalidConfig, c.Prefix, c.SSLKeystoreLocation, unwrapPathError(err))
		}
		chain, key = b, b // a PEM key store holds the key and the chain
	}
	if len(key) > 0 {
		if encryptedPEMKey(key) {
			return nil, fmt.Errorf("%w: %sssl.keystore: encrypted private keys; decrypt the key (openssl pkcs8 -in key.pem -out plain-key.pem) and protect the file instead",
				ErrNotSupported, c.Prefix)
		}
		cert, err := tls.X509KeyPair(chain, key)
		if err != nil {
			// The error of X509KeyPair describes PEM structure, not key bytes.
			return nil, fmt.Errorf("%w: %sssl.keystore: %v", ErrInvalidConfig, c.Prefix, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}

	if c.SSLEndpointIdentificationAlgorithm == "" {
		// Verify the chain but not the host name, as Kafka does with an
		// empty ssl.endpoint.identification.algorithm.
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("sidecar: broker sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, ic := range cs.PeerCertificates[1:] {
				inter.AddCert(ic)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	}
	return cfg, nil
}

// encryptedPEMKey reports whether the PEM data holds an encrypted private
// key (PKCS#8 or legacy OpenSSL encryption).
func encryptedPEMKey(data []byte) bool {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return false
		}
		if b.Type == "ENCRYPTED PRIVATE KEY" || (strings.HasSuffix(b.Type, "PRIVATE KEY") && strings.Contains(b.Headers["Proc-Type"], "ENCRYPTED")) {
			return true
		}
	}
}
