package testbed

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The names of the listeners SecureListeners adds.
const (
	// ListenerSCRAM is SASL_SSL with SCRAM-SHA-512 users.
	ListenerSCRAM = "SCRAM"
	// ListenerMTLS is SSL with ssl.client.auth=required.
	ListenerMTLS = "MTLS"
	// ListenerOAuth is SASL_SSL with OAUTHBEARER tokens validated against
	// a JWKS endpoint.
	ListenerOAuth = "OAUTH"
)

// SecureListeners adds TLS client listeners to every node of a loopback
// cluster, beside its BROKER listener (which stays as it is, for the tests'
// own clients and the brokers): each one on a port of its own, with a
// certificate for localhost and 127.0.0.1 signed by PKI.
type SecureListeners struct {
	// PKI signs the brokers' certificates; clients trust its CA.
	PKI *PKI
	// SCRAM adds ListenerSCRAM, SASL_SSL with SCRAM-SHA-512 and the users
	// of Users, created when the nodes are formatted (kafka-storage format
	// --add-scram).
	SCRAM bool
	// MTLS adds ListenerMTLS, SSL with client authentication required
	// (client certificates signed by PKI).
	MTLS bool
	// OAuthJWKSURL, if set, adds ListenerOAuth, SASL_SSL with OAUTHBEARER
	// validated by Kafka's OAuthBearerValidatorCallbackHandler, with
	// sasl.oauthbearer.jwks.endpoint.url set to the URL and the JVM
	// allowing it (org.apache.kafka.sasl.oauthbearer.allowed.urls). On
	// Kafka 4.1 that handler's default validator checks a token's claims
	// only, not its signature, and never fetches the URL; BrokerConfig
	// sasl.oauthbearer.jwt.validator.class=org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator
	// makes the brokers verify tokens against it.
	OAuthJWKSURL string
}

// names returns the listener names asked for, in a fixed order.
func (s *SecureListeners) names() []string {
	var ls []string
	if s.SCRAM {
		ls = append(ls, ListenerSCRAM)
	}
	if s.MTLS {
		ls = append(ls, ListenerMTLS)
	}
	if s.OAuthJWKSURL != "" {
		ls = append(ls, ListenerOAuth)
	}
	return ls
}

// placeSecureListeners gives every node a free loopback port per secure
// listener.
func (c *Cluster) placeSecureListeners() error {
	s := c.opts.Secure
	if s == nil {
		return nil
	}
	if c.opts.Hosts != nil {
		return fmt.Errorf("testbed: %s: secure listeners are for the loopback bed only", c.opts.Name)
	}
	if s.PKI == nil {
		return fmt.Errorf("testbed: %s: secure listeners need a PKI", c.opts.Name)
	}
	names := s.names()
	ports, err := freePorts(len(names) * len(c.nodes))
	if err != nil {
		return err
	}
	for i, n := range c.nodes {
		n.secureAddrs = map[string]string{}
		for j, l := range names {
			n.secureAddrs[l] = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i*len(names)+j]))
		}
	}
	return nil
}

// ListenerBootstrap returns the bootstrap servers of one of the listeners
// SecureListeners added, empty if the cluster has no such listener.
func (c *Cluster) ListenerBootstrap(listener string) string {
	var addrs []string
	for _, n := range c.nodes {
		if a := n.secureAddrs[listener]; a != "" {
			addrs = append(addrs, a)
		}
	}
	return strings.Join(addrs, ",")
}

// ListenerAddr returns this node's address on one of the listeners
// SecureListeners added (host:port), empty if it has no such listener: the
// local.bootstrap.servers of a sidecar that reaches its broker over it.
func (n *Node) ListenerAddr(listener string) string { return n.secureAddrs[listener] }

