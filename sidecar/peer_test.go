package sidecar

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/raftnode"
	"github.com/sidemirror/sidemirror/internal/peertls"
	"github.com/sidemirror/sidemirror/internal/security"
	"github.com/sidemirror/sidemirror/internal/testwait"
	"github.com/sidemirror/sidemirror/protocol"
)

// testCA issues peer certificates as an operator would.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // the CA certificate, PEM: peer.ssl.truststore.location
}

func newTestCA(t *testing.T, dir string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sidemirror peer CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{cert: cert, key: key, file: filepath.Join(dir, "ca.pem")}
	writePEM(t, ca.file, pem.Block{Type: "CERTIFICATE", Bytes: der})
	return ca
}

// issue writes a key store (PEM: key and certificate) for subject CN=cn,
// signed by the CA (or self-signed when ca is nil).
func (ca *testCA) issue(t *testing.T, dir, cn string) (file string, cert tls.Certificate) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:   pkix.Name{CommonName: cn, Organization: []string{"example"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	parent, signer := tmpl, key
	if ca != nil {
		parent, signer = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	pk, _ := x509.MarshalPKCS8PrivateKey(key)
	file = filepath.Join(dir, cn+".pem")
	writePEM(t, file, pem.Block{Type: "PRIVATE KEY", Bytes: pk}, pem.Block{Type: "CERTIFICATE", Bytes: der})
	return file, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func writePEM(t *testing.T, file string, blocks ...pem.Block) {
	t.Helper()
	var b []byte
	for _, bl := range blocks {
		b = append(b, pem.EncodeToMemory(&bl)...)
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func adminDo(t *testing.T, addr string, req protocol.Request, opts ...protocol.ClientOpt) protocol.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := protocol.Dial(ctx, addr, opts...)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	resp, err := c.Do(ctx, req)
	if err != nil {
		t.Fatalf("%s to %s: %v", protocol.KeyName(req.Key()), addr, err)
	}
	return resp
}

// TestPeerSecurity runs three sidecars with peer.security.protocol=SSL (no
// Kafka needed: the raft group and its internal APIs are what is tested).
// The group forms and every sidecar registers, followers through the
// leader's peer listener; then a stranger's attacks are refused and the
// group stays healthy: a raw ApplyCommand on the admin endpoint, raft
// connections with no certificate, a self-signed one and a CA-signed one of
// a broker outside the group, a member re-registering another member, and
// adding a sidecar where nobody answers.
func TestPeerSecurity(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	ids := []int32{1, 2, 3}
	raftAddr, adminAddr := map[int32]string{}, map[int32]string{}
	var peers []RaftPeer
	for _, id := range ids {
		raftAddr[id], adminAddr[id] = freeAddr(t), freeAddr(t)
		peers = append(peers, RaftPeer{ID: id, Address: raftAddr[id]})
	}
	for _, id := range ids {
		cfg := testConfig(t, filepath.Join(dir, fmt.Sprint("data-", id)))
		cfg.LocalBrokerID = id
		cfg.AdminListener, cfg.RaftListener, cfg.RaftPeers = adminAddr[id], raftAddr[id], peers
		cfg.Peer.Protocol = "SSL"
		cfg.Peer.TLS.Stores.KeystoreLocation, _ = ca.issue(t, dir, fmt.Sprint("sidecar-", id))
		cfg.Peer.TLS.Stores.TruststoreLocation = ca.file
		startSidecar(t, cfg).waitReady(t)
	}

	describe := func() *protocol.DescribeSidecarsResponse {
		return adminDo(t, adminAddr[1], &protocol.DescribeSidecarsRequest{}).(*protocol.DescribeSidecarsResponse)
	}
	var leader int32
	testwait.For(t, 60*time.Second, "a leader and every sidecar registered", func() bool {
		d := describe()
		registered := 0
		for _, s := range d.Sidecars {
			if s.AdminAddress != nil && *s.AdminAddress == adminAddr[s.BrokerId] {
				registered++
			}
		}
		leader = d.LeaderId
		return d.LeaderId >= 0 && registered == 3
	})
	follower := ids[0]
	if follower == leader {
		follower = ids[1]
	}

	// A raw ApplyCommand on the admin endpoint (no peer identity): refused,
	// the registration unchanged.
	evil, err := fsm.EncodeCommand(fsm.RegisterSidecar{ID: follower, RaftAddr: raftAddr[follower], AdminAddr: "127.0.0.1:6666"})
	if err != nil {
		t.Fatal(err)
	}
	r := adminDo(t, adminAddr[leader], &protocol.ApplyCommandRequest{Command: evil}).(*protocol.ApplyCommandResponse)
	if r.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("a raw ApplyCommand on the admin endpoint: error code %d", r.ErrorCode)
	}

	// Raft connections of strangers are refused.
	_, selfSigned := (*testCA)(nil).issue(t, dir, "sidecar-2-self")
	_, outsider := ca.issue(t, dir, "sidecar-666")
	for name, cert := range map[string]*tls.Certificate{"no certificate": nil, "self-signed": &selfSigned, "broker 666 of the CA": &outsider} {
		cfg := &tls.Config{InsecureSkipVerify: true}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		c, err := tls.Dial("tcp", raftAddr[leader], cfg)
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			_, _ = c.Write([]byte{peertls.StreamRaft, 0})
			_, err = c.Read(make([]byte, 1))
			c.Close()
		}
		if err == nil {
			t.Errorf("a raft connection with %s was served", name)
		}
	}

	// A member (the follower's own certificate) registering another
	// member through the peer listener: refused.
	memberCert := issueCN(t, ca, fmt.Sprint("sidecar-", follower))
	var other int32
	for _, id := range ids {
		if id != leader && id != follower {
			other = id
		}
	}
	steal, _ := fsm.EncodeCommand(fsm.RegisterSidecar{ID: other, RaftAddr: raftAddr[other], AdminAddr: "127.0.0.1:6666"})
	dialPeer := protocol.DialFunc(func(ctx context.Context, addr string) (net.Conn, error) {
		d := tls.Dialer{Config: &tls.Config{Certificates: []tls.Certificate{memberCert}, InsecureSkipVerify: true}}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		_, err = c.Write([]byte{peertls.StreamPeerAPI})
		return c, err
	})
	r = adminDo(t, raftAddr[leader], &protocol.ApplyCommandRequest{Command: steal}, dialPeer).(*protocol.ApplyCommandResponse)
	if r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || !strings.Contains(deref(r.ErrorMessage), "may register only itself") {
		t.Errorf("broker %d registering broker %d: %d %s", follower, other, r.ErrorCode, deref(r.ErrorMessage))
	}

	// Adding a sidecar where nobody answers is refused.
	add := adminDo(t, adminAddr[leader], &protocol.AddSidecarRequest{BrokerId: 99, RaftAddress: "127.0.0.1:1", AdminAddress: "127.0.0.1:2"}).(*protocol.AddSidecarResponse)
	if add.ErrorCode == 0 || !strings.Contains(deref(add.ErrorMessage), "cannot be added") {
		t.Errorf("adding broker 99 at 127.0.0.1:1: %d %s", add.ErrorCode, deref(add.ErrorMessage))
	}

	// The group is healthy and the registrations unchanged.
	d := describe()
	if d.LeaderId < 0 || len(d.Sidecars) != 3 {
		t.Fatalf("after the attacks: leader %d, %d members", d.LeaderId, len(d.Sidecars))
	}
	for _, s := range d.Sidecars {
		if s.AdminAddress == nil || *s.AdminAddress != adminAddr[s.BrokerId] {
			t.Errorf("sidecar %d is registered at %v", s.BrokerId, s.AdminAddress)
		}
	}
}

func issueCN(t *testing.T, ca *testCA, cn string) tls.Certificate {
	t.Helper()
	_, cert := ca.issue(t, t.TempDir(), cn)
	return cert
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestPeerConfig: peer.* keys parse and validate with the key named.
func TestPeerConfig(t *testing.T) {
	base := "local.broker.id=1\nlocal.bootstrap.servers=127.0.0.1:9092\ndata.dir=/var/lib/sidemirror\n"
	cfg, err := parseText(t, base)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Peer.SSL() || cfg.Limits.AdminMaxConnections != protocol.DefaultMaxConnections {
		t.Errorf("defaults: %+v %+v", cfg.Peer, cfg.Limits)
	}
	for text, want := range map[string]string{
		"peer.security.protocol=TLS\n":                                    "peer.security.protocol",
		"peer.security.protocol=SSL\n":                                    "peer.ssl.keystore.location",
		"peer.security.protocol=SSL\npeer.ssl.keystore.location=/k.pem\n": "peer.ssl.truststore.location",
		"peer.ssl.principal.mapping.rules=RULE:x\n":                       "peer.ssl.principal.mapping.rules",
		"admin.max.connections=0\n":                                       "admin.max.connections",
		"raft.max.connections=abc\n":                                      "raft.max.connections",
		"connections.max.idle.ms=5\n":                                     "connections.max.idle.ms",
		"admin.queued.max.request.bytes=1024\n":                           "admin.queued.max.request.bytes",
	} {
		_, err := parseText(t, base+text)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %s", text, err, want)
		}
	}
	cfg, err = parseText(t, base+"peer.security.protocol=SSL\npeer.ssl.keystore.location=/k.p12\npeer.ssl.keystore.password=s3cret\npeer.ssl.truststore.location=/ca.pem\nconnections.max.idle.ms=30000\n")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Peer.SSL() || cfg.Limits.IdleTimeout != 30*time.Second || strings.Contains(cfg.String(), "s3cret") || !strings.Contains(cfg.String(), "peer.ssl.keystore.password=[hidden]") {
		t.Errorf("parsed %+v; printed\n%s", cfg.Peer, cfg.String())
	}
	var ce *ConfigError
	if _, err := parseText(t, base+"peer.security.protocol=SSL\n"); !errors.As(err, &ce) && !errors.Is(err, security.ErrInvalidConfig) {
		t.Errorf("not a config error: %v", err)
	}
}

// TestPeerBrokerID: the default mapping takes N of CN=sidecar-N wherever
// the CN stands in the subject; other subjects name no broker.
func TestPeerBrokerID(t *testing.T) {
	mapper, err := security.ParsePrincipalMappingRules(keyPeerPrincipalMapping, DefaultPeerPrincipalMappingRules)
	if err != nil {
		t.Fatal(err)
	}
	ca := newTestCA(t, t.TempDir())
	for cn, want := range map[string]int32{"sidecar-7": 7, "sidecar-12": 12, "sidecar-x": -1, "kafka": -1, "sidecar-1-copy": -1} {
		cert := issueCN(t, ca, cn)
		leaf, _ := x509.ParseCertificate(cert.Certificate[0])
		got, err := peerBrokerID(mapper, tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}})
		if got != want || (want < 0) != (err != nil) {
			t.Errorf("CN=%s: %d, %v; want %d", cn, got, err, want)
		}
	}
}

