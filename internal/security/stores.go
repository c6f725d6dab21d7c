package security

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/pavlo-v-chernykh/keystore-go/v4"
	"software.sslmate.com/src/go-pkcs12"
)

// Store types of ssl.keystore.type and ssl.truststore.type.
const (
	StorePEM    = "PEM"
	StorePKCS12 = "PKCS12"
	StoreJKS    = "JKS"
)

var storeTypes = []string{StorePEM, StorePKCS12, StoreJKS}

// maxStoreBytes bounds a key or trust store file.
const maxStoreBytes = 4 << 20

// SSLStores holds Kafka's ssl.keystore.* and ssl.truststore.* settings, for
// a client (ClientConfig) or a listener (ListenerTLS). Field values are the
// property values as written. An empty store type means: detected from the
// file (a PEM file starts with "-----BEGIN", a JKS file with the magic
// 0xFEEDFEED, anything else is read as PKCS12); Kafka's default is JKS.
type SSLStores struct {
	TruststoreLocation     string // ssl.truststore.location
	TruststoreType         string // ssl.truststore.type: PEM, PKCS12, JKS or empty
	TruststorePassword     string // ssl.truststore.password (secret)
	TruststoreCertificates string // ssl.truststore.certificates: inline PEM

	KeystoreLocation         string // ssl.keystore.location
	KeystoreType             string // ssl.keystore.type: PEM, PKCS12, JKS or empty
	KeystorePassword         string // ssl.keystore.password (secret)
	KeyPassword              string // ssl.key.password (secret)
	KeystoreCertificateChain string // ssl.keystore.certificate.chain: inline PEM
	KeystoreKey              string // ssl.keystore.key: inline PEM (secret)
}

// storeKeys are the property names of SSLStores, without a prefix.
var storeKeys = []string{
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
}

// field returns the field that holds the property name (a storeKeys entry).
func (s *SSLStores) field(name string) *string {
	switch name {
	case "ssl.truststore.location":
		return &s.TruststoreLocation
	case "ssl.truststore.type":
		return &s.TruststoreType
	case "ssl.truststore.password":
		return &s.TruststorePassword
	case "ssl.truststore.certificates":
		return &s.TruststoreCertificates
	case "ssl.keystore.location":
		return &s.KeystoreLocation
	case "ssl.keystore.type":
		return &s.KeystoreType
	case "ssl.keystore.password":
		return &s.KeystorePassword
	case "ssl.key.password":
		return &s.KeyPassword
	case "ssl.keystore.certificate.chain":
		return &s.KeystoreCertificateChain
	case "ssl.keystore.key":
		return &s.KeystoreKey
	}
	return nil
}

// HasKeystore reports whether a key store (file or inline) is configured.
func (s SSLStores) HasKeystore() bool { return s.KeystoreLocation != "" || s.KeystoreKey != "" }

// HasTruststore reports whether a trust store (file or inline) is
// configured.
func (s SSLStores) HasTruststore() bool {
	return s.TruststoreLocation != "" || s.TruststoreCertificates != ""
}

