package fetcher

import (
	"context"
	"encoding/base64"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// metadataMinAge is how old cached leaders must be before a refresh that a
// fetch error asked for really goes to the source: many partitions of one
// broker fail together and need one Metadata request, not one each.
const metadataMinAge = 250 * time.Millisecond

// FetcherClientID is the source client ID of a mirror's fetcher in the form
// KIP-1279 gives, broker-<broker ID>-fetcher-<n>-mirror-<mirror>, so that a
// source consumer_byte_rate quota for that client ID throttles it. The
// Manager has one fetcher (one source client) per mirror: n is 0.
func FetcherClientID(brokerID int32, mirror string) string {
	return fmt.Sprintf("broker-%d-fetcher-0-mirror-%s", brokerID, mirror)
}

// mirror is one source cluster: its client, the leaders of its partitions
// and one fetch session per source broker. SetMirror replaces a mirror
// whole; the old one is closed.
type mirror struct {
	m        *Manager
	name     string
	cl       *kgo.Client
	log      *zap.Logger
	settings atomic.Pointer[MirrorSettings]
	offsets  *offsetBatcher // source ListOffsets look-ups (offsets.go)

	ctx    context.Context // ends when the mirror closes: sessions stop
	cancel context.CancelFunc
	wg     sync.WaitGroup // sessions

	mu       sync.Mutex // guards the fields below; taken after Manager.mu, before partition.mu
	closed   bool
	sessions map[int32]*session

	metaMu     sync.Mutex // leaf lock
	leaders    map[string]*topicLeaders
	refreshing map[string]chan struct{} // topic -> closed when the refresh in flight ends
}

// topicLeaders are the source leaders of one topic's partitions.
type topicLeaders struct {
	at      time.Time
	err     error           // topic-level error, if any
	leaders map[int32]int32 // partition -> leader node, -1 if none
	errs    map[int32]error // partition-level errors
}

func newMirror(m *Manager, name string, cl *kgo.Client) *mirror {
	mir := &mirror{
		m:          m,
		name:       name,
		cl:         cl,
		log:        m.log.With(zap.String("mirror", name)),
		sessions:   make(map[int32]*session),
		leaders:    make(map[string]*topicLeaders),
		refreshing: make(map[string]chan struct{}),
	}
	mir.ctx, mir.cancel = context.WithCancel(m.ctx)
	mir.offsets = newOffsetBatcher(m, mir.ctx, mir.sendSourceOffsets)
	return mir
}

// close ends the sessions (their partitions are told to look for a leader
// again, which finds the mirror's replacement if any), waits for them and
// closes the client.
func (mir *mirror) close() {
	mir.mu.Lock()
	mir.closed = true
	for _, s := range mir.sessions {
		s.wakeup()
	}
	mir.mu.Unlock()
	mir.cancel()
	mir.wg.Wait()
	mir.cl.Close()
}

// leader returns the source leader of p. With refresh, leaders older than
// metadataMinAge are loaded again. A failed look-up is cached for the
// callers that waited for it and for metadataMinAge, never longer, and so
// is a partition without a leader: the next caller after that asks the
// source again, refresh or not (a driver that started while the source was
// cut off would otherwise be handed the first error for as long as no
// other caller refreshed the topic).
func (mir *mirror) leader(ctx context.Context, p Partition, refresh bool) (int32, error) {
	for {
		mir.metaMu.Lock()
		if tl := mir.leaders[p.Topic]; tl != nil {
			l, err := tl.leader(p)
			if (err == nil && !refresh) || time.Since(tl.at) < metadataMinAge {
				mir.metaMu.Unlock()
				return l, err
			}
		}
		if wait, ok := mir.refreshing[p.Topic]; ok {
			mir.metaMu.Unlock()
			select {
			case <-wait:
				// Use what that refresh loaded, even a failure: it is
				// younger than metadataMinAge.
				refresh = false
				continue
			case <-ctx.Done():
				return -1, ctx.Err()
			}
		}
		done := make(chan struct{})
		mir.refreshing[p.Topic] = done
		mir.metaMu.Unlock()

		tl := mir.loadLeaders(ctx, p.Topic)

		mir.metaMu.Lock()
		delete(mir.refreshing, p.Topic)
		close(done)
		if tl.err == nil || mir.leaders[p.Topic] == nil {
			mir.leaders[p.Topic] = tl
		}
		mir.metaMu.Unlock()
		if tl.err != nil {
			return -1, tl.err
		}
		return tl.leader(p)
	}
}

func (tl *topicLeaders) leader(p Partition) (int32, error) {
	if tl.err != nil {
		return -1, tl.err
	}
	if err := tl.errs[p.Partition]; err != nil {
		return -1, fmt.Errorf("source metadata for %s: %w", p, err)
	}
	l, ok := tl.leaders[p.Partition]
	if !ok {
		return -1, fmt.Errorf("source metadata for %s: %w: the topic has %d partitions", p, kerr.UnknownTopicOrPartition, len(tl.leaders))
	}
	if l < 0 {
		return -1, fmt.Errorf("source metadata for %s: %w", p, errNoLeader)
	}
	return l, nil
}

// loadLeaders sends a Metadata request for topic.
func (mir *mirror) loadLeaders(ctx context.Context, topic string) *topicLeaders {
	tl := &topicLeaders{at: time.Now(), leaders: make(map[int32]int32), errs: make(map[int32]error)}
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false // never create topics on the source
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, mir.cl)
	if err != nil {
		tl.err = fmt.Errorf("source metadata for topic %s of mirror %s: %w", topic, mir.name, err)
		return tl
	}
	settings := mir.settings.Load()
	if want := settings.SourceClusterID; want != "" && resp.ClusterID != nil && *resp.ClusterID != want {
		tl.err = fmt.Errorf("%w: mirror %s was created for source cluster %s, but %s answers as cluster %s",
			ErrSourceClusterChanged, mir.name, want, mir.cl.OptValue(kgo.SeedBrokers), *resp.ClusterID)
		return tl
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			if err == kerr.TopicAuthorizationFailed {
				err = fmt.Errorf("%w: the mirror's source principal may not describe topic %s: %w", ErrSourceRejected, topic, err)
			}
			tl.err = fmt.Errorf("source metadata for topic %s of mirror %s: %w", topic, mir.name, err)
			return tl
		}
		if want, ok := settings.TopicIDs[topic]; ok && want != ([16]byte{}) && t.TopicID != ([16]byte{}) && t.TopicID != want {
			tl.err = fmt.Errorf("%w: source topic %s of mirror %s has topic ID %s, not %s: it was deleted and created again",
				ErrSourceTopicRecreated, topic, mir.name, base64.RawURLEncoding.EncodeToString(t.TopicID[:]), base64.RawURLEncoding.EncodeToString(want[:]))
			return tl
		}
		for _, part := range t.Partitions {
			tl.leaders[part.Partition] = part.Leader
			if err := kerr.ErrorForCode(part.ErrorCode); err != nil && err != kerr.ReplicaNotAvailable {
				tl.errs[part.Partition] = err
			}
		}
		return tl
	}
	tl.err = fmt.Errorf("source metadata for topic %s of mirror %s: %w", topic, mir.name, kerr.UnknownTopicOrPartition)
	return tl
}

