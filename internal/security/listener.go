package security

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sidemirror/sidemirror/internal/properties"
)

// Values of ssl.client.auth, Kafka's names.
const (
	ClientAuthRequired  = "required"
	ClientAuthRequested = "requested"
	ClientAuthNone      = "none"
)

var clientAuths = []string{ClientAuthRequired, ClientAuthRequested, ClientAuthNone}

// ListenerKeys are the TLS settings of a listener, without their prefix
// ("admin." for the admin endpoint), with Kafka's broker names.
var ListenerKeys = append(slices.Clone(storeKeys), "ssl.client.auth", "ssl.principal.mapping.rules")

// ListenerTLS is the TLS side of a listener, as a Kafka broker's
// listener.name.<name>.ssl.* settings: the key store it presents, the trust
// store client certificates are verified against, whether clients must
// present one, and how certificate subjects become principals.
type ListenerTLS struct {
	Prefix string // key prefix, to name keys in errors
	Stores SSLStores
	// ClientAuth is ssl.client.auth: required, requested or none (Kafka's
	// default).
	ClientAuth string
	// PrincipalMappingRules is ssl.principal.mapping.rules (default DEFAULT).
	PrincipalMappingRules string
}

// DefaultListenerTLS returns the defaults for a listener whose keys start
// with prefix.
func DefaultListenerTLS(prefix string) ListenerTLS {
	return ListenerTLS{Prefix: prefix, ClientAuth: ClientAuthNone}
}

// Field returns the field holding the setting name (a ListenerKeys entry),
// or nil.
func (l *ListenerTLS) Field(name string) *string {
	switch name {
	case "ssl.client.auth":
		return &l.ClientAuth
	case "ssl.principal.mapping.rules":
		return &l.PrincipalMappingRules
	}
	return l.Stores.field(name)
}

// Validate checks the settings for a listener that speaks TLS. Files are
// not read.
func (l ListenerTLS) Validate() error {
	k := func(name string) string { return l.Prefix + name }
	if !slices.Contains(clientAuths, strings.ToLower(l.ClientAuth)) {
		return configErr(k("ssl.client.auth"), "%q is not supported (expected %s)", l.ClientAuth, orList(clientAuths))
	}
	if err := l.Stores.validate(l.Prefix); err != nil {
		return err
	}
	if !l.Stores.HasKeystore() {
		return configErr(k("ssl.keystore.location"), "is missing (expected the listener's key store: its certificate and private key)")
	}
	if strings.ToLower(l.ClientAuth) != ClientAuthNone && !l.Stores.HasTruststore() {
		return configErr(k("ssl.truststore.location"), "is missing, but %s is %s (expected the CA certificates that sign client certificates)", k("ssl.client.auth"), l.ClientAuth)
	}
	if _, err := ParsePrincipalMappingRules(k("ssl.principal.mapping.rules"), l.PrincipalMappingRules); err != nil {
		return err
	}
	return nil
}

// Redacted returns the settings with their prefix in ListenerKeys order;
// secrets are shown as [hidden] and inline PEM by its size.
func (l ListenerTLS) Redacted() []properties.Property {
	props := make([]properties.Property, 0, len(ListenerKeys))
	for _, name := range ListenerKeys {
		props = append(props, properties.Property{Key: l.Prefix + name, Value: redact(name, *l.Field(name))})
	}
	return props
}

// ServerTLS is a listener's live TLS configuration. It reads the stores
// once when built and again when one of their files changes (checked at
// most once per reloadCheckInterval, when a client connects), so that
// rotated certificates take effect without a restart. A reload that fails
// keeps the last good stores and is reported by LastReloadError.
type ServerTLS struct {
	l      ListenerTLS
	mapper *PrincipalMapper
	auth   tls.ClientAuthType

	mu          sync.Mutex
	cfg         *tls.Config
	stamps      []fileStamp
	checked     time.Time
	reloadErr   error
	reloadCount int
}

type fileStamp struct {
	path string
	mod  time.Time
	size int64
}

const reloadCheckInterval = time.Second

// NewServerTLS validates the settings and reads the stores.
func (l ListenerTLS) NewServerTLS() (*ServerTLS, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	mapper, _ := ParsePrincipalMappingRules(l.Prefix+"ssl.principal.mapping.rules", l.PrincipalMappingRules)
	s := &ServerTLS{l: l, mapper: mapper}
	switch strings.ToLower(l.ClientAuth) {
	case ClientAuthRequired:
		s.auth = tls.RequireAndVerifyClientCert
	case ClientAuthRequested:
		s.auth = tls.VerifyClientCertIfGiven
	default:
		s.auth = tls.NoClientCert
	}
	cfg, err := s.build()
	if err != nil {
		return nil, err
	}
	s.cfg, s.stamps, s.checked = cfg, s.stampFiles(), time.Now()
	return s, nil
}

func (s *ServerTLS) build() (*tls.Config, error) {
	cert, err := s.l.Stores.Certificate(s.l.Prefix)
	if err != nil {
		return nil, err
	}
	var pool *x509.CertPool
	if s.auth != tls.NoClientCert {
		if pool, err = s.l.Stores.TrustPool(s.l.Prefix); err != nil {
			return nil, err
		}
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{*cert},
		ClientCAs:    pool,
		ClientAuth:   s.auth,
	}, nil
}

func (s *ServerTLS) stampFiles() []fileStamp {
	var out []fileStamp
	for _, p := range []string{s.l.Stores.KeystoreLocation, s.l.Stores.TruststoreLocation} {
		if p == "" {
			continue
		}
		st := fileStamp{path: p}
		if fi, err := os.Stat(p); err == nil {
			st.mod, st.size = fi.ModTime(), fi.Size()
		}
		out = append(out, st)
	}
	return out
}

// Config returns a tls.Config for a listener: its GetConfigForClient hands
// every handshake the current stores.
func (s *ServerTLS) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.current(), nil
		},
	}
}

// current returns the configuration, reloading the stores when their files
// changed.
func (s *ServerTLS) current() *tls.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.checked) < reloadCheckInterval {
		return s.cfg
	}
	s.checked = time.Now()
	stamps := s.stampFiles()
	if slices.Equal(stamps, s.stamps) {
		return s.cfg
	}
	cfg, err := s.build()
	s.stamps = stamps
	if err != nil {
		s.reloadErr = err
		return s.cfg
	}
	s.cfg, s.reloadErr = cfg, nil
	s.reloadCount++
	return s.cfg
}

// LastReloadError returns why the last reload failed, or nil; Reloads how
// many reloads took effect.
func (s *ServerTLS) LastReloadError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reloadErr
}

// Reloads returns how many times changed store files were read again.
func (s *ServerTLS) Reloads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reloadCount
}

// Principal returns the principal of a TLS connection as Kafka forms it:
// User:<mapped subject DN> for a verified client certificate, else
// User:ANONYMOUS.
func (s *ServerTLS) Principal(cs tls.ConnectionState) (string, error) {
	if len(cs.PeerCertificates) == 0 {
		return Anonymous, nil
	}
	name, err := s.mapper.Map(DistinguishedName(cs.PeerCertificates[0]))
	if err != nil {
		return "", err
	}
	return PrincipalType + ":" + name, nil
}

// redact hides secret values and shows inline PEM by its size.
func redact(name, v string) string {
	switch {
	case v == "":
		return ""
	case properties.IsSecret(name):
		return properties.Hidden
	case name == "ssl.truststore.certificates" || name == "ssl.keystore.certificate.chain":
		return fmt.Sprintf("[PEM, %d bytes]", len(v))
	}
	return v
}