// validate checks the combination of settings; prefix names the keys.
// Files are not read.
func (s SSLStores) validate(prefix string) error {
	k := func(name string) string { return prefix + name }
	for _, st := range []struct{ name, typ string }{
		{"ssl.truststore.type", s.TruststoreType},
		{"ssl.keystore.type", s.KeystoreType},
	} {
		if st.typ != "" && !slices.Contains(storeTypes, strings.ToUpper(st.typ)) {
			return configErr(k(st.name), "%q is not supported (expected PEM, PKCS12 or JKS)", st.typ)
		}
	}
	trustType, keyType := strings.ToUpper(s.TruststoreType), strings.ToUpper(s.KeystoreType)
	switch {
	case s.TruststoreCertificates != "" && s.TruststoreLocation != "":
		return configErr(k("ssl.truststore.certificates"), "is set together with %s (expected only one of them)", k("ssl.truststore.location"))
	case s.TruststoreCertificates != "" && trustType != "" && trustType != StorePEM:
		return configErr(k("ssl.truststore.type"), "%q does not fit %s (expected PEM)", s.TruststoreType, k("ssl.truststore.certificates"))
	case s.TruststorePassword != "" && (trustType == StorePEM || s.TruststoreCertificates != ""):
		return configErr(k("ssl.truststore.password"), "is set, but PEM trust stores have no password (expected it empty with %s PEM)", k("ssl.truststore.type"))
	case (trustType == StorePKCS12 || trustType == StoreJKS) && s.TruststorePassword == "":
		return configErr(k("ssl.truststore.password"), "is missing, but %s is %s (expected the store's password: its integrity is checked with it)", k("ssl.truststore.type"), trustType)
	case s.KeystoreCertificateChain != "" && s.KeystoreKey == "":
		return configErr(k("ssl.keystore.key"), "is missing, but %s is set (expected both)", k("ssl.keystore.certificate.chain"))
	case s.KeystoreKey != "" && s.KeystoreCertificateChain == "":
		return configErr(k("ssl.keystore.certificate.chain"), "is missing, but %s is set (expected both)", k("ssl.keystore.key"))
	case s.KeystoreKey != "" && s.KeystoreLocation != "":
		return configErr(k("ssl.keystore.key"), "is set together with %s (expected only one of them)", k("ssl.keystore.location"))
	case s.KeystoreKey != "" && keyType != "" && keyType != StorePEM:
		return configErr(k("ssl.keystore.type"), "%q does not fit %s (expected PEM)", s.KeystoreType, k("ssl.keystore.key"))
	case s.KeystorePassword != "" && (keyType == StorePEM || s.KeystoreKey != ""):
		return configErr(k("ssl.keystore.password"), "is set, but a PEM key store takes only %s (expected it empty with %s PEM)", k("ssl.key.password"), k("ssl.keystore.type"))
	case (keyType == StorePKCS12 || keyType == StoreJKS) && s.KeystoreLocation != "" && s.KeystorePassword == "":
		return configErr(k("ssl.keystore.password"), "is missing, but %s is %s (expected the store's password)", k("ssl.keystore.type"), keyType)
	}
	return nil
}

// readStore reads a store file, bounded in size.
func readStore(key, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &ConfigError{Key: key, Msg: fmt.Sprintf("cannot read %s: %v", path, unwrapPathError(err)), Cause: err}
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > maxStoreBytes {
		return nil, configErr(key, "%s is %d bytes, larger than the limit of %d bytes for a store", path, st.Size(), maxStoreBytes)
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(f); err != nil {
		return nil, &ConfigError{Key: key, Msg: fmt.Sprintf("cannot read %s: %v", path, unwrapPathError(err)), Cause: err}
	}
	return b.Bytes(), nil
}

// detectType returns the store type written, or the one the data has.
func detectType(written string, data []byte) string {
	if written != "" {
		return strings.ToUpper(written)
	}
	switch {
	case bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("-----BEGIN")):
		return StorePEM
	case bytes.HasPrefix(data, []byte{0xfe, 0xed, 0xfe, 0xed}):
		return StoreJKS
	}
	return StorePKCS12
}

