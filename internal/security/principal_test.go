package security

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestDistinguishedName(t *testing.T) {
	ca := newTestCA(t)
	cases := []struct {
		subject pkix.Name
		want    string
	}{
		{pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"Eng"}, Organization: []string{"Example"}, Country: []string{"US"}},
			"CN=alice,OU=Eng,O=Example,C=US"},
		{pkix.Name{CommonName: "a, b+c", Locality: []string{" Town "}, Province: []string{"ST"}},
			`CN=a\, b\+c,L=\ Town\ ,ST=ST`},
		{pkix.Name{CommonName: "svc", ExtraNames: []pkix.AttributeTypeAndValue{
			{Type: asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}, Value: "example"},
			{Type: asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}, Value: "svc@example.com"},
		}}, "1.2.840.113549.1.9.1=#0c0f737663406578616d706c652e636f6d,DC=example,CN=svc"},
	}
	for _, tc := range cases {
		cert, _ := ca.issue(t, tc.subject)
		if got := DistinguishedName(cert); got != tc.want {
			t.Errorf("DistinguishedName(%v) = %q, want %q", tc.subject, got, tc.want)
		}
	}
}

func TestPrincipalMappingRules(t *testing.T) {
	// The example of Kafka's documentation of ssl.principal.mapping.rules.
	rules := `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,
		RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,
		RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,
		DEFAULT`
	m, err := ParsePrincipalMappingRules("admin.ssl.principal.mapping.rules", rules)
	if err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]string{
		"CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown": "serviceuser",
		"CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown":          "adminuser@admin",
		"OU=x,cn=Bob.Smith,O=y":          "bob.smith",
		"O=no-common-name":               "O=no-common-name",
		`CN=a\,b,OU=ServiceUsers,O=Corp`: `a\,b`,
	} {
		if got, err := m.Map(dn); err != nil || got != want {
			t.Errorf("Map(%q) = %q, %v; want %q", dn, got, err, want)
		}
	}

	strict, err := ParsePrincipalMappingRules("k", `RULE:^CN=([^,]+),O=Corp$/$1/U`)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := strict.Map("CN=alice,O=Corp"); got != "ALICE" {
		t.Errorf("Map with U = %q, want ALICE", got)
	}
	if _, err := strict.Map("CN=mallory,O=Evil"); !errors.Is(err, ErrAuthentication) {
		t.Errorf("Map of a DN no rule applies to: %v, want ErrAuthentication", err)
	}
	if m, _ := ParsePrincipalMappingRules("k", ""); m == nil {
		t.Error("empty rules do not parse")
	} else if got, _ := m.Map("CN=x"); got != "CN=x" {
		t.Errorf("default rules map CN=x to %q", got)
	}
	for _, bad := range []string{"RULE:^CN=(.*$/$1/", "RULE:abc", "RULE:a/b", "DEFAULT,", "NOPE", "DEFAULT x"} {
		if _, err := ParsePrincipalMappingRules("admin.ssl.principal.mapping.rules", bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("ParsePrincipalMappingRules(%q) = %v, want a config error", bad, err)
		}
	}
}

func TestServerTLS(t *testing.T) {
	ca := newTestCA(t)
	srvCert, srvKey := ca.issue(t, pkix.Name{CommonName: "sidecar-1"})
	cliCert, cliKey := ca.issue(t, pkix.Name{CommonName: "operator", Organization: []string{"Corp"}})
	other := newTestCA(t)
	strangerCert, strangerKey := other.issue(t, pkix.Name{CommonName: "stranger"})

	keystore := ca.pkcs12Keystore(t, "admin.p12", srvCert, srvKey, "pw")
	l := DefaultListenerTLS("admin.")
	l.Stores = SSLStores{KeystoreLocation: keystore, KeystorePassword: "pw", TruststoreLocation: ca.pemTruststore(t)}
	l.ClientAuth = "required"
	l.PrincipalMappingRules = `RULE:^CN=([^,]+),O=Corp$/$1/`
	s, err := l.NewServerTLS()
	if err != nil {
		t.Fatal(err)
	}

	ln, err := tls.Listen("tcp", "127.0.0.1:0", s.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	handshake := func(cert *x509.Certificate, key any) (string, error) {
		t.Helper()
		res := make(chan struct {
			p   string
			err error
		}, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				res <- struct {
					p   string
					err error
				}{"", err}
				return
			}
			defer c.Close()
			tc := c.(*tls.Conn)
			err = tc.Handshake()
			p := ""
			if err == nil {
				p, err = s.Principal(tc.ConnectionState())
			}
			res <- struct {
				p   string
				err error
			}{p, err}
		}()
		cfg := &tls.Config{RootCAs: mustPool(t, ca), ServerName: "localhost"}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{{Certificate: [][]byte{cert.Raw}, PrivateKey: key}}
		}
		if c, err := tls.Dial("tcp", ln.Addr().String(), cfg); err == nil {
			_, _ = c.Read(make([]byte, 1)) // TLS 1.3 reports a refused certificate on the first read
			c.Close()
		}
		r := <-res
		return r.p, r.err
	}
	if p, err := handshake(cliCert, cliKey); err != nil || p != "User:operator" {
		t.Errorf("client with a certificate of the CA: principal %q, %v; want User:operator", p, err)
	}
	if _, err := handshake(strangerCert, strangerKey); err == nil {
		t.Error("a certificate of another CA was accepted")
	}
	if _, err := handshake(nil, nil); err == nil {
		t.Error("a client without a certificate was accepted with ssl.client.auth=required")
	}

	// Rotation: a new key store file is picked up by the next handshake.
	newCert, newKey := ca.issue(t, pkix.Name{CommonName: "sidecar-1-rotated"})
	time.Sleep(reloadCheckInterval) // let the check interval pass
	data, _ := os.ReadFile(ca.pkcs12Keystore(t, "rotated.p12", newCert, newKey, "pw"))
	if err := os.WriteFile(keystore, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := s.current()
	if s.Reloads() != 1 || cfg.Certificates[0].Leaf.Subject.CommonName != "sidecar-1-rotated" {
		t.Errorf("after rotating the key store: %d reloads, serving %s", s.Reloads(), cfg.Certificates[0].Leaf.Subject.CommonName)
	}
	if err := os.WriteFile(keystore, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(reloadCheckInterval)
	if cfg := s.current(); s.LastReloadError() == nil || cfg.Certificates[0].Leaf.Subject.CommonName != "sidecar-1-rotated" {
		t.Errorf("a broken key store replaced the good one (reload error %v)", s.LastReloadError())
	}

	bad := l
	bad.ClientAuth = "sometimes"
	if _, err := bad.NewServerTLS(); err == nil || !strings.Contains(err.Error(), "admin.ssl.client.auth") {
		t.Errorf("ssl.client.auth=sometimes: %v", err)
	}
	bad = l
	bad.Stores.TruststoreLocation = ""
	if _, err := bad.NewServerTLS(); err == nil || !strings.Contains(err.Error(), "admin.ssl.truststore.location") {
		t.Errorf("required client auth without a trust store: %v", err)
	}
}
