package protocol

import "github.com/twmb/franz-go/pkg/kbin"

// ReadMirrorStates (key 1008, internal): a partition owner that is not the
// mirror's coordinator reads partition states from it (KIP-1279). State codes
// are DESIGN.md D16's: UNKNOWN=0, LOG_TRUNCATION=1, MIRRORING=2, PAUSING=3,
// PAUSED=4, STOPPING=5, STOPPED=6, FAILED=7.
//
//	{
//	  "apiKey": 1008,
//	  "type": "request",
//	  "name": "ReadMirrorStatesRequest",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "MirrorName", "type": "string", "versions": "0+", "entityType": "mirrorName" },
//	    { "name": "Topics", "type": "[]TopicData", "versions": "0+", "fields": [
//	      { "name": "Name", "type": "string", "versions": "0+", "entityType": "topicName" },
//	      { "name": "Partitions", "type": "[]PartitionData", "versions": "0+", "fields": [
//	        { "name": "PartitionIndex", "type": "int32", "versions": "0+" }
//	      ]}
//	    ]}
//	  ]
//	}
//
//	{
//	  "apiKey": 1008,
//	  "type": "response",
//	  "name": "ReadMirrorStatesResponse",
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
//	        { "name": "LastMirrorEpoch", "type": "int32", "versions": "0+", "default": "-1",
//	          "about": "The last mirrored leader epoch, or -1." },
//	        { "name": "State", "type": "int8", "versions": "0+" },
//	        { "name": "ErrorCode", "type": "int16", "versions": "0+" },
//	        { "name": "PreviousState", "type": "int8", "versions": "0+", "default": "16",
//	          "taggedVersions": "0+", "tag": 0,
//	          "about": "The state before the last transition; 16 if not recorded." },
//	        { "name": "RetryAttempt", "type": "int16", "versions": "0+", "default": "0",
//	          "taggedVersions": "0+", "tag": 1,
//	          "about": "The number of automatic retries while in FAILED." },
//	        { "name": "Reason", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null",
//	          "taggedVersions": "0+", "tag": 2, "about": "Why the partition FAILED (sidemirror)." },
//	        { "name": "LastSourceOffset", "type": "int64", "versions": "0+", "default": "-1",
//	          "taggedVersions": "0+", "tag": 3, "about": "The stop boundary or last mirrored position (sidemirror)." },
//	        { "name": "OffsetMap", "type": "[]OffsetShift", "versions": "0+",
//	          "taggedVersions": "0+", "tag": 4,
//	          "about": "The offset map of a translate-mode partition (sidemirror).", "fields": [
//	          { "name": "SourceOffset", "type": "int64", "versions": "0+" },
//	          { "name": "DestinationOffset", "type": "int64", "versions": "0+" }
//	        ]}
//	      ]}
//	    ]}
//	  ]
//	}

// PreviousStateNotRecorded is the default of PreviousState: no previous
// state is recorded (the KIP's default of 16, outside D16's state codes).
const PreviousStateNotRecorded int8 = 16

// ReadMirrorStatesRequest reads partition states from a coordinator.
type ReadMirrorStatesRequest struct {
	versioned
	MirrorName string                         `json:"mirrorName"`
	Topics     []ReadMirrorStatesRequestTopic `json:"topics"`
}

// ReadMirrorStatesRequestTopic names the partitions of one topic to read.
type ReadMirrorStatesRequestTopic struct {
	Name       string                             `json:"name"`
	Partitions []ReadMirrorStatesRequestPartition `json:"partitions"`
}

// ReadMirrorStatesRequestPartition names one partition to read.
type ReadMirrorStatesRequestPartition struct {
	PartitionIndex int32 `json:"partitionIndex"`
}

func (t *ReadMirrorStatesRequestTopic) appendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, t.Name)
	dst = appendArray(dst, t.Partitions)
	return appendNoTags(dst)
}

func (t *ReadMirrorStatesRequestTopic) readFrom(d *decoder) {
	t.Name = d.string()
	t.Partitions = readArray[ReadMirrorStatesRequestPartition](d)
	d.tags(nil)
}

func (p *ReadMirrorStatesRequestPartition) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, p.PartitionIndex)
	return appendNoTags(dst)
}

func (p *ReadMirrorStatesRequestPartition) readFrom(d *decoder) {
	p.PartitionIndex = d.int32()
	d.tags(nil)
}

// Key returns KeyReadMirrorStates.
func (*ReadMirrorStatesRequest) Key() int16 { return KeyReadMirrorStates }

// ResponseKind returns an empty ReadMirrorStatesResponse.
func (v *ReadMirrorStatesRequest) ResponseKind() Response {
	return &ReadMirrorStatesResponse{versioned: v.versioned}
}

// AppendTo appends the request body.
func (v *ReadMirrorStatesRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, v.MirrorName)
	dst = appendArray(dst, v.Topics)
	return appendNoTags(dst)
}

