package clientsec

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// env holds the clusters and sidecars of this package, pki the
// certificates, idp the OAuth identity provider.
var (
	env *testbed.Env
	pki *testbed.PKI
	idp *identityProvider
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sidemirror-clientsec-")
	if err == nil {
		pki, err = testbed.NewPKI(filepath.Join(dir, "pki"))
	}
	if err == nil {
		idp, err = startIdentityProvider()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	opts := testbed.DefaultEnvOptions()
	opts.Source.Secure = &testbed.SecureListeners{PKI: pki, SCRAM: true, MTLS: true, OAuthJWKSURL: idp.url + "/jwks"}
	// The destination's brokers get the same listeners for the sidecars
	// (destsec_test.go), which must be super users whichever way they
	// authenticate: certificates with CN=sidecar-... map to User:sidemirror
	// (ssl.principal.mapping.rules), the OAuth client's tokens carry
	// subject mirror-client.
	opts.Destination.Secure = &testbed.SecureListeners{PKI: pki, SCRAM: true, MTLS: true, OAuthJWKSURL: idp.url + "/jwks"}
	opts.Destination.BrokerConfig = map[string]string{
		"super.users":                 strings.Join(append(slices.Clone(testbed.SuperUsers), "User:"+oauthSubject), ";"),
		"ssl.principal.mapping.rules": `RULE:^CN=sidecar-[^,]*,.*$/` + testbed.Sidemirror.Name + `/,DEFAULT`,
	}
	opts.Sidecars = true
	opts.SidecarConfig = map[string]string{"readonly.allow.everyone.if.no.acl.found": "true"}
	testbed.Main(m, opts, &env)
}

// identityProvider is an OAuth 2 authorization server on 127.0.0.1: a
// client-credentials token endpoint issuing RS256 JWTs for one client, and
// the JWKS endpoint with the key that verifies them. A second client, the
// forger, gets tokens of the same key ID signed by a key the JWKS does not
// hold, which the brokers must refuse.
type identityProvider struct {
	url          string
	clientID     string
	clientSecret string
	key          *rsa.PrivateKey
	forgeKey     *rsa.PrivateKey
	issued       atomic.Int64 // tokens issued
}

// The forger's client credentials.
const forgerID, forgerSecret = "forger", "forger-secret"

// oauthSubject is the subject of every token the identity provider issues:
// the principal User:mirror-client on the brokers.
const oauthSubject = "mirror-client"

func startIdentityProvider() (*identityProvider, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	forgeKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	p := &identityProvider{url: "http://" + l.Addr().String(), clientID: "sidemirror-mirror", clientSecret: "oauth-client-secret", key: key, forgeKey: forgeKey}
	mux := http.NewServeMux()
	mux.HandleFunc("/jwks", p.serveJWKS)
	mux.HandleFunc("/token", p.serveToken)
	go func() { _ = http.Serve(l, mux) }()
	return p, nil
}

const keyID = "clientsec-1"

func (p *identityProvider) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	b64 := base64.RawURLEncoding.EncodeToString
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": keyID, "use": "sig", "alg": "RS256",
		"n": b64(p.key.N.Bytes()), "e": b64(big.NewInt(int64(p.key.E)).Bytes()),
	}}})
}

// serveToken answers a client-credentials grant of the one client with a
// JWT for subject "mirror-client", valid for an hour.
func (p *identityProvider) serveToken(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	if r.Method != http.MethodPost || r.ParseForm() != nil || r.PostForm.Get("grant_type") != "client_credentials" ||
		!ok || (id != p.clientID || secret != p.clientSecret) && (id != forgerID || secret != forgerSecret) {
		http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
		return
	}
	key := p.key
	if id == forgerID {
		key = p.forgeKey
	}
	now := time.Now().Unix()
	tok, err := p.sign(key, map[string]any{"sub": oauthSubject, "iat": now, "exp": now + 3600, "scope": "kafka"})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	p.issued.Add(1)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
}

// sign returns claims as a JWT signed with RS256 by key.
func (p *identityProvider) sign(key *rsa.PrivateKey, claims map[string]any) (string, error) {
	b64 := base64.RawURLEncoding.EncodeToString
	header, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": keyID})
	body, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signing := b64(header) + "." + b64(body)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", err
	}
	return signing + "." + b64(sig), nil
}
