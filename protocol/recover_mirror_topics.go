package protocol

// RecoverMirrorTopics (key 1015, sidemirror only): restart the FAILED
// partitions of mirror topics, with new automatic retries. KIP-1279 says
// FAILED partitions are recovered "through the CLI or the Admin API" but
// defines no RPC for it; the CLI's --recover sends this one. The request
// and response have the shape of ResumeMirrorTopics: the server expands
// TopicPatterns (tag 0) against the mirror's topics, and reports a
// TopicResult for every topic it restarted or could not restart.
//
//	{
//	  "apiKey": 1015,
//	  "type": "request",
//	  "name": "RecoverMirrorTopicsRequest",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "MirrorName", "type": "string", "versions": "0+", "entityType": "mirrorName",
//	      "about": "The cluster mirror whose topics to recover." },
//	    { "name": "Topics", "type": "[]TopicData", "versions": "0+",
//	      "about": "The topics, by name.", "fields": [
//	      { "name": "TopicId", "type": "uuid", "versions": "0+" },
//	      { "name": "TopicName", "type": "string", "versions": "0+", "mapKey": true, "entityType": "topicName" }
//	    ]},
//	    { "name": "TopicPatterns", "type": "[]string", "versions": "0+",
//	      "taggedVersions": "0+", "tag": 0,
//	      "about": "Topic names or regexes to expand against the mirror's topics." }
//	  ]
//	}
//
//	{
//	  "apiKey": 1015,
//	  "type": "response",
//	  "name": "RecoverMirrorTopicsResponse",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    (the same fields as StartMirrorTopicsResponse)
//	  ]
//	}

// RecoverMirrorTopicsRequest restarts the FAILED partitions of topics.
type RecoverMirrorTopicsRequest struct {
	versioned
	MirrorName    string            `json:"mirrorName"`
	Topics        []MirrorTopicData `json:"topics"`
	TopicPatterns []string          `json:"topicPatterns"` // tag 0
}

// Key returns KeyRecoverMirrorTopics.
func (*RecoverMirrorTopicsRequest) Key() int16 { return KeyRecoverMirrorTopics }

// ResponseKind returns an empty RecoverMirrorTopicsResponse.
func (v *RecoverMirrorTopicsRequest) ResponseKind() Response {
	return &RecoverMirrorTopicsResponse{versioned: v.versioned}
}

// AppendTo appends the request body.
func (v *RecoverMirrorTopicsRequest) AppendTo(dst []byte) []byte {
	return appendTopicsRequest(dst, v.MirrorName, v.Topics, v.TopicPatterns)
}

// ReadFrom decodes a request body.
func (v *RecoverMirrorTopicsRequest) ReadFrom(src []byte) error {
	*v = RecoverMirrorTopicsRequest{versioned: v.versioned}
	var err error
	v.MirrorName, v.Topics, v.TopicPatterns, err = readTopicsRequest(src)
	return err
}

// RecoverMirrorTopicsResponse answers RecoverMirrorTopicsRequest.
type RecoverMirrorTopicsResponse struct {
	versioned
	ThrottleTimeMs int32               `json:"throttleTimeMs"`
	ErrorCode      int16               `json:"errorCode"`
	ErrorMessage   *string             `json:"errorMessage"`
	MirrorName     string              `json:"mirrorName"`
	Topics         []MirrorTopicResult `json:"topics"`
}

// Key returns KeyRecoverMirrorTopics.
func (*RecoverMirrorTopicsResponse) Key() int16 { return KeyRecoverMirrorTopics }

// AppendTo appends the response body.
func (v *RecoverMirrorTopicsResponse) AppendTo(dst []byte) []byte {
	return appendTopicsResponse(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage, v.MirrorName, v.Topics)
}

// ReadFrom decodes a response body.
func (v *RecoverMirrorTopicsResponse) ReadFrom(src []byte) error {
	*v = RecoverMirrorTopicsResponse{versioned: v.versioned}
	d := newDecoder(src)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage, v.MirrorName, v.Topics = d.topicsResponse()
	return d.finish()
}
