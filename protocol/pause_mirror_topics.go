package protocol

// PauseMirrorTopics (key 1006): pause mirroring topics; they stay read-only
// and their metadata sync stops (KIP-1279). The KIP's request has no
// patterns.
//
// sidemirror extensions: the request's tagged TopicPatterns (tag 0) holds
// names or regexes that the server expands against the mirror's topics; each
// TopicResult carries a tagged ErrorMessage (tag 0). The CLI's --pause sends
// --topics as TopicPatterns.
//
//	{
//	  "apiKey": 1006,
//	  "type": "request",
//	  "name": "PauseMirrorTopicsRequest",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "MirrorName", "type": "string", "versions": "0+", "entityType": "mirrorName",
//	      "about": "The cluster mirror name to pause the topics for." },
//	    { "name": "Topics", "type": "[]TopicData", "versions": "0+",
//	      "about": "The data for the topics.", "fields": [
//	      { "name": "TopicId", "type": "uuid", "versions": "0+",
//	        "about": "The unique topic ID." },
//	      { "name": "TopicName", "type": "string", "versions": "0+", "mapKey": true, "entityType": "topicName",
//	        "about": "The topic name." }
//	    ]},
//	    { "name": "TopicPatterns", "type": "[]string", "versions": "0+",
//	      "taggedVersions": "0+", "tag": 0,
//	      "about": "Topic names or regexes to expand against the mirror's topics." }
//	  ]
//	}
//
//	{
//	  "apiKey": 1006,
//	  "type": "response",
//	  "name": "PauseMirrorTopicsResponse",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    (the same fields as StartMirrorTopicsResponse)
//	  ]
//	}

// PauseMirrorTopicsRequest pauses mirroring of topics.
type PauseMirrorTopicsRequest struct {
	versioned
	MirrorName    string            `json:"mirrorName"`
	Topics        []MirrorTopicData `json:"topics"`
	TopicPatterns []string          `json:"topicPatterns"` // tag 0
}

// Key returns KeyPauseMirrorTopics.
func (*PauseMirrorTopicsRequest) Key() int16 { return KeyPauseMirrorTopics }

// ResponseKind returns an empty PauseMirrorTopicsResponse.
func (v *PauseMirrorTopicsRequest) ResponseKind() Response {
	return &PauseMirrorTopicsResponse{versioned: v.versioned}
}

// AppendTo appends the request body.
func (v *PauseMirrorTopicsRequest) AppendTo(dst []byte) []byte {
	return appendTopicsRequest(dst, v.MirrorName, v.Topics, v.TopicPatterns)
}

// ReadFrom decodes a request body.
func (v *PauseMirrorTopicsRequest) ReadFrom(src []byte) error {
	*v = PauseMirrorTopicsRequest{versioned: v.versioned}
	var err error
	v.MirrorName, v.Topics, v.TopicPatterns, err = readTopicsRequest(src)
	return err
}

// PauseMirrorTopicsResponse answers PauseMirrorTopicsRequest.
type PauseMirrorTopicsResponse struct {
	versioned
	ThrottleTimeMs int32               `json:"throttleTimeMs"`
	ErrorCode      int16               `json:"errorCode"`
	ErrorMessage   *string             `json:"errorMessage"`
	MirrorName     string              `json:"mirrorName"`
	Topics         []MirrorTopicResult `json:"topics"`
}

// Key returns KeyPauseMirrorTopics.
func (*PauseMirrorTopicsResponse) Key() int16 { return KeyPauseMirrorTopics }

// AppendTo appends the response body.
func (v *PauseMirrorTopicsResponse) AppendTo(dst []byte) []byte {
	return appendTopicsResponse(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage, v.MirrorName, v.Topics)
}

// ReadFrom decodes a response body.
func (v *PauseMirrorTopicsResponse) ReadFrom(src []byte) error {
	*v = PauseMirrorTopicsResponse{versioned: v.versioned}
	d := newDecoder(src)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage, v.MirrorName, v.Topics = d.topicsResponse()
	return d.finish()
}