// ReadFrom decodes a request body.
func (v *ReadMirrorStatesRequest) ReadFrom(src []byte) error {
	*v = ReadMirrorStatesRequest{versioned: v.versioned}
	d := newRequestDecoder(src)
	v.MirrorName = d.string()
	v.Topics = readArray[ReadMirrorStatesRequestTopic](d)
	d.tags(nil)
	return d.finish()
}

// ReadMirrorStatesResponse answers ReadMirrorStatesRequest.
type ReadMirrorStatesResponse struct {
	versioned
	ThrottleTimeMs int32                           `json:"throttleTimeMs"`
	ErrorCode      int16                           `json:"errorCode"`
	ErrorMessage   *string                         `json:"errorMessage"`
	Topics         []ReadMirrorStatesResponseTopic `json:"topics"`
}

// ReadMirrorStatesResponseTopic holds the states of one topic's partitions.
type ReadMirrorStatesResponseTopic struct {
	Name       string                              `json:"name"`
	Partitions []ReadMirrorStatesResponsePartition `json:"partitions"`
}

// ReadMirrorStatesResponsePartition is one partition's state. Use Default
// for a value with the schema's defaults.
type ReadMirrorStatesResponsePartition struct {
	PartitionIndex   int32         `json:"partitionIndex"`
	LastMirrorEpoch  int32         `json:"lastMirrorEpoch"` // -1 if none
	State            int8          `json:"state"`           // D16 state code
	ErrorCode        int16         `json:"errorCode"`
	PreviousState    int8          `json:"previousState"`    // tag 0, default PreviousStateNotRecorded
	RetryAttempt     int16         `json:"retryAttempt"`     // tag 1
	Reason           *string       `json:"reason"`           // tag 2, why FAILED
	LastSourceOffset int64         `json:"lastSourceOffset"` // tag 3, -1 if unknown
	OffsetMap        []OffsetShift `json:"offsetMap"`        // tag 4, translate mode's shifts; exact mode's repeated markers
}

// Default sets the schema's defaults.
func (p *ReadMirrorStatesResponsePartition) Default() {
	*p = ReadMirrorStatesResponsePartition{LastMirrorEpoch: -1, PreviousState: PreviousStateNotRecorded, LastSourceOffset: -1}
}

func (t *ReadMirrorStatesResponseTopic) appendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, t.Name)
	dst = appendArray(dst, t.Partitions)
	return appendNoTags(dst)
}

func (t *ReadMirrorStatesResponseTopic) readFrom(d *decoder) {
	t.Name = d.string()
	t.Partitions = readArray[ReadMirrorStatesResponsePartition](d)
	d.tags(nil)
}

func (p *ReadMirrorStatesResponsePartition) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, p.PartitionIndex)
	dst = kbin.AppendInt32(dst, p.LastMirrorEpoch)
	dst = kbin.AppendInt8(dst, p.State)
	dst = kbin.AppendInt16(dst, p.ErrorCode)
	var tw tagWriter
	if p.PreviousState != PreviousStateNotRecorded {
		tw.add(0, kbin.AppendInt8(nil, p.PreviousState))
	}
	if p.RetryAttempt != 0 {
		tw.add(1, kbin.AppendInt16(nil, p.RetryAttempt))
	}
	if p.Reason != nil {
		tw.add(2, kbin.AppendCompactNullableString(nil, p.Reason))
	}
	if p.LastSourceOffset != -1 {
		tw.add(3, kbin.AppendInt64(nil, p.LastSourceOffset))
	}
	if len(p.OffsetMap) > 0 {
		tw.add(4, appendArray(nil, p.OffsetMap))
	}
	return tw.appendTo(dst)
}

func (p *ReadMirrorStatesResponsePartition) readFrom(d *decoder) {
	p.Default()
	p.PartitionIndex = d.int32()
	p.LastMirrorEpoch = d.int32()
	p.State = d.int8()
	p.ErrorCode = d.int16()
	d.tags(func(tag uint32, f *decoder) bool {
		switch tag {
		case 0:
			p.PreviousState = f.int8()
		case 1:
			p.RetryAttempt = f.int16()
		case 2:
			p.Reason = f.nullableString()
		case 3:
			p.LastSourceOffset = f.int64()
		case 4:
			p.OffsetMap = readArray[OffsetShift](f)
		default:
			return false
		}
		return true
	})
}

// Key returns KeyReadMirrorStates.
func (*ReadMirrorStatesResponse) Key() int16 { return KeyReadMirrorStates }

// AppendTo appends the response body.
func (v *ReadMirrorStatesResponse) AppendTo(dst []byte) []byte {
	dst = appendStatus(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage)
	dst = appendArray(dst, v.Topics)
	return appendNoTags(dst)
}

// ReadFrom decodes a response body.
func (v *ReadMirrorStatesResponse) ReadFrom(src []byte) error {
	*v = ReadMirrorStatesResponse{versioned: v.versioned}
	d := newDecoder(src)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage = d.status()
	v.Topics = readArray[ReadMirrorStatesResponseTopic](d)
	d.tags(nil)
	return d.finish()
}
