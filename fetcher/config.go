package fetcher

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Limits and defaults of the options.
const (
	// MaxInFlightLimit is the most produce requests Kafka's idempotence
	// lets a producer have in flight per partition.
	MaxInFlightLimit = 5

	defaultMaxInFlight       = 5
	defaultFetchMaxBytes     = 50 << 20 // Kafka's fetch.max.bytes default
	defaultPartitionMaxBytes = 1 << 20  // Kafka's max.partition.fetch.bytes default
	defaultFetchMaxWait      = 500 * time.Millisecond
	defaultProduceTimeout    = 30 * time.Second
	defaultBackoffMin        = 100 * time.Millisecond
	defaultBackoffMax        = 10 * time.Second
	defaultUnreachableAfter  = 10 * time.Second
)

// Opt configures a Manager; see NewManager.
type Opt interface{ apply(*cfg) }

type opt func(*cfg)

func (o opt) apply(c *cfg) { o(c) }

// cfg is the Manager's configuration, filled by Opts and checked by validate.
type cfg struct {
	local        *kgo.Client
	localID      int32
	localIDSet   bool
	logger       *zap.Logger
	registerer   prometheus.Registerer
	maxInFlight  int
	fetchMax     int32
	partMax      int32
	bufferBytes  int
	fetchMaxWait time.Duration
	produceTO    time.Duration
	backoffMin   time.Duration
	backoffMax   time.Duration
	onState      func(PartitionStatus)
	onNotLeader  func(Partition)
	offsetMaps   OffsetMaps
	unreachable  time.Duration
	throttleRate int64 // bytes/s appended, 0: unlimited (throttle.go)
	bufferMemory int64 // fetched bytes held at once (budget.go)
	clock        clock
}

func defaultCfg() cfg {
	return cfg{
		localID:      -1,
		logger:       zap.NewNop(),
		maxInFlight:  defaultMaxInFlight,
		fetchMax:     defaultFetchMaxBytes,
		partMax:      defaultPartitionMaxBytes,
		fetchMaxWait: defaultFetchMaxWait,
		produceTO:    defaultProduceTimeout,
		backoffMin:   defaultBackoffMin,
		backoffMax:   defaultBackoffMax,
		unreachable:  defaultUnreachableAfter,
		clock:        realClock{},
		bufferMemory: DefaultBufferMemory,
	}
}

// LocalClient sets the client of the destination cluster, authenticated as
// the sidecar's principal (a destination super user). Required. The Manager
// does not close it. The Manager sends raw requests only, so the client's
// producer and consumer options do not matter, except that it must not be
// configured with RequiredAcks(NoAck()), which turns kgo's produce
// connections into write-only ones.
func LocalClient(cl *kgo.Client) Opt { return opt(func(c *cfg) { c.local = cl }) }

// LocalBrokerID sets the node ID of the destination broker beside this
// sidecar. Required. Every produce, ListOffsets, InitProducerID and
// DeleteRecords request goes to this broker only.
func LocalBrokerID(id int32) Opt {
	return opt(func(c *cfg) { c.localID, c.localIDSet = id, true })
}

// Logger sets the logger; the Manager logs under Named("fetcher"). Default:
// no logging.
func Logger(l *zap.Logger) Opt { return opt(func(c *cfg) { c.logger = l }) }

// Registerer sets where the Manager registers its Prometheus metrics. If a
// metric is already registered there (a second Manager on the same registry),
// the existing collector is shared. Default: a private registry.
func Registerer(r prometheus.Registerer) Opt { return opt(func(c *cfg) { c.registerer = r }) }

// MaxInFlightPerPartition sets how many produce requests may be in flight per
// partition, in order (1 to 5, default 5).
func MaxInFlightPerPartition(n int) Opt { return opt(func(c *cfg) { c.maxInFlight = n }) }

// FetchMaxBytes sets the most bytes one fetch request to a source broker may
// return (default 50 MiB).
func FetchMaxBytes(n int32) Opt { return opt(func(c *cfg) { c.fetchMax = n }) }

// PartitionMaxBytes sets the most bytes one fetch may return per partition
// (default 1 MiB). A partition is left out of fetches while it has more than
// PartitionBufferBytes fetched and not yet appended.
func PartitionMaxBytes(n int32) Opt { return opt(func(c *cfg) { c.partMax = n }) }

// PartitionBufferBytes sets the backpressure bound: the fetched bytes a
// partition may hold before it is left out of fetches (default: twice
// PartitionMaxBytes).
func PartitionBufferBytes(n int) Opt { return opt(func(c *cfg) { c.bufferBytes = n }) }

// FetchMaxWait sets how long a source broker may hold a fetch that has no
// data yet (default 500ms).
func FetchMaxWait(d time.Duration) Opt { return opt(func(c *cfg) { c.fetchMaxWait = d }) }

