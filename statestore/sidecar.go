package statestore

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// The sidecar registry: one TypeSidecar record per sidecar in partition
// SidecarPartition of __mirror_state, keyed by the broker ID the sidecar
// runs beside (Mirror and Topic "", Partition the broker ID) and holding
// its advertised admin address and that endpoint's security protocol. A sidecar writes its record when it starts,
// which is also when its address can change; compaction keeps the latest.
// kafka-cluster-mirrors reads the registry to find a sidecar when it is
// pointed at a broker of the destination cluster.

// TypeSidecar is the record type of the sidecar registry (see SidecarKey).
const TypeSidecar int8 = 4

// SidecarPartition is the partition of __mirror_state that holds the
// sidecar registry.
const SidecarPartition int32 = 0

// sidecarValueVersion is the version of the Sidecar value this build writes.
const sidecarValueVersion int16 = 0

// Sidecar is the registry record of one sidecar.
type Sidecar struct {
	BrokerID     int32  // the broker the sidecar runs beside
	AdminAddress string // admin.advertised.listener (or the bound admin address)
	// AdminProtocol is the admin endpoint's admin.security.protocol
	// (PLAINTEXT, SASL_PLAINTEXT, SSL or SASL_SSL); "" reads as PLAINTEXT.
	AdminProtocol string
	UpdatedMs     int64 // when the sidecar wrote the record, Unix milliseconds
}

// SidecarKey returns the registry key of the sidecar beside broker id.
func SidecarKey(id int32) Key { return Key{Type: TypeSidecar, Partition: id} }

// appendSidecarValue encodes a Sidecar value:
//
//	Version      int16          0; a later version appends fields
//	AdminAddress  compact string
//	AdminProtocol compact string
//	UpdatedMs     int64
func appendSidecarValue(dst []byte, s Sidecar) []byte {
	dst = kbin.AppendInt16(dst, sidecarValueVersion)
	dst = kbin.AppendCompactString(dst, s.AdminAddress)
	dst = kbin.AppendCompactString(dst, s.AdminProtocol)
	return kbin.AppendInt64(dst, s.UpdatedMs)
}

// readSidecarValue decodes a Sidecar value of any version (the fields after
// those of version 0 are ignored); the key gives the broker ID.
func readSidecarValue(k Key, b []byte) (Sidecar, error) {
	r := kbin.Reader{Src: b}
	v := r.Int16()
	s := Sidecar{BrokerID: k.Partition, AdminAddress: r.CompactString(), AdminProtocol: r.CompactString(), UpdatedMs: r.Int64()}
	switch {
	case !r.Ok():
		return Sidecar{}, fmt.Errorf("%w: sidecar record of %d bytes is truncated", ErrMalformed, len(b))
	case v < 0:
		return Sidecar{}, fmt.Errorf("%w: sidecar record version %d", ErrMalformed, v)
	}
	return s, nil
}

// RegisterSidecar writes the registry record of sc (UpdatedMs is set to
// now), creating __mirror_state first when it is absent.
func (s *Store) RegisterSidecar(ctx context.Context, sc Sidecar) error {
	id, adminAddr := sc.BrokerID, sc.AdminAddress
	if err := s.checkWrite(SidecarPartition); err != nil {
		return err
	}
	if id < 0 || adminAddr == "" {
		return fmt.Errorf("%w: sidecar %d with admin address %q", ErrInvalidRecord, id, adminAddr)
	}
	if err := s.EnsureTopic(ctx); err != nil {
		return err
	}
	sc.UpdatedMs = time.Now().UnixMilli()
	v := appendSidecarValue(nil, sc)
	rec := &kgo.Record{Topic: TopicName, Partition: SidecarPartition, Key: SidecarKey(id).AppendTo(nil), Value: v}
	if err := s.prod.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("statestore: writing the registry record of sidecar %d to %s-%d: %w", id, TopicName, SidecarPartition, err)
	}
	s.log.Info("registered the sidecar", zap.Int32("broker-id", id), zap.String("admin-address", adminAddr),
		zap.String("admin-security-protocol", sc.AdminProtocol))
	return nil
}

// ReadSidecars reads the sidecar registry with cl, a client of the
// destination cluster, and returns the latest record of every sidecar, by
// broker ID (tombstoned ones left out). Without __mirror_state it returns
// an error wrapping ErrTopicNotFound. Records of other types, and registry
// records that do not decode, are skipped.
func ReadSidecars(ctx context.Context, cl *kgo.Client) (map[int32]Sidecar, error) {
	rd := reader{cl: cl, log: zap.NewNop()}
	if _, err := rd.topic(ctx); err != nil {
		return nil, err
	}
	out := map[int32]Sidecar{}
	_, err := rd.read(ctx, SidecarPartition, func(rec *kgo.Record) error {
		k, err := ReadKey(rec.Key)
		if err != nil || k.Type != TypeSidecar {
			return nil
		}
		if rec.Value == nil {
			delete(out, k.Partition)
			return nil
		}
		if sc, err := readSidecarValue(k, rec.Value); err == nil {
			out[k.Partition] = sc
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
