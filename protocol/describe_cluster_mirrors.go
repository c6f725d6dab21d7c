package protocol

import (
	"math"

	"github.com/twmb/franz-go/pkg/kbin"
)

// DescribeClusterMirrors (key 1003): state, offsets and lag of every mirror
// partition, with the mirror's configuration (KIP-1279). The sidecar that
// receives it gathers the rows of every sidecar (DescribeLocalPartitions).
//
// sidemirror extensions, all tagged: PartitionDetail.LastError (tag 0),
// OwnerBrokerId (tag 1), SourceUnreachableSinceMs (tag 2), LagTimeMs (tag 3),
// LastFetchTimestampMs (tag 4), RetryAttempt (tag 5), MaxRetryAttempts
// (tag 6), NonRetryable (tag 7) and MirroredBytes (tag 8); DescribedMirror.SourceClusterId (tag 0),
// SourceBootstrap (tag 1), Configs (tag 2, secret values redacted by the
// server) and ErrorMessage (tag 3). The KIP's scrape lost the name of the
// partition's last-mirror-epoch field; it is LastMirrorEpoch here, as in
// ReadMirrorStates.
//
//	{
//	  "apiKey": 1003,
//	  "type": "request",
//	  "name": "DescribeClusterMirrorsRequest",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "MirrorNames", "type": "[]string", "versions": "0+", "nullableVersions": "0+",
//	      "entityType": "mirrorName",
//	      "about": "The names of the mirrors to describe. Null or empty array means all mirrors." },
//	    { "name": "IncludeAuthorizedOperations", "type": "bool", "versions": "0+", "default": "false",
//	      "about": "Whether to include authorized operations." }
//	  ]
//	}
//
//	{
//	  "apiKey": 1003,
//	  "type": "response",
//	  "name": "DescribeClusterMirrorsResponse",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+" },
//	    { "name": "ErrorCode", "type": "int16", "versions": "0+" },
//	    { "name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null" },
//	    { "name": "Mirrors", "type": "[]DescribedMirror", "versions": "0+",
//	      "about": "Each described mirror.", "fields": [
//	      { "name": "ErrorCode", "type": "int16", "versions": "0+" },
//	      { "name": "MirrorName", "type": "string", "versions": "0+", "entityType": "mirrorName" },
//	      { "name": "AuthorizedOperations", "type": "int32", "versions": "0+", "default": "-2147483648",
//	        "about": "32-bit bitfield to represent authorized operations for this mirror." },
//	      { "name": "Topics", "type": "[]TopicPartitions", "versions": "0+",
//	        "about": "Each topic in the mirror.", "fields": [
//	        { "name": "TopicName", "type": "string", "versions": "0+", "entityType": "topicName" },
//	        { "name": "Partitions", "type": "[]PartitionDetail", "versions": "0+",
//	          "about": "Each partition detail.", "fields": [
//	          { "name": "PartitionIndex", "type": "int32", "versions": "0+" },
//	          { "name": "SourceOffset", "type": "int64", "versions": "0+", "default": "-1",
//	            "about": "The high watermark offset from the source cluster leader, or -1 if not yet available." },
//	          { "name": "DestinationOffset", "type": "int64", "versions": "0+", "default": "-1",
//	            "about": "The log end offset on the destination cluster, or -1 if not yet available." },
//	          { "name": "Lag", "type": "int64", "versions": "0+", "default": "-1",
//	            "about": "The lag (source offset - destination offset), or -1 if not yet available." },
//	          { "name": "State", "type": "string", "versions": "0+",
//	            "about": "The partition state." },
//	          { "name": "LastMirrorEpoch", "type": "int32", "versions": "0+", "default": "-1",
//	            "about": "The last mirror leader epoch, or -1 if not available." },
//	          { "name": "LastError", "type": "string", "versions": "0+", "nullableVersions": "0+",
//	            "default": "null", "taggedVersions": "0+", "tag": 0,
//	            "about": "Why the partition is FAILED, or the last retriable error; null if none." },
//	          { "name": "OwnerBrokerId", "type": "int32", "versions": "0+", "default": "-1",
//	            "taggedVersions": "0+", "tag": 1,
//	            "about": "The broker whose sidecar drives the partition, or -1 if none." },
//	          { "name": "SourceUnreachableSinceMs", "type": "int64", "versions": "0+", "default": "-1",
//	            "taggedVersions": "0+", "tag": 2,
//	            "about": "While the source cannot be fetched from: the time of the last successful fetch (Unix ms), else -1." },
//	          { "name": "LagTimeMs", "type": "int64", "versions": "0+", "default": "-1",
//	            "taggedVersions": "0+", "tag": 3,
//	            "about": "Milliseconds since the destination last held every record the source had, or -1 if not driven." },
//	          { "name": "LastFetchTimestampMs", "type": "int64", "versions": "0+", "default": "-1",
//	            "taggedVersions": "0+", "tag": 4,
//	            "about": "When a fetch from the source last succeeded (Unix ms), or -1 if none." },
//	          { "name": "RetryAttempt", "type": "int16", "versions": "0+", "default": "0",
//	            "taggedVersions": "0+", "tag": 5,
//	            "about": "The automatic retries made since the partition last mirrored (as in ReadMirrorStates)." },
//	          { "name": "MaxRetryAttempts", "type": "int16", "versions": "0+", "default": "-1",
//	            "taggedVersions": "0+", "tag": 6,
//	            "about": "The most automatic retries the mirror allows a FAILED partition, or -1 if not known." },
//	          { "name": "NonRetryable", "type": "bool", "versions": "0+", "default": "false",
//	            "taggedVersions": "0+", "tag": 7,
//	            "about": "True if the partition failed for good: it is never retried automatically, only recovered by an operator." },
//	          { "name": "MirroredBytes", "type": "int64", "versions": "0+", "default": "-1",
//	            "taggedVersions": "0+", "tag": 8,
//	            "about": "Record batch bytes the owner's sidecar appended for the partition since it began driving it, or -1 if not known." }
//	        ]}
//	      ]},
//	      { "name": "SourceClusterId", "type": "string", "versions": "0+", "default": "",
//	        "taggedVersions": "0+", "tag": 0,
//	        "about": "The source cluster ID, or empty if not yet resolved." },
//	      { "name": "SourceBootstrap", "type": "string", "versions": "0+", "default": "",
//	        "taggedVersions": "0+", "tag": 1,
//	        "about": "The source cluster bootstrap servers." },
//	      { "name": "Configs", "type": "[]ClusterMirrorConfig", "versions": "0+",
//	        "taggedVersions": "0+", "tag": 2,
//	        "about": "The mirror's configuration, secret values redacted.", "fields": [
//	        { "name": "Name", "type": "string", "versions": "0+", "mapKey": true },
//	        { "name": "Value", "type": "string", "versions": "0+", "nullableVersions": "0+" }
//	      ]},
//	      { "name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+",
//	        "default": "null", "taggedVersions": "0+", "tag": 3,
//	        "about": "The mirror-level error message, or null if there was no error." }
//	    ]}
//	  ]
//	}