// ProduceTimeout sets the produce request timeout sent to the local broker
// (default 30s).
func ProduceTimeout(d time.Duration) Opt { return opt(func(c *cfg) { c.produceTO = d }) }

// Backoff sets the retry backoff after retriable errors: exponential from min
// to max, with jitter (default 100ms to 10s).
func Backoff(min, max time.Duration) Opt {
	return opt(func(c *cfg) { c.backoffMin, c.backoffMax = min, max })
}

// SourceUnreachableAfter sets how long no fetch of a partition may succeed,
// while its fetches or source look-ups fail or one hangs, before the
// partition's source counts as unreachable (PartitionStatus.SourceUnreachableSince)
// and a partition this far behind is logged as falling behind (default 10s:
// kgo's request timeout of a fetch to a broker that stopped answering is
// the fetch wait plus 10s, so a silent source is caught by the hung fetch).
func SourceUnreachableAfter(d time.Duration) Opt { return opt(func(c *cfg) { c.unreachable = d }) }

// OnStateChange sets a function called with the partition's status on every
// state change, in order, from one goroutine of the Manager. It must not
// block long.
func OnStateChange(fn func(PartitionStatus)) Opt { return opt(func(c *cfg) { c.onState = fn }) }

// OnNotLeader sets a function called when the local broker answered
// NOT_LEADER_OR_FOLLOWER for a partition: the Manager has already stopped
// that partition (it is no longer in Status); the coordinator decides who
// owns it now. Called from the same goroutine as OnStateChange.
func OnNotLeader(fn func(Partition)) Opt { return opt(func(c *cfg) { c.onNotLeader = fn }) }

// OffsetMapStore sets where translate-mode partitions keep their offset
// maps (mirror.offsets=translate).
func OffsetMapStore(s OffsetMaps) Opt { return opt(func(c *cfg) { c.offsetMaps = s }) }

// validate checks every field and names each bad one.
func (c *cfg) validate() error {
	var bad []string
	if c.local == nil {
		bad = append(bad, "LocalClient is required (a client for the destination cluster)")
	}
	if !c.localIDSet {
		bad = append(bad, "LocalBrokerID is required (the node ID of the destination broker beside this sidecar)")
	} else if c.localID < 0 {
		bad = append(bad, fmt.Sprintf("LocalBrokerID %d is negative", c.localID))
	}
	if c.logger == nil {
		bad = append(bad, "Logger is nil")
	}
	if c.maxInFlight < 1 || c.maxInFlight > MaxInFlightLimit {
		bad = append(bad, fmt.Sprintf("MaxInFlightPerPartition %d is outside 1..%d", c.maxInFlight, MaxInFlightLimit))
	}
	if c.fetchMax <= 0 {
		bad = append(bad, fmt.Sprintf("FetchMaxBytes %d must be positive", c.fetchMax))
	}
	if c.partMax <= 0 {
		bad = append(bad, fmt.Sprintf("PartitionMaxBytes %d must be positive", c.partMax))
	} else if c.fetchMax > 0 && c.partMax > c.fetchMax {
		bad = append(bad, fmt.Sprintf("PartitionMaxBytes %d exceeds FetchMaxBytes %d", c.partMax, c.fetchMax))
	}
	if c.bufferBytes < 0 {
		bad = append(bad, fmt.Sprintf("PartitionBufferBytes %d is negative", c.bufferBytes))
	}
	if c.fetchMaxWait <= 0 {
		bad = append(bad, fmt.Sprintf("FetchMaxWait %s must be positive", c.fetchMaxWait))
	}
	if c.produceTO < time.Millisecond {
		bad = append(bad, fmt.Sprintf("ProduceTimeout %s must be at least 1ms", c.produceTO))
	}
	if c.backoffMin <= 0 || c.backoffMax < c.backoffMin {
		bad = append(bad, fmt.Sprintf("Backoff(%s, %s) needs 0 < min <= max", c.backoffMin, c.backoffMax))
	}
	if c.unreachable <= 0 {
		bad = append(bad, fmt.Sprintf("SourceUnreachableAfter %s must be positive", c.unreachable))
	}
	if c.bufferMemory <= 0 {
		bad = append(bad, fmt.Sprintf("BufferMemory %d must be positive", c.bufferMemory))
	}
	if c.throttleRate < 0 {
		bad = append(bad, fmt.Sprintf("ReplicationThrottledRate %d is negative (0 is no limit)", c.throttleRate))
	}
	if len(bad) == 0 {
		return nil
	}
	err := fmt.Errorf("%w: %s", ErrInvalidOption, bad[0])
	for _, b := range bad[1:] {
		err = fmt.Errorf("%w; %s", err, b)
	}
	return err
}
