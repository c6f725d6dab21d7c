package security

import "crypto/tls"

// DialConfig returns the tls.Config for dialing a listener that has the
// same settings, as the sidecars dial each other's peer listeners: it
// presents the listener's current certificate (rotated files included)
// and verifies the peer's chain against its trust store. Host names are
// not checked: the caller checks the identity the certificate names.
func (s *ServerTLS) DialConfig() *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // the chain is verified by VerifyConnection
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &s.current().Certificates[0], nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error { return verifyChain(cs, s.current().ClientCAs) },
	}
}
