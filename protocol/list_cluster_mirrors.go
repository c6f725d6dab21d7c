package protocol

import "github.com/twmb/franz-go/pkg/kbin"

// ListClusterMirrors (key 1002): list the mirrors the caller may see, with
// their source and topic count (KIP-1279).
//
//	{
//	  "apiKey": 1002,
//	  "type": "request",
//	  "name": "ListClusterMirrorsRequest",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": []
//	}
//
//	{
//	  "apiKey": 1002,
//	  "type": "response",
//	  "name": "ListClusterMirrorsResponse",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+" },
//	    { "name": "ErrorCode", "type": "int16", "versions": "0+" },
//	    { "name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null",
//	      "about": "The top-level error message, or null if there was no error." },
//	    { "name": "Mirrors", "type": "[]ListedMirror", "versions": "0+",
//	      "about": "Each mirror in the response.", "fields": [
//	      { "name": "MirrorName", "type": "string", "versions": "0+", "entityType": "mirrorName",
//	        "about": "The cluster mirror name." },
//	      { "name": "SourceBootstrap", "type": "string", "versions": "0+",
//	        "about": "The source cluster bootstrap servers." },
//	      { "name": "SourceClusterId", "type": "string", "versions": "0+", "default": "",
//	        "about": "The source cluster ID, or empty if not yet resolved." },
//	      { "name": "TopicCount", "type": "int32", "versions": "0+", "default": "0",
//	        "about": "The number of topics configured for this mirror. 0 indicates an empty mirror with no topics." }
//	    ]}
//	  ]
//	}

// ListClusterMirrorsRequest lists mirrors; it has no fields.
type ListClusterMirrorsRequest struct {
	versioned
}

// Key returns KeyListClusterMirrors.
func (*ListClusterMirrorsRequest) Key() int16 { return KeyListClusterMirrors }

// ResponseKind returns an empty ListClusterMirrorsResponse.
func (v *ListClusterMirrorsRequest) ResponseKind() Response {
	return &ListClusterMirrorsResponse{versioned: v.versioned}
}

// AppendTo appends the request body.
func (v *ListClusterMirrorsRequest) AppendTo(dst []byte) []byte { return appendNoTags(dst) }

// ReadFrom decodes a request body.
func (v *ListClusterMirrorsRequest) ReadFrom(src []byte) error {
	d := newRequestDecoder(src)
	d.tags(nil)
	return d.finish()
}

// ListClusterMirrorsResponse answers ListClusterMirrorsRequest.
type ListClusterMirrorsResponse struct {
	versioned
	ThrottleTimeMs int32          `json:"throttleTimeMs"`
	ErrorCode      int16          `json:"errorCode"`
	ErrorMessage   *string        `json:"errorMessage"`
	Mirrors        []ListedMirror `json:"mirrors"`
}

// ListedMirror is one mirror in ListClusterMirrorsResponse.
type ListedMirror struct {
	MirrorName      string `json:"mirrorName"`
	SourceBootstrap string `json:"sourceBootstrap"`
	SourceClusterId string `json:"sourceClusterId"` // empty if not yet resolved
	TopicCount      int32  `json:"topicCount"`
}

func (m *ListedMirror) appendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, m.MirrorName)
	dst = kbin.AppendCompactString(dst, m.SourceBootstrap)
	dst = kbin.AppendCompactString(dst, m.SourceClusterId)
	dst = kbin.AppendInt32(dst, m.TopicCount)
	return appendNoTags(dst)
}

func (m *ListedMirror) readFrom(d *decoder) {
	m.MirrorName = d.string()
	m.SourceBootstrap = d.string()
	m.SourceClusterId = d.string()
	m.TopicCount = d.int32()
	d.tags(nil)
}

// Key returns KeyListClusterMirrors.
func (*ListClusterMirrorsResponse) Key() int16 { return KeyListClusterMirrors }

// AppendTo appends the response body.
func (v *ListClusterMirrorsResponse) AppendTo(dst []byte) []byte {
	dst = appendStatus(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage)
	dst = appendArray(dst, v.Mirrors)
	return appendNoTags(dst)
}

// ReadFrom decodes a response body.
func (v *ListClusterMirrorsResponse) ReadFrom(src []byte) error {
	*v = ListClusterMirrorsResponse{versioned: v.versioned}
	d := newDecoder(src)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage = d.status()
	v.Mirrors = readArray[ListedMirror](d)
	d.tags(nil)
	return d.finish()
}