// TrustPool loads the trust store: nil when none is configured (the
// system's roots apply).
func (s SSLStores) TrustPool(prefix string) (*x509.CertPool, error) {
	key := prefix + "ssl.truststore.location"
	var data []byte
	switch {
	case s.TruststoreCertificates != "":
		key, data = prefix+"ssl.truststore.certificates", []byte(s.TruststoreCertificates)
	case s.TruststoreLocation != "":
		var err error
		if data, err = readStore(key, s.TruststoreLocation); err != nil {
			return nil, err
		}
	default:
		return nil, nil
	}
	var certs []*x509.Certificate
	switch typ := detectType(s.TruststoreType, data); typ {
	case StorePEM:
		for rest := data; ; {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			if b.Type != "CERTIFICATE" {
				continue
			}
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, configErr(key, "a PEM certificate does not parse: %v", err)
			}
			certs = append(certs, c)
		}
	case StorePKCS12:
		cs, err := pkcs12.DecodeTrustStore(data, s.TruststorePassword)
		if err != nil {
			return nil, configErr(key, "the PKCS12 trust store does not decode: %v (a wrong %s, or not a trust store made by keytool -importcert)",
				pkcs12Problem(err), prefix+"ssl.truststore.password")
		}
		certs = cs
	case StoreJKS:
		ks := keystore.New()
		if err := ks.Load(bytes.NewReader(data), []byte(s.TruststorePassword)); err != nil {
			return nil, configErr(key, "the JKS trust store does not load: %v (is %s right?)", err, prefix+"ssl.truststore.password")
		}
		for _, alias := range ks.Aliases() {
			if !ks.IsTrustedCertificateEntry(alias) {
				continue
			}
			e, err := ks.GetTrustedCertificateEntry(alias)
			if err != nil {
				return nil, configErr(key, "JKS entry %q: %v", alias, err)
			}
			c, err := x509.ParseCertificate(e.Certificate.Content)
			if err != nil {
				return nil, configErr(key, "JKS entry %q does not hold an X.509 certificate: %v", alias, err)
			}
			certs = append(certs, c)
		}
	}
	if len(certs) == 0 {
		return nil, configErr(key, "holds no trusted certificate (expected CA certificates, e.g. -----BEGIN CERTIFICATE----- blocks)")
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// Certificate loads the key store: nil when none is configured.
func (s SSLStores) Certificate(prefix string) (*tls.Certificate, error) {
	var chainPEM, keyPEM []byte
	key := prefix + "ssl.keystore.location"
	switch {
	case s.KeystoreKey != "":
		key = prefix + "ssl.keystore.key"
		chainPEM, keyPEM = []byte(s.KeystoreCertificateChain), []byte(s.KeystoreKey)
	case s.KeystoreLocation != "":
		data, err := readStore(key, s.KeystoreLocation)
		if err != nil {
			return nil, err
		}
		switch detectType(s.KeystoreType, data) {
		case StorePEM:
			chainPEM = data // a PEM key store holds the key and the chain
		case StorePKCS12:
			return s.pkcs12Certificate(prefix, key, data)
		case StoreJKS:
			return s.jksCertificate(prefix, key, data)
		}
	default:
		return nil, nil
	}
	var chain [][]byte
	var keyDER []byte
	encrypted := false
	for rest := append(chainPEM, keyPEM...); ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		switch {
		case b.Type == "CERTIFICATE":
			if !slices.ContainsFunc(chain, func(c []byte) bool { return bytes.Equal(c, b.Bytes) }) {
				chain = append(chain, b.Bytes)
			}
		case b.Type == "ENCRYPTED PRIVATE KEY":
			keyDER, encrypted = b.Bytes, true
		case strings.HasSuffix(b.Type, "PRIVATE KEY"):
			if strings.Contains(b.Headers["Proc-Type"], "ENCRYPTED") {
				return nil, configErr(key, "the key is encrypted in OpenSSL's legacy PEM format; convert it to encrypted PKCS#8 (openssl pkcs8 -topk8 -v2 aes-256-cbc -in key.pem -out key-pkcs8.pem)")
			}
			keyDER = b.Bytes
		}
	}
	if keyDER == nil {
		return nil, configErr(key, "holds no PEM private key (expected a -----BEGIN PRIVATE KEY----- or -----BEGIN ENCRYPTED PRIVATE KEY----- block)")
	}
	if len(chain) == 0 {
		return nil, configErr(key, "holds no PEM certificate for the key (expected -----BEGIN CERTIFICATE----- blocks)")
	}
	pwKey := prefix + "ssl.key.password"
	switch {
	case encrypted && s.KeyPassword == "":
		return nil, configErr(pwKey, "is missing, but the private key is encrypted (expected the key's password)")
	case !encrypted && s.KeyPassword != "":
		return nil, configErr(pwKey, "is set, but the private key is not encrypted (expected it empty, or an ENCRYPTED PRIVATE KEY)")
	case encrypted:
		plain, err := decryptPKCS8(keyDER, s.KeyPassword)
		if errors.Is(err, errWrongKeyPass) {
			// Name the key the operator must fix, with its prefix.
			return nil, configErr(pwKey, "does not decrypt the private key of %s (a wrong password, or the key is damaged)", key)
		}
		if err != nil {
			return nil, configErr(key, "%v", err)
		}
		keyDER = plain
	}
	priv, err := parsePrivateKey(keyDER)
	if err != nil {
		return nil, configErr(key, "%v", err)
	}
	return certificate(key, priv, chain)
}