// DescribeClusterMirrorsRequest describes mirrors.
type DescribeClusterMirrorsRequest struct {
	versioned
	MirrorNames                 []string `json:"mirrorNames"` // nil (null) or empty: all mirrors
	IncludeAuthorizedOperations bool     `json:"includeAuthorizedOperations"`
}

// Key returns KeyDescribeClusterMirrors.
func (*DescribeClusterMirrorsRequest) Key() int16 { return KeyDescribeClusterMirrors }

// ResponseKind returns an empty DescribeClusterMirrorsResponse.
func (v *DescribeClusterMirrorsRequest) ResponseKind() Response {
	return &DescribeClusterMirrorsResponse{versioned: v.versioned}
}

// AppendTo appends the request body.
func (v *DescribeClusterMirrorsRequest) AppendTo(dst []byte) []byte {
	dst = appendNullableStrings(dst, v.MirrorNames)
	dst = kbin.AppendBool(dst, v.IncludeAuthorizedOperations)
	return appendNoTags(dst)
}

// ReadFrom decodes a request body.
func (v *DescribeClusterMirrorsRequest) ReadFrom(src []byte) error {
	*v = DescribeClusterMirrorsRequest{versioned: v.versioned}
	d := newRequestDecoder(src)
	v.MirrorNames = d.nullableStrings()
	v.IncludeAuthorizedOperations = d.bool()
	d.tags(nil)
	return d.finish()
}

// DescribeClusterMirrorsResponse answers DescribeClusterMirrorsRequest.
type DescribeClusterMirrorsResponse struct {
	versioned
	ThrottleTimeMs int32             `json:"throttleTimeMs"`
	ErrorCode      int16             `json:"errorCode"`
	ErrorMessage   *string           `json:"errorMessage"`
	Mirrors        []DescribedMirror `json:"mirrors"`
}

