package protocol

import "github.com/twmb/franz-go/pkg/kbin"

// WriteMirrorStates (key 1009, internal): a partition owner persists state
// transitions through the mirror's coordinator (KIP-1279). The KIP's scrape
// lost the name of the last-mirror-epoch field; it is LastMirrorEpoch here.
//
// sidemirror extensions, all tagged on PartitionData: PreviousState (tag 0)
// and RetryAttempt (tag 1), which the KIP's request cannot carry although
// ReadMirrorStates returns them, and DestinationLeaderEpoch (tag 2), the
// writer's destination leader epoch, with which the coordinator fences stale
// writers (DESIGN.md D6); Reason (tag 3), why a partition FAILED;
// LastSourceOffset (tag 4), the stop boundary; and OffsetMap (tag 5), offset
// shifts of a translate-mode partition to add to its map (DESIGN.md D2). A
// State of -1 (StateUnchanged) writes only the shifts.
//
//	{
//	  "apiKey": 1009,
//	  "type": "request",
//	  "name": "WriteMirrorStatesRequest",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "MirrorName", "type": "string", "versions": "0+", "entityType": "mirrorName" },
//	    { "name": "Topics", "type": "[]TopicData", "versions": "0+", "fields": [
//	      { "name": "Name", "type": "string", "versions": "0+", "entityType": "topicName" },
//	      { "name": "Partitions", "type": "[]PartitionData", "versions": "0+", "fields": [
//	        { "name": "PartitionIndex", "type": "int32", "versions": "0+" },
//	        { "name": "LastMirrorEpoch", "type": "int32", "versions": "0+", "default": "-1",
//	          "about": "The last mirror leader epoch, or -1." },
//	        { "name": "State", "type": "int8", "versions": "0+" },
//	        { "name": "PreviousState", "type": "int8", "versions": "0+", "default": "16",
//	          "taggedVersions": "0+", "tag": 0,
//	          "about": "The state before this transition; 16 if not recorded." },
//	        { "name": "RetryAttempt", "type": "int16", "versions": "0+", "default": "0",
//	          "taggedVersions": "0+", "tag": 1,
//	          "about": "The number of automatic retries while in FAILED." },
//	        { "name": "DestinationLeaderEpoch", "type": "int32", "versions": "0+", "default": "-1",
//	          "taggedVersions": "0+", "tag": 2,
//	          "about": "The writer's destination leader epoch of the partition, or -1." },
//	        { "name": "Reason", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null",
//	          "taggedVersions": "0+", "tag": 3,
//	          "about": "Why the partition FAILED, or null." },
//	        { "name": "LastSourceOffset", "type": "int64", "versions": "0+", "default": "-1",
//	          "taggedVersions": "0+", "tag": 4,
//	          "about": "The next source offset to mirror (the destination log end offset), or -1." },
//	        { "name": "OffsetMap", "type": "[]OffsetShift", "versions": "0+",
//	          "taggedVersions": "0+", "tag": 5,
//	          "about": "Offset shifts to add to the partition's offset map (translate mode).", "fields": [
//	          { "name": "SourceOffset", "type": "int64", "versions": "0+" },
//	          { "name": "DestinationOffset", "type": "int64", "versions": "0+" }
//	        ]}
//	      ]}
//	    ]},
//	    { "name": "StoppedTopics", "type": "[]string", "versions": "0+", "entityType": "topicName",
//	      "about": "The topic names to be stopped." }
//	  ]
//	}
//
//	{
//	  "apiKey": 1009,
//	  "type": "response",
//	  "name": "WriteMirrorStatesResponse",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+" },
//	    { "name": "ErrorCode", "type": "int16", "versions": "0+" },
//	    { "name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null" },
//	    { "name": "Topics", "type": "[]TopicResult", "versions": "0+", "fields": [
//	      { "name": "Name", "type": "string", "versions": "0+", "entityType": "topicName" },
//	      { "name": "Partitions", "type": "[]PartitionResult", "versions": "0+", "fields": [
//	        { "name": "PartitionIndex", "type": "int32", "versions": "0+" },
//	        { "name": "ErrorCode", "type": "int16", "versions": "0+" }
//	      ]}
//	    ]}
//	  ]
//	}