// listOffset returns the source offset for timestamp ts (-2: log start, -1:
// high watermark) of p; kgo sends it to the partition's leader, batched
// with the look-ups of other partitions (offsets.go).
func (mir *mirror) listOffset(ctx context.Context, p Partition, ts int64) (int64, error) {
	a := mir.offsets.list(ctx, offsetQuery{p.Topic, p.Partition, ts})
	if a.err == nil {
		return a.offset, nil
	}
	if ctx.Err() != nil {
		return 0, fmt.Errorf("source ListOffsets(%d) for %s: %w", ts, p, ctx.Err())
	}
	mir.m.met.countError(opListOffsets, a.err)
	if a.err == kerr.TopicAuthorizationFailed {
		return 0, fmt.Errorf("%w: source ListOffsets for %s: %w", ErrSourceRejected, p, a.err)
	}
	return 0, fmt.Errorf("source ListOffsets(%d) for %s: %w", ts, p, a.err)
}

// fetchOnce fetches p from offset directly from broker leader, outside the
// sessions (used once per leading gap).
func (mir *mirror) fetchOnce(ctx context.Context, leader int32, p Partition, offset int64, maxBytes int32) (records []byte, hw, lso int64, err error) {
	req := mir.m.newFetchRequest()
	mir.settings.Load().applyTo(req)
	t := kmsg.NewFetchRequestTopic()
	t.Topic = p.Topic
	t.Partitions = append(t.Partitions, newFetchPartition(p.Partition, offset, maxBytes))
	req.Topics = append(req.Topics, t)
	resp, err := mir.cl.Broker(int(leader)).Request(ctx, &fetchRequest{req})
	if err != nil {
		mir.m.met.countError(opFetch, err)
		return nil, -1, -1, fmt.Errorf("source fetch of %s at offset %d: %w", p, offset, err)
	}
	fr := resp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(fr.ErrorCode); err != nil {
		mir.m.met.countError(opFetch, err)
		return nil, -1, -1, fmt.Errorf("source fetch of %s at offset %d: %w", p, offset, err)
	}
	for _, rt := range fr.Topics {
		for _, rp := range rt.Partitions {
			if rt.Topic != p.Topic || rp.Partition != p.Partition {
				continue
			}
			if err := fetchError(p, offset, rp.ErrorCode); err != nil {
				mir.m.met.countError(opFetch, err)
				return nil, -1, -1, err
			}
			return rp.RecordBatches, rp.HighWatermark, rp.LogStartOffset, nil
		}
	}
	return nil, -1, -1, fmt.Errorf("source fetch of %s at offset %d: %w", p, offset, errMissingAnswer)
}