// TestHTTPListenerBound: http.listener closes connections beyond its bound
// and serves again once they are gone.
func TestHTTPListenerBound(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := limitListener(inner, 2)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	testwait.For(t, 5*time.Second, "two connections counted", func() bool { return ln.(*boundedListener).open.Load() == 2 })
	extra, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_ = extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := extra.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the third connection was not closed: %v", err)
	}
	for _, c := range held {
		c.Close()
	}
	testwait.For(t, 5*time.Second, "the slots to free up", func() bool { return ln.(*boundedListener).open.Load() == 0 })
}

// TestPeerSecurityAdminSASLSSL runs three sidecars with peer TLS and a
// SASL_SSL admin endpoint (SCRAM relayed to a kfake broker, authorization
// on): the sidecars reach each other only over the peer path, never
// through the admin endpoint, whose TLS and SASL they do not speak. The
// group forms and registers (forwarded RegisterSidecar), a write sent to
// a follower is forwarded to the leader, the liveness probe (ApiVersions)
// and the describe fan-out (DescribeLocalPartitions) of each sidecar's
// peer client reach the others, a leader asked to remove itself passes the
// removal on to the new leader, and the admin endpoint still refuses the
// internal APIs to a logged-in client.
func TestPeerSecurityAdminSASLSSL(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	pki := newTestPKI(t, pkix.Name{CommonName: "laptop"})
	broker, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "ops", "ops-pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(broker.Close)
	ids := []int32{1, 2, 3}
	raftAddr, adminAddr := map[int32]string{}, map[int32]string{}
	var peers []RaftPeer
	for _, id := range ids {
		raftAddr[id], adminAddr[id] = freeAddr(t), freeAddr(t)
		peers = append(peers, RaftPeer{ID: id, Address: raftAddr[id]})
	}
	sidecars := map[int32]*running{}
	for _, id := range ids {
		cfg := testConfig(t, filepath.Join(dir, fmt.Sprint("data-", id)))
		cfg.LocalBrokerID = id
		cfg.AdminListener, cfg.RaftListener, cfg.RaftPeers = adminAddr[id], raftAddr[id], peers
		cfg.Peer.Protocol = "SSL"
		cfg.Peer.TLS.Stores.KeystoreLocation, _ = ca.issue(t, dir, fmt.Sprint("sidecar-", id))
		cfg.Peer.TLS.Stores.TruststoreLocation = ca.file
		cfg.Admin.Protocol = security.ProtocolSASLSSL
		cfg.Admin.RelayServers = broker.ListenAddrs()
		cfg.Admin.RelayProtocol = security.ProtocolSASLPlaintext
		cfg.Admin.TLS.Stores.KeystoreLocation = pki.serverFile
		cfg.Admin.SuperUsers = []string{"User:ops"}
		if w := peerSecurityWarning(cfg); w != "" {
			t.Errorf("peer and admin security on: warning %q", w)
		}
		sidecars[id] = startSidecar(t, cfg)
		sidecars[id].waitReady(t)
	}
	ops := []protocol.ClientOpt{
		protocol.DialTLSConfig(&tls.Config{RootCAs: pki.caPool}),
		protocol.SASLMechanism(scram.Auth{User: "ops", Pass: "ops-pw"}.AsSha256Mechanism()),
	}
	describe := func(id int32) *protocol.DescribeSidecarsResponse {
		return adminDo(t, adminAddr[id], &protocol.DescribeSidecarsRequest{}, ops...).(*protocol.DescribeSidecarsResponse)
	}
	var leader int32
	testwait.For(t, 60*time.Second, "a leader and every sidecar registered", func() bool {
		d := describe(1)
		registered := 0
		for _, s := range d.Sidecars {
			if s.AdminAddress != nil && *s.AdminAddress == adminAddr[s.BrokerId] {
				registered++
			}
		}
		leader = d.LeaderId
		return d.ErrorCode == 0 && d.LeaderId >= 0 && registered == 3
	})
	var followers []int32
	for _, id := range ids {
		if id != leader {
			followers = append(followers, id)
		}
	}

	// A write on a follower is forwarded to the leader (ApplyCommand on
	// the leader's peer listener) and read back from the leader.
	create := &protocol.CreateAclsRequest{}
	create.SetVersion(3)
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceType(8), "orders", kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:monitor", "*", kmsg.ACLOperationDescribe, kmsg.ACLPermissionTypeAllow
	create.Creations = append(create.Creations, c)
	cr := adminDo(t, adminAddr[followers[0]], create, ops...).(*protocol.CreateAclsResponse)
	if len(cr.Results) != 1 || cr.Results[0].ErrorCode != 0 {
		t.Fatalf("CreateAcls on follower %d: %+v", followers[0], cr.Results)
	}
	dr := adminDo(t, adminAddr[leader], describeAllACLs(), ops...).(*protocol.DescribeAclsResponse)
	if dr.ErrorCode != 0 || len(dr.Resources) != 1 || dr.Resources[0].ResourceName != "orders" {
		t.Fatalf("DescribeAcls on leader %d after the follower's write: %d %+v", leader, dr.ErrorCode, dr.Resources)
	}

	// Each sidecar's peer client (the liveness probe's ApiVersions, the
	// describe fan-out's DescribeLocalPartitions) reaches the others by
	// their registered admin address, over the peer path; a client that
	// dials the admin endpoint itself, without TLS, is not answered.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, from := range ids {
		p := sidecars[from].sc.comps.Load().peers
		for _, to := range ids {
			if to == from {
				continue
			}
			if _, err := p.Do(ctx, adminAddr[to], &protocol.ApiVersionsRequest{}); err != nil {
				t.Errorf("liveness probe of sidecar %d from %d: %v", to, from, err)
			}
			resp, err := p.Do(ctx, adminAddr[to], &protocol.DescribeLocalPartitionsRequest{})
			if err != nil {
				t.Errorf("DescribeLocalPartitions of sidecar %d from %d: %v", to, from, err)
			} else if r := resp.(*protocol.DescribeLocalPartitionsResponse); r.ErrorCode != 0 {
				t.Errorf("DescribeLocalPartitions of sidecar %d from %d: %d %s", to, from, r.ErrorCode, deref(r.ErrorMessage))
			}
		}
	}
	plain := raftnode.NewPeers(protocol.DialTimeout(2 * time.Second))
	defer plain.Close()
	if _, err := plain.Do(ctx, adminAddr[leader], &protocol.ApiVersionsRequest{}); err == nil {
		t.Error("a plaintext client was answered by the SASL_SSL admin endpoint")
	}

	// A logged-in client on the admin endpoint still cannot call the
	// internal APIs.
	evil, err := fsm.EncodeCommand(fsm.RegisterSidecar{ID: followers[0], RaftAddr: raftAddr[followers[0]], AdminAddr: "127.0.0.1:6666"})
	if err != nil {
		t.Fatal(err)
	}
	ar := adminDo(t, adminAddr[leader], &protocol.ApplyCommandRequest{Command: evil}, ops...).(*protocol.ApplyCommandResponse)
	if ar.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("a raw ApplyCommand of a logged-in client on the admin endpoint: error code %d", ar.ErrorCode)
	}

	// The leader asked to remove itself hands leadership over and passes
	// the removal on to the new leader through its peer listener.
	rr := adminDo(t, adminAddr[leader], &protocol.RemoveSidecarRequest{BrokerId: leader}, ops...).(*protocol.RemoveSidecarResponse)
	if rr.ErrorCode != 0 {
		t.Fatalf("RemoveSidecar of the leader %d: %d %s", leader, rr.ErrorCode, deref(rr.ErrorMessage))
	}
	testwait.For(t, 30*time.Second, "the old leader gone from the group", func() bool {
		d := describe(followers[0])
		if d.ErrorCode != 0 || d.LeaderId < 0 || d.LeaderId == leader || len(d.Sidecars) != 2 {
			return false
		}
		for _, s := range d.Sidecars {
			if s.BrokerId == leader {
				return false
			}
		}
		return true
	})
}

// describeAllACLs is a DescribeAcls request that matches every ACL.
func describeAllACLs() *protocol.DescribeAclsRequest {
	r := &protocol.DescribeAclsRequest{}
	r.SetVersion(3)
	r.ResourceType, r.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	r.Operation, r.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	return r
}