// WriteMirrorStatesRequest persists partition states through a coordinator.
type WriteMirrorStatesRequest struct {
	versioned
	MirrorName    string                          `json:"mirrorName"`
	Topics        []WriteMirrorStatesRequestTopic `json:"topics"`
	StoppedTopics []string                        `json:"stoppedTopics"`
}

// WriteMirrorStatesRequestTopic holds the new states of one topic's
// partitions.
type WriteMirrorStatesRequestTopic struct {
	Name       string                              `json:"name"`
	Partitions []WriteMirrorStatesRequestPartition `json:"partitions"`
}

// WriteMirrorStatesRequestPartition is one partition's new state. Use
// Default for a value with the schema's defaults.
type WriteMirrorStatesRequestPartition struct {
	PartitionIndex         int32         `json:"partitionIndex"`
	LastMirrorEpoch        int32         `json:"lastMirrorEpoch"`        // -1 if none
	State                  int8          `json:"state"`                  // D16 state code
	PreviousState          int8          `json:"previousState"`          // tag 0, default PreviousStateNotRecorded
	RetryAttempt           int16         `json:"retryAttempt"`           // tag 1
	DestinationLeaderEpoch int32         `json:"destinationLeaderEpoch"` // tag 2, -1 if unknown
	Reason                 *string       `json:"reason"`                 // tag 3, why FAILED
	LastSourceOffset       int64         `json:"lastSourceOffset"`       // tag 4, -1 if unknown
	OffsetMap              []OffsetShift `json:"offsetMap"`              // tag 5
}

// Default sets the schema's defaults.
func (p *WriteMirrorStatesRequestPartition) Default() {
	*p = WriteMirrorStatesRequestPartition{
		LastMirrorEpoch:        -1,
		PreviousState:          PreviousStateNotRecorded,
		DestinationLeaderEpoch: -1,
		LastSourceOffset:       -1,
	}
}

func (t *WriteMirrorStatesRequestTopic) appendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, t.Name)
	dst = appendArray(dst, t.Partitions)
	return appendNoTags(dst)
}

func (t *WriteMirrorStatesRequestTopic) readFrom(d *decoder) {
	t.Name = d.string()
	t.Partitions = readArray[WriteMirrorStatesRequestPartition](d)
	d.tags(nil)
}

func (p *WriteMirrorStatesRequestPartition) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, p.PartitionIndex)
	dst = kbin.AppendInt32(dst, p.LastMirrorEpoch)
	dst = kbin.AppendInt8(dst, p.State)
	var tw tagWriter
	if p.PreviousState != PreviousStateNotRecorded {
		tw.add(0, kbin.AppendInt8(nil, p.PreviousState))
	}
	if p.RetryAttempt != 0 {
		tw.add(1, kbin.AppendInt16(nil, p.RetryAttempt))
	}
	if p.DestinationLeaderEpoch != -1 {
		tw.add(2, kbin.AppendInt32(nil, p.DestinationLeaderEpoch))
	}
	if p.Reason != nil {
		tw.add(3, kbin.AppendCompactNullableString(nil, p.Reason))
	}
	if p.LastSourceOffset != -1 {
		tw.add(4, kbin.AppendInt64(nil, p.LastSourceOffset))
	}
	if len(p.OffsetMap) > 0 {
		tw.add(5, appendArray(nil, p.OffsetMap))
	}
	return tw.appendTo(dst)
}

// StateUnchanged as the State of a WriteMirrorStates partition writes only
// its OffsetMap.
const StateUnchanged int8 = -1

// OffsetShift is one entry of a translate-mode partition's offset map:
// source offset SourceOffset is at DestinationOffset, later ones follow one
// for one up to the next shift.
type OffsetShift struct {
	SourceOffset      int64 `json:"sourceOffset"`
	DestinationOffset int64 `json:"destinationOffset"`
}

func (s *OffsetShift) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt64(dst, s.SourceOffset)
	dst = kbin.AppendInt64(dst, s.DestinationOffset)
	return appendNoTags(dst)
}

func (s *OffsetShift) readFrom(d *decoder) {
	s.SourceOffset = d.int64()
	s.DestinationOffset = d.int64()
	d.tags(nil)
}