// Key returns KeyDescribeClusterMirrors.
func (*DescribeClusterMirrorsResponse) Key() int16 { return KeyDescribeClusterMirrors }

// AppendTo appends the response body.
func (v *DescribeClusterMirrorsResponse) AppendTo(dst []byte) []byte {
	dst = appendStatus(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage)
	dst = appendArray(dst, v.Mirrors)
	return appendNoTags(dst)
}

// ReadFrom decodes a response body.
func (v *DescribeClusterMirrorsResponse) ReadFrom(src []byte) error {
	*v = DescribeClusterMirrorsResponse{versioned: v.versioned}
	d := newDecoder(src)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage = d.status()
	v.Mirrors = readArray[DescribedMirror](d)
	d.tags(nil)
	return d.finish()
}

// DescribedMirror is one mirror in a describe response. Use Default for a
// value with the schema's defaults.
type DescribedMirror struct {
	ErrorCode            int16            `json:"errorCode"`
	MirrorName           string           `json:"mirrorName"`
	AuthorizedOperations int32            `json:"authorizedOperations"` // default math.MinInt32: not requested
	Topics               []DescribedTopic `json:"topics"`

	SourceClusterId string                `json:"sourceClusterId"` // tag 0; empty if not yet resolved
	SourceBootstrap string                `json:"sourceBootstrap"` // tag 1
	Configs         []ClusterMirrorConfig `json:"configs"`         // tag 2; secret values redacted
	ErrorMessage    *string               `json:"errorMessage"`    // tag 3
}

// Default sets the schema's defaults.
func (m *DescribedMirror) Default() {
	*m = DescribedMirror{AuthorizedOperations: math.MinInt32}
}

func (m *DescribedMirror) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, m.ErrorCode)
	dst = kbin.AppendCompactString(dst, m.MirrorName)
	dst = kbin.AppendInt32(dst, m.AuthorizedOperations)
	dst = appendArray(dst, m.Topics)
	var tw tagWriter
	if m.SourceClusterId != "" {
		tw.add(0, kbin.AppendCompactString(nil, m.SourceClusterId))
	}
	if m.SourceBootstrap != "" {
		tw.add(1, kbin.AppendCompactString(nil, m.SourceBootstrap))
	}
	if len(m.Configs) > 0 {
		tw.add(2, appendArray(nil, m.Configs))
	}
	if m.ErrorMessage != nil {
		tw.add(3, kbin.AppendCompactNullableString(nil, m.ErrorMessage))
	}
	return tw.appendTo(dst)
}

func (m *DescribedMirror) readFrom(d *decoder) {
	m.Default()
	m.ErrorCode = d.int16()
	m.MirrorName = d.string()
	m.AuthorizedOperations = d.int32()
	m.Topics = readArray[DescribedTopic](d)
	d.tags(func(tag uint32, f *decoder) bool {
		switch tag {
		case 0:
			m.SourceClusterId = f.string()
		case 1:
			m.SourceBootstrap = f.string()
		case 2:
			m.Configs = readArray[ClusterMirrorConfig](f)
		case 3:
			m.ErrorMessage = f.nullableString()
		default:
			return false
		}
		return true
	})
}

// DescribedTopic is one topic of a DescribedMirror (the KIP's
// TopicPartitions).
type DescribedTopic struct {
	TopicName  string            `json:"topicName"`
	Partitions []PartitionDetail `json:"partitions"`
}

func (t *DescribedTopic) appendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, t.TopicName)
	dst = appendArray(dst, t.Partitions)
	return appendNoTags(dst)
}

func (t *DescribedTopic) readFrom(d *decoder) {
	t.TopicName = d.string()
	t.Partitions = readArray[PartitionDetail](d)
	d.tags(nil)
}

