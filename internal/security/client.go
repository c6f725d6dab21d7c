package security

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sidemirror/sidemirror/internal/properties"
)

// Security protocols and SASL mechanisms, with Kafka's names.
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"

	MechanismPlain       = "PLAIN"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
	MechanismOAuthBearer = "OAUTHBEARER"
)

// SecurityProtocols and SASLMechanisms list the supported values.
var (
	SecurityProtocols = []string{ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL}
	SASLMechanisms    = []string{MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512, MechanismOAuthBearer}
)

// loginCallbackHandlers are the values of sasl.login.callback.handler.class
// that mean Kafka's client credentials flow, which is what sidemirror
// implements for OAUTHBEARER.
var loginCallbackHandlers = []string{
	"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
	"org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
}

// ClientKeys are the Kafka client properties a ClientConfig reads, without
// their prefix, with Kafka's names and meanings.
var ClientKeys = append([]string{
	"security.protocol",
	"sasl.mechanism",
	"sasl.jaas.config",
	"sasl.login.callback.handler.class",
	"sasl.oauthbearer.token.endpoint.url",
	"sasl.oauthbearer.client.credentials.client.id",
	"sasl.oauthbearer.client.credentials.client.secret",
	"sasl.oauthbearer.scope",
}, append(slices.Clone(storeKeys), "ssl.endpoint.identification.algorithm")...)

// ClientConfig is how a Kafka client reaches one cluster: Kafka's client
// security properties under a key prefix ("destination." for the sidecar's
// own cluster, "" for a mirror's source and the CLI's --command-config).
// Fields hold the property values as written; KgoOpts turns them into
// franz-go options.
type ClientConfig struct {
	// Prefix is the key prefix, used to name keys in errors and output.
	Prefix string
	// BootstrapServers are the seed brokers (host:port). They are set by the
	// owner of the ClientConfig, not read from the prefixed keys.
	BootstrapServers []string

	SecurityProtocol string // security.protocol
	SASLMechanism    string // sasl.mechanism
	SASLJAASConfig   string // sasl.jaas.config (secret)

	// OAUTHBEARER with the client credentials flow. The client ID, secret
	// and scope may instead be the clientId, clientSecret and scope options
	// of sasl.jaas.config, as before Kafka 4.1.
	LoginCallbackHandlerClass string // sasl.login.callback.handler.class
	TokenEndpointURL          string // sasl.oauthbearer.token.endpoint.url
	OAuthClientID             string // sasl.oauthbearer.client.credentials.client.id
	OAuthClientSecret         string // sasl.oauthbearer.client.credentials.client.secret (secret)
	OAuthScope                string // sasl.oauthbearer.scope

	SSL SSLStores // ssl.keystore.*, ssl.truststore.*, ssl.key.password

	// SSLEndpointIdentificationAlgorithm is "https" (verify the broker's
	// host name) or "" (verify the certificate chain only).
	SSLEndpointIdentificationAlgorithm string
}

// DefaultClientConfig returns the defaults for a client whose keys start
// with prefix: PLAINTEXT, SASL mechanism PLAIN (Kafka's default GSSAPI is
// not supported), store types detected from the files, host names verified.
func DefaultClientConfig(prefix string) ClientConfig {
	return ClientConfig{
		Prefix:                             prefix,
		SecurityProtocol:                   ProtocolPlaintext,
		SASLMechanism:                      MechanismPlain,
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
	case "sasl.login.callback.handler.class":
		return &c.LoginCallbackHandlerClass
	case "sasl.oauthbearer.token.endpoint.url":
		return &c.TokenEndpointURL
	case "sasl.oauthbearer.client.credentials.client.id":
		return &c.OAuthClientID
	case "sasl.oauthbearer.client.credentials.client.secret":
		return &c.OAuthClientSecret
	case "sasl.oauthbearer.scope":
		return &c.OAuthScope
	case "ssl.endpoint.identification.algorithm":
		return &c.SSLEndpointIdentificationAlgorithm
	}
	return c.SSL.field(name)
}

// IsClientKey reports whether name (without prefix) is a ClientKeys entry.
func IsClientKey(name string) bool { return slices.Contains(ClientKeys, name) }

// ParseClientConfig reads the keys of props that start with prefix into a
// ClientConfig (on top of DefaultClientConfig) and validates it. Keys
// without the prefix are ignored; an unknown key with the prefix is an
// error naming it. Values must already be resolved (properties.Resolver).
// BootstrapServers is left for the caller to set.
func ParseClientConfig(props map[string]string, prefix string) (ClientConfig, error) {
	c := DefaultClientConfig(prefix)
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
			return ClientConfig{}, &ConfigError{Key: k, Msg: "is not a Kafka client setting that sidemirror supports (see docs/configuration.md for the valid keys)"}
		}
		*f = strings.TrimSpace(props[k])
	}
	if err := c.Validate(); err != nil {
		return ClientConfig{}, err
	}
	return c, nil
}