func (p *WriteMirrorStatesRequestPartition) readFrom(d *decoder) {
	p.Default()
	p.PartitionIndex = d.int32()
	p.LastMirrorEpoch = d.int32()
	p.State = d.int8()
	d.tags(func(tag uint32, f *decoder) bool {
		switch tag {
		case 0:
			p.PreviousState = f.int8()
		case 1:
			p.RetryAttempt = f.int16()
		case 2:
			p.DestinationLeaderEpoch = f.int32()
		case 3:
			p.Reason = f.nullableString()
		case 4:
			p.LastSourceOffset = f.int64()
		case 5:
			p.OffsetMap = readArray[OffsetShift](f)
		default:
			return false
		}
		return true
	})
}

// Key returns KeyWriteMirrorStates.
func (*WriteMirrorStatesRequest) Key() int16 { return KeyWriteMirrorStates }

// ResponseKind returns an empty WriteMirrorStatesResponse.
func (v *WriteMirrorStatesRequest) ResponseKind() Response {
	return &WriteMirrorStatesResponse{versioned: v.versioned}
}

// AppendTo appends the request body.
func (v *WriteMirrorStatesRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, v.MirrorName)
	dst = appendArray(dst, v.Topics)
	dst = appendStrings(dst, v.StoppedTopics)
	return appendNoTags(dst)
}

// ReadFrom decodes a request body.
func (v *WriteMirrorStatesRequest) ReadFrom(src []byte) error {
	*v = WriteMirrorStatesRequest{versioned: v.versioned}
	d := newRequestDecoder(src)
	v.MirrorName = d.string()
	v.Topics = readArray[WriteMirrorStatesRequestTopic](d)
	v.StoppedTopics = d.strings()
	d.tags(nil)
	return d.finish()
}

// WriteMirrorStatesResponse answers WriteMirrorStatesRequest.
type WriteMirrorStatesResponse struct {
	versioned
	ThrottleTimeMs int32                            `json:"throttleTimeMs"`
	ErrorCode      int16                            `json:"errorCode"`
	ErrorMessage   *string                          `json:"errorMessage"`
	Topics         []WriteMirrorStatesResponseTopic `json:"topics"`
}

// WriteMirrorStatesResponseTopic holds the outcome for one topic.
type WriteMirrorStatesResponseTopic struct {
	Name       string                               `json:"name"`
	Partitions []WriteMirrorStatesResponsePartition `json:"partitions"`
}

// WriteMirrorStatesResponsePartition is the outcome for one partition.
type WriteMirrorStatesResponsePartition struct {
	PartitionIndex int32 `json:"partitionIndex"`
	ErrorCode      int16 `json:"errorCode"`
}

func (t *WriteMirrorStatesResponseTopic) appendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, t.Name)
	dst = appendArray(dst, t.Partitions)
	return appendNoTags(dst)
}

func (t *WriteMirrorStatesResponseTopic) readFrom(d *decoder) {
	t.Name = d.string()
	t.Partitions = readArray[WriteMirrorStatesResponsePartition](d)
	d.tags(nil)
}

func (p *WriteMirrorStatesResponsePartition) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, p.PartitionIndex)
	dst = kbin.AppendInt16(dst, p.ErrorCode)
	return appendNoTags(dst)
}

func (p *WriteMirrorStatesResponsePartition) readFrom(d *decoder) {
	p.PartitionIndex = d.int32()
	p.ErrorCode = d.int16()
	d.tags(nil)
}

// Key returns KeyWriteMirrorStates.
func (*WriteMirrorStatesResponse) Key() int16 { return KeyWriteMirrorStates }

// AppendTo appends the response body.
func (v *WriteMirrorStatesResponse) AppendTo(dst []byte) []byte {
	dst = appendStatus(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage)
	dst = appendArray(dst, v.Topics)
	return appendNoTags(dst)
}

// ReadFrom decodes a response body.
func (v *WriteMirrorStatesResponse) ReadFrom(src []byte) error {
	*v = WriteMirrorStatesResponse{versioned: v.versioned}
	d := newDecoder(src)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage = d.status()
	v.Topics = readArray[WriteMirrorStatesResponseTopic](d)
	d.tags(nil)
	return d.finish()
}
