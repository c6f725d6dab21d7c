package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/sasl"
)

// SASLMechanism makes the client authenticate right after connecting
// (SASL_PLAINTEXT, or SASL_SSL with DialTLSConfig) with SaslHandshake v1
// and SaslAuthenticate, as Kafka clients do; m is one of franz-go's
// mechanisms (security.ClientConfig.Mechanism builds it from Kafka's
// client properties).
func SASLMechanism(m sasl.Mechanism) ClientOpt {
	return func(c *clientConfig) { c.sasl = m }
}

// authenticate runs the SASL exchange of a new connection.
func (c *Client) authenticate(ctx context.Context, m sasl.Mechanism) error {
	hs := &SaslHandshakeRequest{}
	hs.SetVersion(1)
	hs.Mechanism = m.Name()
	resp, err := c.Do(ctx, hs)
	if err != nil {
		return err
	}
	if hr := resp.(*SaslHandshakeResponse); hr.ErrorCode != 0 {
		return fmt.Errorf("SASL mechanism %s: %w (the endpoint enables %v)", m.Name(), ErrorFor(hr.ErrorCode, nil), hr.SupportedMechanisms)
	}
	session, token, err := m.Authenticate(ctx, c.addr)
	if err != nil {
		return fmt.Errorf("SASL %s: %w", m.Name(), err)
	}
	for done := false; !done; {
		req := &SaslAuthenticateRequest{}
		req.SetVersion(1)
		req.SASLAuthBytes = token
		resp, err := c.Do(ctx, req)
		if err != nil {
			return err
		}
		ar := resp.(*SaslAuthenticateResponse)
		if err := ErrorFor(ar.ErrorCode, ar.ErrorMessage); err != nil {
			return fmt.Errorf("SASL %s authentication: %w", m.Name(), err)
		}
		if done, token, err = session.Challenge(ar.SASLAuthBytes); err != nil {
			return fmt.Errorf("SASL %s: %w", m.Name(), err)
		}
	}
	return nil
}