func (s SSLStores) pkcs12Certificate(prefix, key string, data []byte) (*tls.Certificate, error) {
	priv, leaf, cas, err := pkcs12.DecodeChain(data, s.KeystorePassword)
	if err != nil {
		return nil, configErr(key, "the PKCS12 key store does not decode: %v (is %s right?)", pkcs12Problem(err), prefix+"ssl.keystore.password")
	}
	chain := [][]byte{leaf.Raw}
	for _, c := range cas {
		chain = append(chain, c.Raw)
	}
	return certificate(key, priv, chain)
}

func (s SSLStores) jksCertificate(prefix, key string, data []byte) (*tls.Certificate, error) {
	ks := keystore.New()
	if err := ks.Load(bytes.NewReader(data), []byte(s.KeystorePassword)); err != nil {
		return nil, configErr(key, "the JKS key store does not load: %v (is %s right?)", err, prefix+"ssl.keystore.password")
	}
	keyPass := s.KeyPassword
	if keyPass == "" {
		keyPass = s.KeystorePassword // keytool's default: the key has the store's password
	}
	for _, alias := range ks.Aliases() {
		if !ks.IsPrivateKeyEntry(alias) {
			continue
		}
		e, err := ks.GetPrivateKeyEntry(alias, []byte(keyPass))
		if err != nil {
			return nil, configErr(key, "JKS key entry %q does not open: %v (is %s right?)", alias, err, prefix+"ssl.key.password")
		}
		priv, err := parsePrivateKey(e.PrivateKey)
		if err != nil {
			return nil, configErr(key, "JKS key entry %q: %v", alias, err)
		}
		var chain [][]byte
		for _, c := range e.CertificateChain {
			chain = append(chain, c.Content)
		}
		return certificate(key, priv, chain)
	}
	return nil, configErr(key, "the JKS key store holds no private key entry (expected one made by keytool -genkeypair or -importkeystore)")
}

// certificate assembles a tls.Certificate and checks that the key fits the
// leaf.
func certificate(key string, priv crypto.PrivateKey, chain [][]byte) (*tls.Certificate, error) {
	if len(chain) == 0 {
		return nil, configErr(key, "holds no certificate for the private key")
	}
	leaf, err := x509.ParseCertificate(chain[0])
	if err != nil {
		return nil, configErr(key, "the certificate does not parse: %v", err)
	}
	pub, ok := priv.(interface{ Public() crypto.PublicKey })
	if !ok {
		return nil, configErr(key, "the private key's type %T is not supported", priv)
	}
	if eq, ok := leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !eq.Equal(pub.Public()) {
		return nil, configErr(key, "the private key does not belong to the first certificate (subject %s)", leaf.Subject)
	}
	return &tls.Certificate{Certificate: chain, PrivateKey: priv, Leaf: leaf}, nil
}

// parsePrivateKey parses PKCS#8, PKCS#1 (RSA) or SEC 1 (EC) DER.
func parsePrivateKey(der []byte) (crypto.PrivateKey, error) {
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	return nil, errors.New("the private key does not parse as PKCS#8, PKCS#1 or SEC 1")
}

// pkcs12Problem shortens go-pkcs12's errors, which are prefixed.
func pkcs12Problem(err error) string {
	if errors.Is(err, pkcs12.ErrIncorrectPassword) {
		return "wrong password"
	}
	return strings.TrimPrefix(err.Error(), "pkcs12: ")
}

// unwrapPathError drops the "open <path>: " of an *fs.PathError, whose path
// the caller names already.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