// PartitionDetail is one mirror partition in a describe response. Use
// Default for a value with the schema's defaults (-1 for the unknowns).
type PartitionDetail struct {
	PartitionIndex    int32  `json:"partitionIndex"`
	SourceOffset      int64  `json:"sourceOffset"`      // source high watermark, -1 if unknown
	DestinationOffset int64  `json:"destinationOffset"` // destination log end offset, -1 if unknown
	Lag               int64  `json:"lag"`               // SourceOffset - DestinationOffset, -1 if unknown
	State             string `json:"state"`             // state name, such as MIRRORING
	LastMirrorEpoch   int32  `json:"lastMirrorEpoch"`   // -1 if not available

	LastError                *string `json:"lastError"`                // tag 0: why FAILED, or the last retriable error
	OwnerBrokerId            int32   `json:"ownerBrokerId"`            // tag 1: broker whose sidecar drives it, -1 if none
	SourceUnreachableSinceMs int64   `json:"sourceUnreachableSinceMs"` // tag 2: source unreachable since (Unix ms), -1 if reachable
	LagTimeMs                int64   `json:"lagTimeMs"`                // tag 3: lag in time, -1 if unknown
	LastFetchTimestampMs     int64   `json:"lastFetchTimestampMs"`     // tag 4: last successful fetch (Unix ms), -1 if none

	RetryAttempt     int16 `json:"retryAttempt"`     // tag 5: automatic retries made while FAILED
	MaxRetryAttempts int16 `json:"maxRetryAttempts"` // tag 6: most automatic retries allowed, -1 if unknown
	NonRetryable     bool  `json:"nonRetryable"`     // tag 7: failed for good, never retried automatically

	// MirroredBytes (tag 8) counts the record batch bytes the owner's
	// sidecar appended for the partition since it began driving it (a
	// counter: --describe --watch's MB/s is its rate), -1 if not known.
	MirroredBytes int64 `json:"mirroredBytes"`
}

// Default sets the schema's defaults.
func (p *PartitionDetail) Default() {
	*p = PartitionDetail{SourceOffset: -1, DestinationOffset: -1, Lag: -1, LastMirrorEpoch: -1, OwnerBrokerId: -1,
		SourceUnreachableSinceMs: -1, LagTimeMs: -1, LastFetchTimestampMs: -1, MaxRetryAttempts: -1, MirroredBytes: -1}
}

func (p *PartitionDetail) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, p.PartitionIndex)
	dst = kbin.AppendInt64(dst, p.SourceOffset)
	dst = kbin.AppendInt64(dst, p.DestinationOffset)
	dst = kbin.AppendInt64(dst, p.Lag)
	dst = kbin.AppendCompactString(dst, p.State)
	dst = kbin.AppendInt32(dst, p.LastMirrorEpoch)
	var tw tagWriter
	if p.LastError != nil {
		tw.add(0, kbin.AppendCompactNullableString(nil, p.LastError))
	}
	if p.OwnerBrokerId != -1 {
		tw.add(1, kbin.AppendInt32(nil, p.OwnerBrokerId))
	}
	if p.SourceUnreachableSinceMs != -1 {
		tw.add(2, kbin.AppendInt64(nil, p.SourceUnreachableSinceMs))
	}
	if p.LagTimeMs != -1 {
		tw.add(3, kbin.AppendInt64(nil, p.LagTimeMs))
	}
	if p.LastFetchTimestampMs != -1 {
		tw.add(4, kbin.AppendInt64(nil, p.LastFetchTimestampMs))
	}
	if p.RetryAttempt != 0 {
		tw.add(5, kbin.AppendInt16(nil, p.RetryAttempt))
	}
	if p.MaxRetryAttempts != -1 {
		tw.add(6, kbin.AppendInt16(nil, p.MaxRetryAttempts))
	}
	if p.NonRetryable {
		tw.add(7, kbin.AppendBool(nil, p.NonRetryable))
	}
	if p.MirroredBytes != -1 {
		tw.add(8, kbin.AppendInt64(nil, p.MirroredBytes))
	}
	return tw.appendTo(dst)
}

func (p *PartitionDetail) readFrom(d *decoder) {
	p.Default()
	p.PartitionIndex = d.int32()
	p.SourceOffset = d.int64()
	p.DestinationOffset = d.int64()
	p.Lag = d.int64()
	p.State = d.string()
	p.LastMirrorEpoch = d.int32()
	d.tags(func(tag uint32, f *decoder) bool {
		switch tag {
		case 0:
			p.LastError = f.nullableString()
		case 1:
			p.OwnerBrokerId = f.int32()
		case 2:
			p.SourceUnreachableSinceMs = f.int64()
		case 3:
			p.LagTimeMs = f.int64()
		case 4:
			p.LastFetchTimestampMs = f.int64()
		case 5:
			p.RetryAttempt = f.int16()
		case 6:
			p.MaxRetryAttempts = f.int16()
		case 7:
			p.NonRetryable = f.bool()
		case 8:
			p.MirroredBytes = f.int64()
		default:
			return false
		}
		return true
	})
}