// fetchError classifies a partition error code of a fetch response.
func fetchError(p Partition, offset int64, code int16) error {
	err := kerr.ErrorForCode(code)
	if err == nil {
		return nil
	}
	ke, _ := err.(*kerr.Error)
	switch {
	case ke == kerr.OffsetOutOfRange, ke != nil && ke.Retriable:
	case ke == kerr.TopicAuthorizationFailed:
		return fmt.Errorf("%w: the mirror's source principal may not read %s: %w", ErrSourceRejected, p, err)
	case ke == kerr.UnknownTopicID, ke == kerr.FencedLeaderEpoch, ke == kerr.UnknownLeaderEpoch:
	default:
		return fmt.Errorf("%w: fetch of %s at offset %d: %w", ErrSourceRejected, p, offset, err)
	}
	return fmt.Errorf("source fetch of %s at offset %d: %w", p, offset, err)
}

// attach makes the session of broker leader fetch p, starting the session if
// needed. The partition must not be attached elsewhere.
func (mir *mirror) attach(p *partition, leader int32) error {
	mir.mu.Lock()
	defer mir.mu.Unlock()
	if err := mir.attachLocked(p, leader); err != nil {
		return err
	}
	p.mu.Lock()
	p.fetch.leader, p.fetch.replica = leader, -1
	p.mu.Unlock()
	return nil
}

// attachLocked attaches p to the session of broker, starting it if needed.
func (mir *mirror) attachLocked(p *partition, broker int32) error {
	if mir.closed {
		return errMirrorClosed
	}
	s := mir.sessions[broker]
	if s == nil {
		s = newSession(mir, broker)
		mir.wg.Add(1)
		if !mir.m.goFunc(s.run) {
			mir.wg.Done()
			return ErrClosed
		}
		mir.sessions[broker] = s
	}
	s.parts[p] = struct{}{}
	p.mu.Lock()
	p.fetch.sess = s
	p.fetch.active = true
	p.mu.Unlock()
	s.wakeup()
	return nil
}

// move makes broker's session fetch p in place of session from, if p is
// still attached to from with fetch generation gen: to the preferred read
// replica the leader named (replica >= 0, for at most the mirror's
// PreferredReplicaMaxAge), or back to the leader (replica -1). False if the
// partition has moved on.
func (mir *mirror) move(p *partition, from *session, gen uint64, replica int32) bool {
	mir.mu.Lock()
	defer mir.mu.Unlock()
	p.mu.Lock()
	current := p.fetch.sess == from && p.fetch.gen == gen
	to := p.fetch.leader
	p.mu.Unlock()
	if !current || mir.closed {
		return false
	}
	if replica >= 0 {
		to = replica
	}
	mir.detachLocked(p, from)
	if err := mir.attachLocked(p, to); err != nil {
		// Closing: the partition is attached nowhere; the driver looks
		// for its leader again.
		p.queueError(gen, fmt.Errorf("source fetch of %s: %w", p.key, err))
		return false
	}
	p.mu.Lock()
	p.fetch.replica = replica
	p.fetch.until = time.Now().Add(mir.settings.Load().replicaMaxAge())
	p.fetch.inflight = false
	p.mu.Unlock()
	return true
}

// detach removes p from session s if it is still attached there.
func (mir *mirror) detach(p *partition, s *session) {
	mir.mu.Lock()
	defer mir.mu.Unlock()
	mir.detachLocked(p, s)
}

func (mir *mirror) detachLocked(p *partition, s *session) {
	delete(s.parts, p)
	p.mu.Lock()
	if p.fetch.sess == s {
		p.fetch.sess = nil
	}
	p.mu.Unlock()
	s.wakeup()
}