// secureConfig adds the secure listeners to a node's server.properties.
func (n *Node) secureConfig(props map[string]string) error {
	s := n.cluster.opts.Secure
	if s == nil {
		return nil
	}
	keystore, err := s.PKI.brokerKeystore()
	if err != nil {
		return err
	}
	protocols := map[string]string{ListenerSCRAM: "SASL_SSL", ListenerMTLS: "SSL", ListenerOAuth: "SASL_SSL"}
	for _, l := range s.names() {
		addr := n.secureAddrs[l]
		props["listeners"] += "," + l + "://" + addr
		props["advertised.listeners"] += "," + l + "://" + addr
		props["listener.security.protocol.map"] += "," + l + ":" + protocols[l]
		p := "listener.name." + strings.ToLower(l) + "."
		props[p+"ssl.keystore.type"] = "PEM"
		props[p+"ssl.keystore.location"] = keystore
		props[p+"ssl.truststore.type"] = "PEM"
		props[p+"ssl.truststore.location"] = s.PKI.CAFile
		switch l {
		case ListenerSCRAM:
			props[p+"sasl.enabled.mechanisms"] = "SCRAM-SHA-512"
			props[p+"scram-sha-512.sasl.jaas.config"] = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
		case ListenerMTLS:
			props[p+"ssl.client.auth"] = "required"
		case ListenerOAuth:
			props[p+"sasl.enabled.mechanisms"] = "OAUTHBEARER"
			props[p+"oauthbearer.sasl.jaas.config"] = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
			props[p+"oauthbearer.sasl.server.callback.handler.class"] = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
			props["sasl.oauthbearer.jwks.endpoint.url"] = s.OAuthJWKSURL
			// Kafka 4.1's default validator (ClientJwtValidator) checks a
			// token's claims but not its signature; this one verifies it
			// against the JWKS, as a deployment must.
			props["sasl.oauthbearer.jwt.validator.class"] = "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator"
		}
	}
	return nil
}

// secureFormatArgs returns the kafka-storage format arguments that create
// the SCRAM users.
func (n *Node) secureFormatArgs() []string {
	s := n.cluster.opts.Secure
	if s == nil || !s.SCRAM {
		return nil
	}
	var args []string
	for _, u := range Users {
		args = append(args, "--add-scram", fmt.Sprintf("SCRAM-SHA-512=[name=%s,password=%s]", u.Name, u.Password))
	}
	return args
}

// secureJVMOptions returns the JVM flags the secure listeners need.
func (n *Node) secureJVMOptions() []string {
	s := n.cluster.opts.Secure
	if s == nil || s.OAuthJWKSURL == "" {
		return nil
	}
	return []string{"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=" + s.OAuthJWKSURL}
}

// PKI is a certificate authority of a test, with its files in a directory:
// it signs broker and client certificates and writes them as the key and
// trust stores Kafka clients use (PEM, PKCS12 with openssl, JKS with
// keytool).
type PKI struct {
	Dir    string
	CAFile string // the CA certificate, PEM
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
}

