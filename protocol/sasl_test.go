package protocol

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"go.uber.org/zap"
)

// passwordAuth accepts PLAIN with one password per user.
type passwordAuth struct{ users map[string]string }

func (a passwordAuth) Mechanisms() []string { return []string{"PLAIN"} }

func (a passwordAuth) Begin(context.Context, string) (SASLExchange, error) {
	return &passwordExchange{a}, nil
}

type passwordExchange struct{ a passwordAuth }

func (e *passwordExchange) Step(_ context.Context, token []byte) ([]byte, string, bool, error) {
	user, err := userOf("PLAIN", token)
	if err != nil {
		return nil, "", false, err
	}
	parts := strings.Split(string(token), "\x00")
	if e.a.users[user] == "" || e.a.users[user] != parts[2] {
		return nil, "", false, errors.New("bad password")
	}
	return nil, "User:" + user, true, nil
}

func (e *passwordExchange) Close() {}

type principalRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (r *principalRecorder) Handle(_ context.Context, c *ConnInfo, req Request) Response {
	r.mu.Lock()
	r.seen = append(r.seen, KeyName(req.Key())+" "+c.Principal)
	r.mu.Unlock()
	return req.ResponseKind()
}

func TestServerSASL(t *testing.T) {
	h := &principalRecorder{}
	ts := startServer(t, h, SASL(passwordAuth{users: map[string]string{"alice": "pw"}}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// Authenticated: the handler sees the principal.
	c := dial(t, ts.addr, SASLMechanism(plain.Auth{User: "alice", Pass: "pw"}.AsMechanism()))
	do(t, c, &ListClusterMirrorsRequest{})

	// A wrong password fails the dial.
	if _, err := Dial(ctx, ts.addr, SASLMechanism(plain.Auth{User: "alice", Pass: "no"}.AsMechanism())); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v", err)
	}

	// Unauthenticated: ApiVersions and internal APIs are answered, a
	// mirror API closes the connection.
	u := dial(t, ts.addr)
	do(t, u, &ApiVersionsRequest{})
	do(t, u, &DescribeLocalPartitionsRequest{})
	if _, err := u.Do(ctx, &ListClusterMirrorsRequest{}); err == nil {
		t.Fatal("an unauthenticated ListClusterMirrors was answered")
	}

	// SaslAuthenticate before SaslHandshake: ILLEGAL_SASL_STATE, closed.
	v := dial(t, ts.addr)
	auth := &SaslAuthenticateRequest{}
	auth.SetVersion(1)
	auth.SASLAuthBytes = []byte("\x00alice\x00pw")
	if r := do(t, v, auth).(*SaslAuthenticateResponse); r.ErrorCode != codeIllegalSASLState {
		t.Fatalf("SaslAuthenticate first: error %d", r.ErrorCode)
	}
	if _, err := v.Do(ctx, &ApiVersionsRequest{}); err == nil {
		t.Fatal("the connection stayed open after ILLEGAL_SASL_STATE")
	}
	// An unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the list.
	w := dial(t, ts.addr)
	hs := &SaslHandshakeRequest{}
	hs.SetVersion(1)
	hs.Mechanism = "GSSAPI"
	if r := do(t, w, hs).(*SaslHandshakeResponse); r.ErrorCode != codeUnsupportedSASLMechanism || strings.Join(r.SupportedMechanisms, ",") != "PLAIN" {
		t.Fatalf("GSSAPI handshake: %+v", r)
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	if got := strings.Join(h.seen, "; "); got != "ListClusterMirrors User:alice; DescribeLocalPartitions User:ANONYMOUS" {
		t.Fatalf("handler saw %q", got)
	}
}

func TestSASLUserOf(t *testing.T) {
	for _, tc := range []struct {
		mech, token, user string
	}{
		{"PLAIN", "\x00alice\x00pw", "alice"},
		{"PLAIN", "alice\x00alice\x00pw", "alice"},
		{"PLAIN", "bob\x00alice\x00pw", ""},
		{"PLAIN", "alice", ""},
		{"SCRAM-SHA-512", "n,,n=mirror-admin,r=abc", "mirror-admin"},
		{"SCRAM-SHA-256", "n,,n=a=2Cb=3Dc,r=abc", "a,b=c"},
		{"SCRAM-SHA-256", "n,a=alice,n=alice,r=abc", "alice"},
		{"SCRAM-SHA-256", "n,a=root,n=alice,r=abc", ""},
		{"SCRAM-SHA-256", "n,,n=alice,r=abc,tokenauth=true", ""},
		{"SCRAM-SHA-256", "p=tls-unique,,n=alice,r=abc", ""},
	} {
		got, err := userOf(tc.mech, []byte(tc.token))
		if got != tc.user || (tc.user == "") != (err != nil) {
			t.Errorf("userOf(%s, %q) = %q, %v; want %q", tc.mech, tc.token, got, err, tc.user)
		}
	}
}

// TestServerSASLFranzGo logs in with franz-go's own client, which speaks
// SaslAuthenticate v2 (flexible) after ApiVersions, as Kafka clients do.
func TestServerSASLFranzGo(t *testing.T) {
	ts := startServer(t, &principalRecorder{}, SASL(passwordAuth{users: map[string]string{"alice": "pw"}}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		pass string
		ok   bool
	}{{"pw", true}, {"nope", false}} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr), kgo.SASL(plain.Auth{User: "alice", Pass: tc.pass}.AsMechanism()),
			kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		_, err = cl.Request(ctx, kmsg.NewPtrApiVersionsRequest())
		cl.Close()
		if (err == nil) != tc.ok {
			t.Fatalf("password %q: %v", tc.pass, err)
		}
	}
	if ts.logs.FilterMessage("admin connection authenticated").Len() != 1 {
		t.Fatalf("logins logged: %d, want 1", ts.logs.FilterMessage("admin connection authenticated").Len())
	}
	if n := ts.logs.FilterMessage("closing admin connection: SASL authentication failed").FilterField(zap.Int16("api-version", 2)).Len(); n == 0 {
		t.Fatal("the failed login did not use SaslAuthenticate v2")
	}
}