// Protocol returns security.protocol in upper case.
func (c ClientConfig) Protocol() string { return strings.ToUpper(c.SecurityProtocol) }

// UsesSASL reports whether the protocol is SASL_PLAINTEXT or SASL_SSL.
func (c ClientConfig) UsesSASL() bool { return strings.HasPrefix(c.Protocol(), "SASL_") }

// UsesTLS reports whether the protocol is SSL or SASL_SSL.
func (c ClientConfig) UsesTLS() bool {
	return c.Protocol() == ProtocolSSL || c.Protocol() == ProtocolSASLSSL
}

// Validate checks the properties and returns the first problem as a
// one-line *ConfigError; secrets are never part of the message. Settings
// that are valid Kafka but not implemented also match ErrNotSupported.
func (c ClientConfig) Validate() error {
	k := func(name string) string { return c.Prefix + name }
	if !slices.Contains(SecurityProtocols, c.Protocol()) {
		return configErr(k("security.protocol"), "%q is not supported (expected %s)", c.SecurityProtocol, orList(SecurityProtocols))
	}
	if c.UsesSASL() {
		if err := c.validateSASL(); err != nil {
			return err
		}
	} else if c.oauthSet() != "" {
		return configErr(k(c.oauthSet()), "is set, but %s is %s (expected SASL_SSL or SASL_PLAINTEXT with sasl.mechanism OAUTHBEARER)", k("security.protocol"), c.Protocol())
	}
	if err := c.SSL.validate(c.Prefix); err != nil {
		return err
	}
	if a := c.SSLEndpointIdentificationAlgorithm; a != "" && !strings.EqualFold(a, "https") {
		return configErr(k("ssl.endpoint.identification.algorithm"), "%q is not supported (expected https, or empty to skip host name verification)", a)
	}
	return nil
}

// oauthSet returns the first OAUTHBEARER key that is set, or "".
func (c ClientConfig) oauthSet() string {
	for _, f := range []struct{ name, v string }{
		{"sasl.login.callback.handler.class", c.LoginCallbackHandlerClass},
		{"sasl.oauthbearer.token.endpoint.url", c.TokenEndpointURL},
		{"sasl.oauthbearer.client.credentials.client.id", c.OAuthClientID},
		{"sasl.oauthbearer.client.credentials.client.secret", c.OAuthClientSecret},
		{"sasl.oauthbearer.scope", c.OAuthScope},
	} {
		if f.v != "" {
			return f.name
		}
	}
	return ""
}