// NewPKI creates a CA in dir.
func NewPKI(dir string) (*PKI, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sidemirror e2e CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("testbed: CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &PKI{Dir: dir, CAFile: filepath.Join(dir, "ca.pem"), cert: cert, key: key}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	return p, os.WriteFile(p.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// IssuePEM writes a PEM key store for CN=cn (an unencrypted PKCS#8 key,
// then the certificate) valid for localhost and 127.0.0.1 as server and
// client, and returns its path.
func (p *PKI) IssuePEM(cn string) (string, error) {
	return p.issuePEM(cn, cn+".pem")
}

// IssueSelfSigned writes a PEM key store like IssuePEM's, but whose
// certificate signs itself instead of being signed by p's CA (a
// stranger's), to <cn>-self-signed.pem, and returns its path.
func (p *PKI) IssueSelfSigned(cn string) (string, error) {
	return p.issue(cn, cn+"-self-signed.pem", true)
}

// TLSCertificate loads a PEM key store written by IssuePEM or
// IssueSelfSigned for a Go TLS client or server.
func TLSCertificate(pemFile string) (tls.Certificate, error) {
	return tls.LoadX509KeyPair(pemFile, pemFile)
}

// issuePEM writes the PEM key store of IssuePEM for CN=cn to the file name
// in p.Dir, so that the stores made from it keep the subject CN=cn.
func (p *PKI) issuePEM(cn, name string) (string, error) {
	return p.issue(cn, name, false)
}

// issue writes a PEM key store for CN=cn to the file name in p.Dir, its
// certificate signed by p's CA or by itself.
func (p *PKI) issue(cn, name string, selfSigned bool) (string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:   pkix.Name{CommonName: cn, Organization: []string{"sidemirror e2e"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	parent, signer := p.cert, p.key
	if selfSigned {
		parent, signer = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return "", fmt.Errorf("testbed: certificate for %s: %w", cn, err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", err
	}
	file := filepath.Join(p.Dir, name)
	data := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	return file, os.WriteFile(file, data, 0o600)
}

// brokerKeystore returns the PEM key store of the brokers, issuing it on
// first use.
func (p *PKI) brokerKeystore() (string, error) {
	file := filepath.Join(p.Dir, "broker.pem")
	if _, err := os.Stat(file); err == nil {
		return file, nil
	}
	return p.IssuePEM("broker")
}

// PeerTLS returns the configuration keys that give sidecar s mutual TLS
// with the other sidecars (peer.security.protocol=SSL, docs/security.md
// "Peer security"): a PEM key store for CN=sidecar-<broker ID>, the name
// the default peer.ssl.principal.mapping.rules tie to that broker ID,
// signed by p, and p's CA as the trust store. Give peers a PKI of their
// own: any certificate of p's CA for CN=sidecar-N is that peer.
func (p *PKI) PeerTLS(s *Sidecar) (map[string]string, error) {
	keystore, err := p.IssuePEM(fmt.Sprint("sidecar-", s.BrokerID))
	if err != nil {
		return nil, err
	}
	return map[string]string{
		"peer.security.protocol":       "SSL",
		"peer.ssl.keystore.location":   keystore,
		"peer.ssl.truststore.location": p.CAFile,
	}, nil
}

// IssueEncryptedPEM writes a PEM key store for CN=cn whose key is an
// encrypted PKCS#8 key (PBES2, AES-256-CBC, openssl pkcs8 -topk8) under
// password, and returns its path.
func (p *PKI) IssueEncryptedPEM(cn, password string) (string, error) {
	plain, err := p.issuePEM(cn, cn+"-plain.pem")
	if err != nil {
		return "", err
	}
	keyPEM, err := storeTool("openssl", "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", plain, "-passout", "pass:"+password)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(plain)
	if err != nil {
		return "", err
	}
	certPEM := data[strings.Index(string(data), "-----BEGIN CERTIFICATE-----"):]
	file := filepath.Join(p.Dir, cn+".pem")
	return file, os.WriteFile(file, append(keyPEM, certPEM...), 0o600)
}

// IssuePKCS12 writes a PKCS12 key store for CN=cn under password (openssl
// pkcs12 -export, with the CA in the chain) and returns its path.
func (p *PKI) IssuePKCS12(cn, password string) (string, error) {
	return p.issuePKCS12(cn, cn, password)
}

// issuePKCS12 writes the PKCS12 key store of IssuePKCS12 for CN=cn to
// name.p12 in p.Dir.
func (p *PKI) issuePKCS12(cn, name, password string) (string, error) {
	plain, err := p.issuePEM(cn, name+"-plain.pem")
	if err != nil {
		return "", err
	}
	file := filepath.Join(p.Dir, name+".p12")
	_, err = storeTool("openssl", "pkcs12", "-export", "-in", plain, "-certfile", p.CAFile, "-name", cn,
		"-out", file, "-passout", "pass:"+password)
	return file, err
}

// IssueJKS writes a JKS key store for CN=cn under password (a PKCS12
// store converted with keytool -importkeystore) and returns its path.
func (p *PKI) IssueJKS(cn, password string) (string, error) {
	p12, err := p.issuePKCS12(cn, cn+"-p12", password)
	if err != nil {
		return "", err
	}
	file := filepath.Join(p.Dir, cn+".jks")
	_, err = storeTool("keytool", "-importkeystore", "-noprompt",
		"-srckeystore", p12, "-srcstoretype", "PKCS12", "-srcstorepass", password,
		"-destkeystore", file, "-deststoretype", "JKS", "-deststorepass", password)
	return file, err
}

// TrustStore writes a trust store of the given type (PKCS12 or JKS,
// keytool -importcert) holding the CA under password and returns its path;
// for PEM it returns CAFile.
func (p *PKI) TrustStore(storeType, password string) (string, error) {
	if storeType == "PEM" {
		return p.CAFile, nil
	}
	file := filepath.Join(p.Dir, "truststore."+strings.ToLower(storeType))
	_ = os.Remove(file)
	_, err := storeTool("keytool", "-importcert", "-noprompt", "-trustcacerts", "-alias", "ca", "-file", p.CAFile,
		"-keystore", file, "-storetype", storeType, "-storepass", password)
	return file, err
}

// storeTool runs a store tool and returns its standard output.
func storeTool(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("testbed: %s %s: %w\n%s", name, args[0], err, stderr.String())
	}
	return out, nil
}
