package peersec

import (
	"crypto/tls"
	"fmt"
	"os"
	"testing"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// env holds the clusters and sidecars of this package; pki the operator's
// CA of the peers and its certificates.
var (
	env *testbed.Env
	pki *testbed.PKI
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sidemirror-peersec-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	if pki, err = testbed.NewPKI(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	opts := testbed.DefaultEnvOptions()
	opts.Sidecars = true
	opts.SidecarConfig = map[string]string{"readonly.allow.everyone.if.no.acl.found": "true"}
	opts.SidecarConfigFor = func(s *testbed.Sidecar) map[string]string {
		keys, err := pki.PeerTLS(s)
		if err != nil {
			panic(err)
		}
		return keys
	}
	testbed.Main(m, opts, &env)
}

// certificate returns a TLS certificate for CN=cn, signed by the peers' CA,
// or self-signed when signed is false.
func certificate(cn string, signed bool) (tls.Certificate, error) {
	issue := pki.IssuePEM
	if !signed {
		issue = pki.IssueSelfSigned
	}
	file, err := issue(cn)
	if err != nil {
		return tls.Certificate{}, err
	}
	return testbed.TLSCertificate(file)
}