func (c ClientConfig) validateSASL() error {
	mechKey, jaasKey := c.Prefix+"sasl.mechanism", c.Prefix+"sasl.jaas.config"
	switch {
	case strings.EqualFold(c.SASLMechanism, "GSSAPI"):
		return notSupported(mechKey, "%q (Kerberos) is not supported (expected %s)", c.SASLMechanism, orList(SASLMechanisms))
	case !slices.Contains(SASLMechanisms, c.SASLMechanism):
		return configErr(mechKey, "%q is not supported (expected %s)", c.SASLMechanism, orList(SASLMechanisms))
	}
	module := loginModuleFor(c.SASLMechanism)
	example := module + ` required username="..." password="...";`
	if c.SASLMechanism == MechanismOAuthBearer {
		example = module + ` required clientId="..." clientSecret="...";`
	}
	if c.SASLJAASConfig == "" {
		return configErr(jaasKey, "is missing, but %s is %s (expected e.g. %s)", c.Prefix+"security.protocol", c.Protocol(), example)
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
	if c.SASLMechanism == MechanismOAuthBearer {
		return c.validateOAuth(j)
	}
	if s := c.oauthSet(); s != "" {
		return configErr(c.Prefix+s, "is set, but %s is %s (expected it only with OAUTHBEARER)", mechKey, c.SASLMechanism)
	}
	for _, opt := range []string{"username", "password"} {
		if j.options[opt] == "" {
			return configErr(jaasKey, "%s has no %s option (expected e.g. %s)", properties.Hidden, opt, example)
		}
	}
	return nil
}

func (c ClientConfig) validateOAuth(j jaasConfig) error {
	k := func(name string) string { return c.Prefix + name }
	if h := c.LoginCallbackHandlerClass; h != "" && !slices.Contains(loginCallbackHandlers, h) {
		return notSupported(k("sasl.login.callback.handler.class"), "%q is not supported (expected %s, Kafka's client credentials flow, or leave it unset)", h, loginCallbackHandlers[0])
	}
	if c.TokenEndpointURL == "" {
		return notSupported(k("sasl.oauthbearer.token.endpoint.url"), "is missing, but %s is OAUTHBEARER (expected the identity provider's token endpoint, e.g. https://idp.example.com/oauth2/token; unsecured tokens are not supported)", k("sasl.mechanism"))
	}
	u, err := url.Parse(c.TokenEndpointURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "file") || (u.Scheme != "file" && u.Host == "") {
		return configErr(k("sasl.oauthbearer.token.endpoint.url"), "%q is not an http, https or file URL", c.TokenEndpointURL)
	}
	if u.Scheme == "file" {
		return nil
	}
	id, secret, _ := c.oauthCredentials(j)
	switch {
	case id == "":
		return configErr(k("sasl.oauthbearer.client.credentials.client.id"), "is missing (expected the OAuth client ID here or as the clientId option of %s)", k("sasl.jaas.config"))
	case secret == "":
		return configErr(k("sasl.oauthbearer.client.credentials.client.secret"), "is missing (expected the OAuth client secret here or as the clientSecret option of %s)", k("sasl.jaas.config"))
	}
	return nil
}

// oauthCredentials returns the client ID, secret and scope: the
// sasl.oauthbearer.* keys, else the JAAS options.
func (c ClientConfig) oauthCredentials(j jaasConfig) (id, secret, scope string) {
	pick := func(key, opt string) string {
		if key != "" {
			return key
		}
		return j.options[opt]
	}
	return pick(c.OAuthClientID, "clientId"), pick(c.OAuthClientSecret, "clientSecret"), pick(c.OAuthScope, "scope")
}

// Redacted returns the client properties with their prefix in ClientKeys
// order; secrets are shown as [hidden] and inline PEM by its size.
func (c ClientConfig) Redacted() []properties.Property {
	props := make([]properties.Property, 0, len(ClientKeys))
	for _, name := range ClientKeys {
		props = append(props, properties.Property{Key: c.Prefix + name, Value: redact(name, *c.field(name))})
	}
	return props
}

// KgoOpts validates the configuration and returns the franz-go options that
// connect to the cluster: seed brokers, SASL and TLS. Stores are read now.
func (c ClientConfig) KgoOpts() ([]kgo.Opt, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if len(c.BootstrapServers) == 0 {
		return nil, fmt.Errorf("%w: the %sclient has no bootstrap servers", ErrInvalidConfig, c.Prefix)
	}
	opts := []kgo.Opt{kgo.SeedBrokers(c.BootstrapServers...)}
	if c.UsesSASL() {
		m, err := c.Mechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	if c.UsesTLS() {
		cfg, err := c.TLSConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	return opts, nil
}

// Mechanism returns the SASL mechanism with the configured credentials.
func (c ClientConfig) Mechanism() (sasl.Mechanism, error) {
	j, err := parseJAAS(c.SASLJAASConfig)
	if err != nil {
		return nil, configErr(c.Prefix+"sasl.jaas.config", "%s is malformed: %v", properties.Hidden, err)
	}
	user, pass := j.options["username"], j.options["password"]
	switch c.SASLMechanism {
	case MechanismPlain:
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case MechanismSCRAMSHA256, MechanismSCRAMSHA512:
		a := scram.Auth{User: user, Pass: pass, IsToken: strings.EqualFold(j.options["tokenauth"], "true")}
		if c.SASLMechanism == MechanismSCRAMSHA256 {
			return a.AsSha256Mechanism(), nil
		}
		return a.AsSha512Mechanism(), nil
	case MechanismOAuthBearer:
		id, secret, scope := c.oauthCredentials(j)
		ts := newTokenSource(c.TokenEndpointURL, id, secret, scope)
		return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
			tok, err := ts.Token(ctx)
			return oauth.Auth{Token: tok}, err
		}), nil
	}
	return nil, notSupported(c.Prefix+"sasl.mechanism", "%q is not supported (expected %s)", c.SASLMechanism, orList(SASLMechanisms))
}

// TLSConfig builds the client's TLS configuration from the stores.
func (c ClientConfig) TLSConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	pool, err := c.SSL.TrustPool(c.Prefix)
	if err != nil {
		return nil, err
	}
	cfg.RootCAs = pool
	cert, err := c.SSL.Certificate(c.Prefix)
	if err != nil {
		return nil, err
	}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	if c.SSLEndpointIdentificationAlgorithm == "" {
		// Verify the chain but not the host name, as Kafka does with an
		// empty ssl.endpoint.identification.algorithm.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error { return verifyChain(cs, pool) }
	}
	return cfg, nil
}

// verifyChain verifies the peer's certificate chain against roots (the
// system's when nil) without checking a host name.
func verifyChain(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the peer sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, ic := range cs.PeerCertificates[1:] {
		inter.AddCert(ic)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
	return err
}

// orList formats ["a","b","c"] as "a, b or c".
func orList(list []string) string {
	if len(list) < 2 {
		return strings.Join(list, "")
	}
	return strings.Join(list[:len(list)-1], ", ") + " or " + list[len(list)-1]
}
