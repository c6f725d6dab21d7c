package protocol

import "github.com/twmb/franz-go/pkg/kbin"

// DeleteClusterMirror (key 1001): delete a mirror and its configuration for
// good. The mirror must be empty or have all its partitions STOPPED
// (KIP-1279).
//
//	{
//	  "apiKey": 1001,
//	  "type": "request",
//	  "name": "DeleteClusterMirrorRequest",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "MirrorName", "type": "string", "versions": "0+", "entityType": "mirrorName",
//	      "about": "The cluster mirror name to delete." }
//	  ]
//	}
//
//	{
//	  "apiKey": 1001,
//	  "type": "response",
//	  "name": "DeleteClusterMirrorResponse",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+" },
//	    { "name": "ErrorCode", "type": "int16", "versions": "0+" },
//	    { "name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null" }
//	  ]
//	}

// DeleteClusterMirrorRequest deletes a mirror.
type DeleteClusterMirrorRequest struct {
	versioned
	MirrorName string `json:"mirrorName"`
}

// Key returns KeyDeleteClusterMirror.
func (*DeleteClusterMirrorRequest) Key() int16 { return KeyDeleteClusterMirror }

// ResponseKind returns an empty DeleteClusterMirrorResponse.
func (v *DeleteClusterMirrorRequest) ResponseKind() Response {
	return &DeleteClusterMirrorResponse{versioned: v.versioned}
}

// AppendTo appends the request body.
func (v *DeleteClusterMirrorRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, v.MirrorName)
	return appendNoTags(dst)
}

// ReadFrom decodes a request body.
func (v *DeleteClusterMirrorRequest) ReadFrom(src []byte) error {
	*v = DeleteClusterMirrorRequest{versioned: v.versioned}
	d := newRequestDecoder(src)
	v.MirrorName = d.string()
	d.tags(nil)
	return d.finish()
}

// DeleteClusterMirrorResponse answers DeleteClusterMirrorRequest.
type DeleteClusterMirrorResponse struct {
	versioned
	ThrottleTimeMs int32   `json:"throttleTimeMs"`
	ErrorCode      int16   `json:"errorCode"`
	ErrorMessage   *string `json:"errorMessage"`
}

// Key returns KeyDeleteClusterMirror.
func (*DeleteClusterMirrorResponse) Key() int16 { return KeyDeleteClusterMirror }

// AppendTo appends the response body.
func (v *DeleteClusterMirrorResponse) AppendTo(dst []byte) []byte {
	dst = appendStatus(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage)
	return appendNoTags(dst)
}

// ReadFrom decodes a response body.
func (v *DeleteClusterMirrorResponse) ReadFrom(src []byte) error {
	*v = DeleteClusterMirrorResponse{versioned: v.versioned}
	d := newDecoder(src)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage = d.status()
	d.tags(nil)
	return d.finish()
}
