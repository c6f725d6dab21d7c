package protocol

import "github.com/twmb/franz-go/pkg/kbin"

// StopMirrorTopics (key 1005): stop mirroring topics; they become writable
// (failover, KIP-1279). Patterns are removed from mirror.topics.include and
// added to mirror.topics.exclude.
//
// sidemirror extensions: the request's tagged TopicPatterns (tag 0) holds
// names or regexes that the server expands against the mirror's topics; each
// TopicResult carries a tagged ErrorMessage (tag 0). The CLI's --stop sends
// --topics as both TopicPatterns and Patterns.
//
//	{
//	  "apiKey": 1005,
//	  "type": "request",
//	  "name": "StopMirrorTopicsRequest",
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
//	        "about": "The topic name." }
//	    ]},
//	    { "name": "Patterns", "type": "[]string", "versions": "0+",
//	      "about": "Patterns to update in mirror.topics.include/exclude." },
//	    { "name": "TopicPatterns", "type": "[]string", "versions": "0+",
//	      "taggedVersions": "0+", "tag": 0,
//	      "about": "Topic names or regexes to expand against the mirror's topics and stop." }
//	  ]
//	}
//
//	{
//	  "apiKey": 1005,
//	  "type": "response",
//	  "name": "StopMirrorTopicsResponse",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    (the same fields as StartMirrorTopicsResponse)
//	  ]
//	}

// StopMirrorTopicsRequest stops mirroring topics.
type StopMirrorTopicsRequest struct {
	versioned
	MirrorName    string            `json:"mirrorName"`
	Topics        []MirrorTopicData `json:"topics"`
	Patterns      []string          `json:"patterns"`
	TopicPatterns []string          `json:"topicPatterns"` // tag 0
}

// MirrorTopicData names one topic of a mirror in the requests of Stop, Pause
// and ResumeMirrorTopics (the KIP's TopicData).
type MirrorTopicData struct {
	TopicId   [16]byte `json:"topicId"`
	TopicName string   `json:"topicName"`
}

func (t *MirrorTopicData) appendTo(dst []byte) []byte {
	dst = kbin.AppendUuid(dst, t.TopicId)
	dst = kbin.AppendCompactString(dst, t.TopicName)
	return appendNoTags(dst)
}

func (t *MirrorTopicData) readFrom(d *decoder) {
	t.TopicId = d.uuid()
	t.TopicName = d.string()
	d.tags(nil)
}

// Key returns KeyStopMirrorTopics.
func (*StopMirrorTopicsRequest) Key() int16 { return KeyStopMirrorTopics }

// ResponseKind returns an empty StopMirrorTopicsResponse.
func (v *StopMirrorTopicsRequest) ResponseKind() Response {
	return &StopMirrorTopicsResponse{versioned: v.versioned}
}

// AppendTo appends the request body.
func (v *StopMirrorTopicsRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, v.MirrorName)
	dst = appendArray(dst, v.Topics)
	dst = appendStrings(dst, v.Patterns)
	return appendTopicPatternsTag(dst, v.TopicPatterns)
}

// ReadFrom decodes a request body.
func (v *StopMirrorTopicsRequest) ReadFrom(src []byte) error {
	*v = StopMirrorTopicsRequest{versioned: v.versioned}
	d := newRequestDecoder(src)
	v.MirrorName = d.string()
	v.Topics = readArray[MirrorTopicData](d)
	v.Patterns = d.strings()
	v.TopicPatterns = d.topicPatternsTag()
	return d.finish()
}

// StopMirrorTopicsResponse answers StopMirrorTopicsRequest.
type StopMirrorTopicsResponse struct {
	versioned
	ThrottleTimeMs int32               `json:"throttleTimeMs"`
	ErrorCode      int16               `json:"errorCode"`
	ErrorMessage   *string             `json:"errorMessage"`
	MirrorName     string              `json:"mirrorName"`
	Topics         []MirrorTopicResult `json:"topics"`
}

// Key returns KeyStopMirrorTopics.
func (*StopMirrorTopicsResponse) Key() int16 { return KeyStopMirrorTopics }

// AppendTo appends the response body.
func (v *StopMirrorTopicsResponse) AppendTo(dst []byte) []byte {
	return appendTopicsResponse(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage, v.MirrorName, v.Topics)
}

// ReadFrom decodes a response body.
func (v *StopMirrorTopicsResponse) ReadFrom(src []byte) error {
	*v = StopMirrorTopicsResponse{versioned: v.versioned}
	d := newDecoder(src)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage, v.MirrorName, v.Topics = d.topicsResponse()
	return d.finish()
}
