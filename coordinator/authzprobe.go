package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// ProbeDialer returns the options that make a franz-go client reach the
// destination brokers as user with password over SASL mechanism
// (SCRAM-SHA-256 or SCRAM-SHA-512), with the destination's security
// protocol and TLS settings, and without seed brokers (the probe adds the
// broker it asks). It returns an error when the destination is not reached
// over SASL, so that a probe user cannot log in.
type ProbeDialer func(mechanism, user, password string) ([]kgo.Opt, error)

// Timings of the authorizer probe.
const (
	// probeLoginTimeout bounds the retries of the probe user's login: its
	// SCRAM credentials reach each broker through the metadata log, a
	// moment after AlterUserScramCredentials returns.
	probeLoginTimeout = 15 * time.Second
	// probeTimeout bounds one probe, the user's deletion aside.
	probeTimeout = 30 * time.Second
	// probeAnswerTTL is how long a broker's probed answer is used before
	// it is probed again; probeFailureTTL how long a failed probe is
	// repeated as the refusal's reason before it is tried again.
	probeAnswerTTL  = 10 * time.Minute
	probeFailureTTL = time.Minute
)

// probeUserPrefix starts the names of the probe's temporary SCRAM users and
// of the topic names it asks for.
const probeUserPrefix = "__sidemirror-probe-"

// authzProbe finds out how the destination brokers' authorizer treats a
// resource without ACLs when DescribeConfigs cannot tell (DESIGN D4): it
// creates a temporary SCRAM user, logs in as that user to each broker in
// question and asks Metadata for a topic name that no ACL matches.
// UNKNOWN_TOPIC_OR_PARTITION means the broker allows everyone on resources
// without ACLs (allow.everyone.if.no.acl.found=true), TOPIC_AUTHORIZATION_
// FAILED that it does not. The user is deleted afterwards, also on error.
// Answers are cached per broker.
type authzProbe struct {
	admin *kgo.Client // the sidecar's super-user client
	dial  ProbeDialer
	local int32 // the local broker, probed first
	log   *zap.Logger
	now   func() time.Time
	// loginTimeout is probeLoginTimeout; tests shorten it.
	loginTimeout time.Duration

	// mu serialises probes and guards cache and logged. It is a leaf lock,
	// held for one probe (bounded by probeTimeout plus the deletion).
	mu     sync.Mutex
	cache  map[int32]probeResult
	logged map[int32]string // the last outcome logged per broker
}

// probeResult is one broker's probed answer, or why the probe failed.
type probeResult struct {
	allow bool
	err   error
	at    time.Time
}

func newAuthzProbe(admin *kgo.Client, dial ProbeDialer, local int32, log *zap.Logger) *authzProbe {
	if log == nil {
		log = zap.NewNop()
	}
	return &authzProbe{admin: admin, dial: dial, local: local, log: log.Named("authz-probe"), now: time.Now,
		loginTimeout: probeLoginTimeout, cache: map[int32]probeResult{}, logged: map[int32]string{}}
}

// probeBrokers returns, for each of brokers, what its authorizer does on
// resources without ACLs, or why that could not be found out. Fresh cached
// answers are used; the others are probed with one temporary user.
func (p *authzProbe) probeBrokers(ctx context.Context, brokers []kmsg.MetadataResponseBroker) map[int32]probeResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	out := map[int32]probeResult{}
	var todo []kmsg.MetadataResponseBroker
	for _, b := range brokers {
		r, ok := p.cache[b.NodeID]
		ttl := probeAnswerTTL
		if r.err != nil {
			ttl = probeFailureTTL
		}
		if ok && now.Sub(r.at) < ttl {
			out[b.NodeID] = r
			continue
		}
		todo = append(todo, b)
	}
	if len(todo) == 0 {
		return out
	}
	// The local broker first: it is the one this sidecar is configured
	// beside, and its answer alone tells the operator most.
	for i, b := range todo {
		if b.NodeID == p.local {
			todo[0], todo[i] = todo[i], todo[0]
		}
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	results := p.run(pctx, todo)
	for _, b := range todo {
		r := results[b.NodeID]
		r.at = now
		if ctx.Err() == nil { // a caller that gave up says nothing about the broker
			p.cache[b.NodeID] = r
		}
		out[b.NodeID] = r
		p.logOutcome(b.NodeID, r)
	}
	return out
}

