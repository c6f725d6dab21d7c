package protocol

import "github.com/twmb/franz-go/pkg/kbin"

// StartMirrorTopics (key 1004): start mirroring topics into read-only mirror
// topics (KIP-1279).
//
// sidemirror extensions: the request's tagged TopicPatterns (tag 0) holds
// topic names or regexes that the server expands against the source's topics
// (minus those matching ExcludePatterns) and starts, because the CLI cannot
// know topic IDs and partition counts; each TopicResult carries a tagged
// ErrorMessage (tag 0). The CLI's --start sends --topics as TopicPatterns and
// IncludePatterns (so that new matching topics are started by
// auto-discovery) and --exclude as ExcludePatterns.
//
// Re-seeding (DESIGN D9): the request's tagged Reseed (tag 1) asks the server
// to re-seed destination topics whose log diverged from the source's (stock
// Kafka cannot truncate a log): the divergent records are copied to
// <topic>.diverged-<timestamp>, the copy is verified, and the destination
// topic is deleted, re-created and mirrored from the source's log start. The
// response's tagged Reseeded (tag 0) reports every copy made. Old clients
// send neither tag; old servers skip the request's unknown tag 1 and start
// nothing that diverged.
//
//	{
//	  "apiKey": 1004,
//	  "type": "request",
//	  "name": "StartMirrorTopicsRequest",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "MirrorName", "type": "string", "versions": "0+", "entityType": "mirrorName",
//	      "about": "The cluster mirror name." },
//	    { "name": "Topics", "type": "[]TopicData", "versions": "0+",
//	      "about": "The data for the topics.", "fields": [
//	      { "name": "TopicId", "type": "uuid", "versions": "0+",
//	        "about": "The unique topic ID." },
//	      { "name": "TopicName", "type": "string", "versions": "0+", "mapKey": true, "entityType": "topicName",
//	        "about": "The topic name." },
//	      { "name": "NumPartitions", "type": "int32", "versions": "0+",
//	        "about": "The number of partitions for the topic. Must match the source topic." }
//	    ]},
//	    { "name": "IncludePatterns", "type": "[]string", "versions": "0+",
//	      "about": "Regex patterns to add to mirror.topics.include." },
//	    { "name": "ExcludePatterns", "type": "[]string", "versions": "0+",
//	      "about": "Regex patterns to add to mirror.topics.exclude." },
//	    { "name": "TopicPatterns", "type": "[]string", "versions": "0+",
//	      "taggedVersions": "0+", "tag": 0,
//	      "about": "Topic names or regexes to expand against the source topics and start." },
//	    { "name": "Reseed", "type": "bool", "versions": "0+", "default": "false",
//	      "taggedVersions": "0+", "tag": 1,
//	      "about": "Re-seed diverged destination topics: copy the divergent records to <topic>.diverged-<timestamp>, then re-create and re-mirror the topic." }
//	  ]
//	}
//
//	{
//	  "apiKey": 1004,
//	  "type": "response",
//	  "name": "StartMirrorTopicsResponse",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+" },
//	    { "name": "ErrorCode", "type": "int16", "versions": "0+" },
//	    { "name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null",
//	      "about": "The top-level error message, or null if there was no error." },
//	    { "name": "MirrorName", "type": "string", "versions": "0+", "entityType": "mirrorName" },
//	    { "name": "Topics", "type": "[]TopicResult", "versions": "0+",
//	      "about": "The results for the topics.", "fields": [
//	      { "name": "Name", "type": "string", "versions": "0+", "entityType": "topicName" },
//	      { "name": "ErrorCode", "type": "int16", "versions": "0+" },
//	      { "name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+",
//	        "default": "null", "taggedVersions": "0+", "tag": 0,
//	        "about": "The topic's error message, or null if there was no error." }
//	    ]},
//	    { "name": "Reseeded", "type": "[]ReseededTopic", "versions": "0+",
//	      "taggedVersions": "0+", "tag": 0,
//	      "about": "The divergent records copied before re-seeding, per topic.", "fields": [
//	      { "name": "Name", "type": "string", "versions": "0+", "entityType": "topicName" },
//	      { "name": "CopyTopic", "type": "string", "versions": "0+", "entityType": "topicName",
//	        "about": "The topic the divergent records were copied to." },
//	      { "name": "Partitions", "type": "[]ReseededPartition", "versions": "0+", "fields": [
//	        { "name": "Partition", "type": "int32", "versions": "0+" },
//	        { "name": "FirstOffset", "type": "int64", "versions": "0+",
//	          "about": "The first offset copied: where the logs part." },
//	        { "name": "EndOffset", "type": "int64", "versions": "0+",
//	          "about": "The destination's log end offset: offsets up to it were copied." },
//	        { "name": "Records", "type": "int64", "versions": "0+",
//	          "about": "The records copied (and verified in the copy)." }
//	      ]}
//	    ]}
//	  ]
//	}

