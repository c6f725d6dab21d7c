package security

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// This file is the client side of OAUTHBEARER with Kafka's client
// credentials flow (KIP-768): the client posts grant_type=client_credentials
// to sasl.oauthbearer.token.endpoint.url with its client ID and secret in a
// Basic Authorization header (each URL-encoded, as Kafka's
// HttpAccessTokenRetriever sends them), and presents the access token it
// gets to the broker. A file: URL names a file that holds the token, re-read
// for each new token. Tokens are cached and fetched again once 80% of their
// lifetime has passed (Kafka's sasl.login.refresh.window.factor).

// Bounds of one token request.
const (
	tokenRequestTimeout = 10 * time.Second
	maxTokenResponse    = 1 << 20
	refreshWindowFactor = 0.8
	defaultTokenLife    = time.Hour // when neither expires_in nor the JWT's exp says
)

// tokenSource fetches and caches access tokens.
type tokenSource struct {
	endpoint     string
	clientID     string
	clientSecret string
	scope        string
	httpClient   *http.Client
	now          func() time.Time

	mu      sync.Mutex
	token   string
	refresh time.Time // fetch again from then on
}

func newTokenSource(endpoint, clientID, clientSecret, scope string) *tokenSource {
	return &tokenSource{
		endpoint: endpoint, clientID: clientID, clientSecret: clientSecret, scope: scope,
		httpClient: &http.Client{Timeout: tokenRequestTimeout},
		now:        time.Now,
	}
}

// Token returns a valid access token, fetching one when the cached one is
// due for refresh. Errors never contain the client secret or a token.
func (t *tokenSource) Token(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if t.token != "" && now.Before(t.refresh) {
		return t.token, nil
	}
	tok, life, err := t.fetch(ctx)
	if err != nil {
		return "", err
	}
	if exp, ok := jwtExpiry(tok); ok && (life <= 0 || exp.Sub(now) < life) {
		life = exp.Sub(now)
	}
	if life <= 0 {
		life = defaultTokenLife
	}
	t.token = tok
	t.refresh = now.Add(time.Duration(float64(life) * refreshWindowFactor))
	return tok, nil
}

func (t *tokenSource) fetch(ctx context.Context) (string, time.Duration, error) {
	if path, ok := strings.CutPrefix(t.endpoint, "file:"); ok {
		path = strings.TrimPrefix(path, "//")
		b, err := os.ReadFile(path)
		if err != nil {
			return "", 0, fmt.Errorf("%w: reading the token file %s: %v", ErrAuthentication, path, unwrapPathError(err))
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", 0, fmt.Errorf("%w: the token file %s is empty", ErrAuthentication, path)
		}
		return tok, 0, nil
	}
	form := url.Values{"grant_type": {"client_credentials"}}
	if t.scope != "" {
		form.Set("scope", t.scope)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, fmt.Errorf("%w: token endpoint %s: %v", ErrAuthentication, t.endpoint, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString(
		[]byte(url.QueryEscape(t.clientID)+":"+url.QueryEscape(t.clientSecret))))
	resp, err := t.httpClient.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("%w: token endpoint %s: %v", ErrAuthentication, t.endpoint, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse))
	if err != nil {
		return "", 0, fmt.Errorf("%w: token endpoint %s: reading the response: %v", ErrAuthentication, t.endpoint, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", 0, fmt.Errorf("%w: token endpoint %s answered %s for client ID %q (check the client ID, secret and scope)",
			ErrAuthentication, t.endpoint, resp.Status, t.clientID)
	}
	var r struct {
		AccessToken string          `json:"access_token"`
		ExpiresIn   json.RawMessage `json:"expires_in"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.AccessToken == "" {
		return "", 0, fmt.Errorf("%w: token endpoint %s: the response has no access_token", ErrAuthentication, t.endpoint)
	}
	var secs float64
	if len(r.ExpiresIn) > 0 {
		s := strings.Trim(string(r.ExpiresIn), `"`)
		_, _ = fmt.Sscan(s, &secs)
	}
	return r.AccessToken, time.Duration(secs * float64(time.Second)), nil
}

// jwtExpiry returns the exp claim of a JWT, unverified: the broker
// verifies the token; the client only schedules its refresh.
func jwtExpiry(token string) (time.Time, bool) {
	claims, ok := JWTClaims(token)
	if !ok {
		return time.Time{}, false
	}
	exp, ok := claims["exp"].(float64)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(int64(exp), 0), true
}

// JWTClaims decodes the claims of a JWT without verifying its signature.
// Callers must have had the token verified by someone they trust (the
// broker, for the admin endpoint's relayed authentication).
func JWTClaims(token string) (map[string]any, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || len(parts[1]) > 64<<10 {
		return nil, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return nil, false
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return nil, false
	}
	return claims, true
}