// logOutcome logs a broker's probed answer when it differs from the last
// one logged.
func (p *authzProbe) logOutcome(id int32, r probeResult) {
	outcome := strconv.FormatBool(r.allow)
	if r.err != nil {
		outcome = "failed: " + r.err.Error()
	}
	if p.logged[id] == outcome {
		return
	}
	p.logged[id] = outcome
	if r.err != nil {
		p.log.Warn("cannot probe how the destination broker's authorizer treats topics without ACLs",
			zap.Int32("broker", id), zap.Error(r.err))
		return
	}
	p.log.Info("probed the destination broker's authorizer: "+allowEveryoneKey+" behaves as "+outcome,
		zap.Int32("broker", id), zap.Bool("allow-everyone", r.allow))
}

// run creates the probe user, probes every broker of todo as that user and
// deletes the user. A failure before the first broker is asked fails them
// all.
func (p *authzProbe) run(ctx context.Context, todo []kmsg.MetadataResponseBroker) map[int32]probeResult {
	out := map[int32]probeResult{}
	failAll := func(err error) map[int32]probeResult {
		for _, b := range todo {
			out[b.NodeID] = probeResult{err: err}
		}
		return out
	}
	// A dialer that cannot log anyone in (no SASL to the destination)
	// fails before a user is made in vain.
	if _, err := p.dial(kadm.ScramSha512.String(), probeUserPrefix, ""); err != nil {
		return failAll(err)
	}
	topic, err := p.unmatchedTopic(ctx)
	if err != nil {
		return failAll(err)
	}
	user, password := probeUserPrefix+strconv.Itoa(int(p.local))+"-"+randomHex(6), randomHex(24)
	// Credentials for both SCRAM mechanisms, since which ones the
	// listener enables is not known; one request each, as Kafka refuses a
	// user named twice in one request.
	mechs := []kadm.ScramMechanism{kadm.ScramSha512, kadm.ScramSha256}
	adm := kadm.NewClient(p.admin)
	for _, m := range mechs {
		// Deleted on every way out, with a context of its own: a probe
		// that timed out must not leave its user behind.
		defer p.deleteUser(context.WithoutCancel(ctx), user, m)
		upsert := kadm.UpsertSCRAM{User: user, Mechanism: m, Iterations: 4096, Password: password}
		if err := alteredSCRAM(adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{upsert})); err != nil {
			if errors.Is(err, kerr.ClusterAuthorizationFailed) {
				err = fmt.Errorf("%w (creating a SCRAM user needs ALTER on the CLUSTER resource for the sidecar's principal)", err)
			}
			return failAll(fmt.Errorf("create the temporary SCRAM user %s (%s): %w", user, m, err))
		}
	}
	for _, b := range todo {
		allow, err := p.ask(ctx, b, topic, user, password, mechs)
		out[b.NodeID] = probeResult{allow: allow, err: err}
	}
	return out
}

// deleteUser removes the probe user's credentials of mechanism m (none
// there, as when their creation failed, is fine); a failure is logged
// with the name, so an operator can remove it (kafka-configs.sh
// --delete-config SCRAM-SHA-512,SCRAM-SHA-256).
func (p *authzProbe) deleteUser(ctx context.Context, user string, m kadm.ScramMechanism) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := alteredSCRAM(kadm.NewClient(p.admin).AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: user, Mechanism: m}}, nil))
	if err != nil && !errors.Is(err, kerr.ResourceNotFound) {
		p.log.Warn("cannot delete the authorizer probe's temporary SCRAM user; delete it with kafka-configs.sh",
			zap.String("user", user), zap.String("mechanism", m.String()), zap.Error(err))
	}
}

// alteredSCRAM returns the first error of an AlterUserSCRAMs call.
func alteredSCRAM(res kadm.AlteredUserSCRAMs, err error) error {
	if err != nil {
		return err
	}
	for _, r := range res.Sorted() {
		if r.Err != nil {
			if r.ErrMessage != "" {
				return fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
			}
			return r.Err
		}
	}
	return nil
}