// StartMirrorTopicsRequest starts mirroring topics.
type StartMirrorTopicsRequest struct {
	versioned
	MirrorName      string                 `json:"mirrorName"`
	Topics          []StartMirrorTopicData `json:"topics"`
	IncludePatterns []string               `json:"includePatterns"`
	ExcludePatterns []string               `json:"excludePatterns"`
	TopicPatterns   []string               `json:"topicPatterns"` // tag 0
	Reseed          bool                   `json:"reseed"`        // tag 1
}

// StartMirrorTopicData is one topic to start, resolved by the caller.
type StartMirrorTopicData struct {
	TopicId       [16]byte `json:"topicId"`
	TopicName     string   `json:"topicName"`
	NumPartitions int32    `json:"numPartitions"`
}

func (t *StartMirrorTopicData) appendTo(dst []byte) []byte {
	dst = kbin.AppendUuid(dst, t.TopicId)
	dst = kbin.AppendCompactString(dst, t.TopicName)
	dst = kbin.AppendInt32(dst, t.NumPartitions)
	return appendNoTags(dst)
}

func (t *StartMirrorTopicData) readFrom(d *decoder) {
	t.TopicId = d.uuid()
	t.TopicName = d.string()
	t.NumPartitions = d.int32()
	d.tags(nil)
}

// Key returns KeyStartMirrorTopics.
func (*StartMirrorTopicsRequest) Key() int16 { return KeyStartMirrorTopics }

// ResponseKind returns an empty StartMirrorTopicsResponse.
func (v *StartMirrorTopicsRequest) ResponseKind() Response {
	return &StartMirrorTopicsResponse{versioned: v.versioned}
}

// AppendTo appends the request body.
func (v *StartMirrorTopicsRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, v.MirrorName)
	dst = appendArray(dst, v.Topics)
	dst = appendStrings(dst, v.IncludePatterns)
	dst = appendStrings(dst, v.ExcludePatterns)
	var tw tagWriter
	if len(v.TopicPatterns) > 0 {
		tw.add(0, appendStrings(nil, v.TopicPatterns))
	}
	if v.Reseed {
		tw.add(1, kbin.AppendBool(nil, true))
	}
	return tw.appendTo(dst)
}

// ReadFrom decodes a request body.
func (v *StartMirrorTopicsRequest) ReadFrom(src []byte) error {
	*v = StartMirrorTopicsRequest{versioned: v.versioned}
	d := newRequestDecoder(src)
	v.MirrorName = d.string()
	v.Topics = readArray[StartMirrorTopicData](d)
	v.IncludePatterns = d.strings()
	v.ExcludePatterns = d.strings()
	d.tags(func(tag uint32, f *decoder) bool {
		switch tag {
		case 0:
			v.TopicPatterns = f.strings()
		case 1:
			v.Reseed = f.bool()
		default:
			return false
		}
		return true
	})
	return d.finish()
}

// StartMirrorTopicsResponse answers StartMirrorTopicsRequest.
type StartMirrorTopicsResponse struct {
	versioned
	ThrottleTimeMs int32               `json:"throttleTimeMs"`
	ErrorCode      int16               `json:"errorCode"`
	ErrorMessage   *string             `json:"errorMessage"`
	MirrorName     string              `json:"mirrorName"`
	Topics         []MirrorTopicResult `json:"topics"`
	Reseeded       []ReseededTopic     `json:"reseeded"` // tag 0
}

// ReseededTopic reports the divergent records of one topic copied before it
// was re-seeded.
type ReseededTopic struct {
	Name       string              `json:"name"`
	CopyTopic  string              `json:"copyTopic"`
	Partitions []ReseededPartition `json:"partitions"`
}

// ReseededPartition reports the records of one diverged partition copied:
// offsets FirstOffset up to EndOffset (exclusive), Records of them (fewer
// than the offsets where compaction or transaction markers left holes).
type ReseededPartition struct {
	Partition   int32 `json:"partition"`
	FirstOffset int64 `json:"firstOffset"`
	EndOffset   int64 `json:"endOffset"`
	Records     int64 `json:"records"`
}

func (t *ReseededTopic) appendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, t.Name)
	dst = kbin.AppendCompactString(dst, t.CopyTopic)
	dst = appendArray(dst, t.Partitions)
	return appendNoTags(dst)
}

func (t *ReseededTopic) readFrom(d *decoder) {
	t.Name = d.string()
	t.CopyTopic = d.string()
	t.Partitions = readArray[ReseededPartition](d)
	d.tags(nil)
}

func (p *ReseededPartition) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, p.Partition)
	dst = kbin.AppendInt64(dst, p.FirstOffset)
	dst = kbin.AppendInt64(dst, p.EndOffset)
	dst = kbin.AppendInt64(dst, p.Records)
	return appendNoTags(dst)
}

