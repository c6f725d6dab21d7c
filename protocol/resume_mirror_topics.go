package protocol

// ResumeMirrorTopics (key 1007): resume paused topics from where they
// stopped, without truncation (KIP-1279).
//
// sidemirror extensions: the request's tagged TopicPatterns (tag 0) holds
// names or regexes that the server expands against the mirror's topics; each
// TopicResult carries a tagged ErrorMessage (tag 0). The CLI's --resume sends
// --topics as TopicPatterns.
//
//	{
//	  "apiKey": 1007,
//	  "type": "request",
//	  "name": "ResumeMirrorTopicsRequest",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "MirrorName", "type": "string", "versions": "0+", "entityType": "mirrorName",
//	      "about": "The cluster mirror name to resume the topics for." },
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
//	  "apiKey": 1007,
//	  "type": "response",
//	  "name": "ResumeMirrorTopicsResponse",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    (the same fields as StartMirrorTopicsResponse)
//	  ]
//	}

// ResumeMirrorTopicsRequest resumes mirroring of topics.
type ResumeMirrorTopicsRequest struct {
	versioned
	MirrorName    string            `json:"mirrorName"`
	Topics        []MirrorTopicData `json:"topics"`
	TopicPatterns []string          `json:"topicPatterns"` // tag 0
}

// Key returns KeyResumeMirrorTopics.
func (*ResumeMirrorTopicsRequest) Key() int16 { return KeyResumeMirrorTopics }

// ResponseKind returns an empty ResumeMirrorTopicsResponse.
func (v *ResumeMirrorTopicsRequest) ResponseKind() Response {
	return &ResumeMirrorTopicsResponse{versioned: v.versioned}
}

// AppendTo appends the request body.
func (v *ResumeMirrorTopicsRequest) AppendTo(dst []byte) []byte {
	return appendTopicsRequest(dst, v.MirrorName, v.Topics, v.TopicPatterns)
}

// ReadFrom decodes a request body.
func (v *ResumeMirrorTopicsRequest) ReadFrom(src []byte) error {
	*v = ResumeMirrorTopicsRequest{versioned: v.versioned}
	var err error
	v.MirrorName, v.Topics, v.TopicPatterns, err = readTopicsRequest(src)
	return err
}

// ResumeMirrorTopicsResponse answers ResumeMirrorTopicsRequest.
type ResumeMirrorTopicsResponse struct {
	versioned
	ThrottleTimeMs int32               `json:"throttleTimeMs"`
	ErrorCode      int16               `json:"errorCode"`
	ErrorMessage   *string             `json:"errorMessage"`
	MirrorName     string              `json:"mirrorName"`
	Topics         []MirrorTopicResult `json:"topics"`
}

// Key returns KeyResumeMirrorTopics.
func (*ResumeMirrorTopicsResponse) Key() int16 { return KeyResumeMirrorTopics }

// AppendTo appends the response body.
func (v *ResumeMirrorTopicsResponse) AppendTo(dst []byte) []byte {
	return appendTopicsResponse(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage, v.MirrorName, v.Topics)
}

// ReadFrom decodes a response body.
func (v *ResumeMirrorTopicsResponse) ReadFrom(src []byte) error {
	*v = ResumeMirrorTopicsResponse{versioned: v.versioned}
	d := newDecoder(src)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage, v.MirrorName, v.Topics = d.topicsResponse()
	return d.finish()
}