// unmatchedTopic returns a topic name that no ACL matches (literal,
// prefixed or wildcard): only on such a name does the authorizer apply
// allow.everyone.if.no.acl.found.
func (p *authzProbe) unmatchedTopic(ctx context.Context) (string, error) {
	var name string
	for range 3 {
		name = probeUserPrefix + randomHex(8)
		acls, err := describeACLs(ctx, p.admin, aclResourceTopic, &name, aclPatternMatch)
		if err != nil {
			return "", fmt.Errorf("describe the ACLs that match %s: %w", name, err)
		}
		if len(acls) == 0 {
			return name, nil
		}
	}
	return "", fmt.Errorf("ACLs (prefixed or wildcard) match every topic name the probe tried, such as %s", name)
}

// ask logs in to broker b as user and asks Metadata for topic. A login
// that fails is retried until loginTimeout (the credentials may not have
// reached the broker yet); a mechanism the listener does not enable is
// skipped.
func (p *authzProbe) ask(ctx context.Context, b kmsg.MetadataResponseBroker, topic, user, password string, mechs []kadm.ScramMechanism) (bool, error) {
	addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	deadline := time.Now().Add(p.loginTimeout)
	unsupported := map[kadm.ScramMechanism]bool{}
	var last error
	for {
		for _, m := range mechs {
			if unsupported[m] {
				continue
			}
			allow, err := p.askOnce(ctx, addr, m, topic, user, password)
			if err == nil {
				return allow, nil
			}
			var stop *probeStop
			switch {
			case errors.Is(err, kerr.UnsupportedSaslMechanism):
				unsupported[m] = true
			case errors.As(err, &stop):
				return false, stop.err
			}
			last = err
		}
		if len(unsupported) == len(mechs) {
			return false, fmt.Errorf("broker %d's listener at %s enables neither SCRAM-SHA-512 nor SCRAM-SHA-256: %w", b.NodeID, addr, last)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false, fmt.Errorf("log in to broker %d at %s as the temporary SCRAM user %s for %s: %w", b.NodeID, addr, user, p.loginTimeout, last)
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// probeStop is an answer of the broker that a retry does not change.
type probeStop struct{ err error }

func (s *probeStop) Error() string { return s.err.Error() }

// askOnce connects to addr as user with mechanism m and sends the Metadata
// request for topic.
func (p *authzProbe) askOnce(ctx context.Context, addr string, m kadm.ScramMechanism, topic, user, password string) (bool, error) {
	opts, err := p.dial(m.String(), user, password)
	if err != nil {
		return false, &probeStop{err}
	}
	opts = append(opts, kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTimeout(5*time.Second),
		kgo.ClientID("sidemirror-authz-probe"))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return false, &probeStop{err}
	}
	defer cl.Close()
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return false, &probeStop{fmt.Errorf("no seed broker for %s", addr)}
	}
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, seeds[0])
	if err != nil {
		return false, err
	}
	return readProbeAnswer(topic, resp)
}

// readProbeAnswer reads the probe's Metadata answer: the topic unknown (or,
// were it to exist, described) means the principal without ACLs may
// describe it, so the authorizer allows everyone on resources without
// ACLs; TOPIC_AUTHORIZATION_FAILED means it does not.
func readProbeAnswer(topic string, resp *kmsg.MetadataResponse) (bool, error) {
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		err := kerr.ErrorForCode(t.ErrorCode)
		switch {
		case err == nil, errors.Is(err, kerr.UnknownTopicOrPartition):
			return true, nil
		case errors.Is(err, kerr.TopicAuthorizationFailed):
			return false, nil
		default:
			return false, &probeStop{fmt.Errorf("metadata of %s: %w", topic, err)}
		}
	}
	return false, &probeStop{fmt.Errorf("the metadata answer does not list %s", topic)}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// probeFailures formats the probe failures of the brokers in ids.
func probeFailures(ids []int32, results map[int32]probeResult) string {
	var parts []string
	for _, id := range ids {
		if r, ok := results[id]; ok && r.err != nil {
			parts = append(parts, fmt.Sprintf("broker %d: %v", id, r.err))
		}
	}
	return strings.Join(parts, "; ")
}