func (p *ReseededPartition) readFrom(d *decoder) {
	p.Partition = d.int32()
	p.FirstOffset = d.int64()
	p.EndOffset = d.int64()
	p.Records = d.int64()
	d.tags(nil)
}

// Key returns KeyStartMirrorTopics.
func (*StartMirrorTopicsResponse) Key() int16 { return KeyStartMirrorTopics }

// AppendTo appends the response body.
func (v *StartMirrorTopicsResponse) AppendTo(dst []byte) []byte {
	dst = appendStatus(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage)
	dst = kbin.AppendCompactString(dst, v.MirrorName)
	dst = appendArray(dst, v.Topics)
	var tw tagWriter
	if len(v.Reseeded) > 0 {
		tw.add(0, appendArray(nil, v.Reseeded))
	}
	return tw.appendTo(dst)
}

// ReadFrom decodes a response body.
func (v *StartMirrorTopicsResponse) ReadFrom(src []byte) error {
	*v = StartMirrorTopicsResponse{versioned: v.versioned}
	d := newDecoder(src)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage = d.status()
	v.MirrorName = d.string()
	v.Topics = readArray[MirrorTopicResult](d)
	d.tags(func(tag uint32, f *decoder) bool {
		if tag != 0 {
			return false
		}
		v.Reseeded = readArray[ReseededTopic](f)
		return true
	})
	return d.finish()
}

// MirrorTopicResult is one topic's outcome in the responses of Start, Stop,
// Pause and ResumeMirrorTopics (the KIP's TopicResult).
type MirrorTopicResult struct {
	Name         string  `json:"name"`
	ErrorCode    int16   `json:"errorCode"`
	ErrorMessage *string `json:"errorMessage"` // tag 0
}

func (r *MirrorTopicResult) appendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, r.Name)
	dst = kbin.AppendInt16(dst, r.ErrorCode)
	var tw tagWriter
	if r.ErrorMessage != nil {
		tw.add(0, kbin.AppendCompactNullableString(nil, r.ErrorMessage))
	}
	return tw.appendTo(dst)
}

func (r *MirrorTopicResult) readFrom(d *decoder) {
	r.Name = d.string()
	r.ErrorCode = d.int16()
	d.tags(func(tag uint32, f *decoder) bool {
		if tag != 0 {
			return false
		}
		r.ErrorMessage = f.nullableString()
		return true
	})
}

// appendTopicPatternsTag appends a tagged-field section holding
// TopicPatterns as tag 0 when it is not empty.
func appendTopicPatternsTag(dst []byte, patterns []string) []byte {
	var tw tagWriter
	if len(patterns) > 0 {
		tw.add(0, appendStrings(nil, patterns))
	}
	return tw.appendTo(dst)
}

// topicPatternsTag reads what appendTopicPatternsTag appends.
func (d *decoder) topicPatternsTag() []string {
	var patterns []string
	d.tags(func(tag uint32, f *decoder) bool {
		if tag != 0 {
			return false
		}
		patterns = f.strings()
		return true
	})
	return patterns
}

// appendTopicsRequest appends the request body that PauseMirrorTopics,
// ResumeMirrorTopics and RecoverMirrorTopics share: a mirror name, its
// topics and the tagged TopicPatterns (tag 0).
func appendTopicsRequest(dst []byte, mirrorName string, topics []MirrorTopicData, patterns []string) []byte {
	dst = kbin.AppendCompactString(dst, mirrorName)
	dst = appendArray(dst, topics)
	return appendTopicPatternsTag(dst, patterns)
}

// readTopicsRequest decodes the body appendTopicsRequest appends, bounded
// by MaxRequestElements as every request is.
func readTopicsRequest(src []byte) (mirrorName string, topics []MirrorTopicData, patterns []string, err error) {
	d := newRequestDecoder(src)
	mirrorName = d.string()
	topics = readArray[MirrorTopicData](d)
	patterns = d.topicPatternsTag()
	return mirrorName, topics, patterns, d.finish()
}

// appendTopicsResponse appends the body shared by the responses of Start,
// Stop, Pause, Resume and RecoverMirrorTopics.
func appendTopicsResponse(dst []byte, throttleTimeMs int32, errorCode int16, errorMessage *string,
	mirrorName string, topics []MirrorTopicResult,
) []byte {
	dst = appendStatus(dst, throttleTimeMs, errorCode, errorMessage)
	dst = kbin.AppendCompactString(dst, mirrorName)
	dst = appendArray(dst, topics)
	return appendNoTags(dst)
}

// topicsResponse reads what appendTopicsResponse appends.
func (d *decoder) topicsResponse() (throttleTimeMs int32, errorCode int16, errorMessage *string,
	mirrorName string, topics []MirrorTopicResult,
) {
	throttleTimeMs, errorCode, errorMessage = d.status()
	mirrorName = d.string()
	topics = readArray[MirrorTopicResult](d)
	d.tags(nil)
	return throttleTimeMs, errorCode, errorMessage, mirrorName, topics
}
