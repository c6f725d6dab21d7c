package protocol

import "github.com/twmb/franz-go/pkg/kbin"

// CreateClusterMirror (key 1000): create a mirror and store its
// configuration (KIP-1279).
//
//	{
//	  "apiKey": 1000,
//	  "type": "request",
//	  "name": "CreateClusterMirrorRequest",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "MirrorName", "type": "string", "versions": "0+", "entityType": "mirrorName",
//	      "about": "The cluster mirror name." },
//	    { "name": "Config", "type": "[]ClusterMirrorConfig", "versions": "0+",
//	      "about": "The cluster mirror configurations.", "fields": [
//	      { "name": "Name", "type": "string", "versions": "0+", "mapKey": true,
//	        "about": "The configuration key name." },
//	      { "name": "Value", "type": "string", "versions": "0+", "nullableVersions": "0+",
//	        "about": "The value to set for the configuration key." }
//	    ]}
//	  ]
//	}
//
//	{
//	  "apiKey": 1000,
//	  "type": "response",
//	  "name": "CreateClusterMirrorResponse",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+",
//	      "about": "The duration in milliseconds for which the request was throttled due to a quota violation, or zero if the request did not violate any quota." },
//	    { "name": "ErrorCode", "type": "int16", "versions": "0+",
//	      "about": "The error code, or 0 if there was no error." },
//	    { "name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null",
//	      "about": "The error message, or null if there was no error." }
//	  ]
//	}

// CreateClusterMirrorRequest creates a mirror.
type CreateClusterMirrorRequest struct {
	versioned
	MirrorName string                `json:"mirrorName"`
	Config     []ClusterMirrorConfig `json:"config"`
}

// ClusterMirrorConfig is one configuration entry of a mirror. It is also
// used by DescribedMirror.Configs, where secret values come redacted.
type ClusterMirrorConfig struct {
	Name  string  `json:"name"`
	Value *string `json:"value"`
}

func (c *ClusterMirrorConfig) appendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, c.Name)
	dst = kbin.AppendCompactNullableString(dst, c.Value)
	return appendNoTags(dst)
}

func (c *ClusterMirrorConfig) readFrom(d *decoder) {
	c.Name = d.string()
	c.Value = d.nullableString()
	d.tags(nil)
}

// Key returns KeyCreateClusterMirror.
func (*CreateClusterMirrorRequest) Key() int16 { return KeyCreateClusterMirror }

// ResponseKind returns an empty CreateClusterMirrorResponse.
func (v *CreateClusterMirrorRequest) ResponseKind() Response {
	return &CreateClusterMirrorResponse{versioned: v.versioned}
}

// AppendTo appends the request body.
func (v *CreateClusterMirrorRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, v.MirrorName)
	dst = appendArray(dst, v.Config)
	return appendNoTags(dst)
}

// ReadFrom decodes a request body.
func (v *CreateClusterMirrorRequest) ReadFrom(src []byte) error {
	*v = CreateClusterMirrorRequest{versioned: v.versioned}
	d := newRequestDecoder(src)
	v.MirrorName = d.string()
	v.Config = readArray[ClusterMirrorConfig](d)
	d.tags(nil)
	return d.finish()
}

// CreateClusterMirrorResponse answers CreateClusterMirrorRequest.
type CreateClusterMirrorResponse struct {
	versioned
	ThrottleTimeMs int32   `json:"throttleTimeMs"`
	ErrorCode      int16   `json:"errorCode"`
	ErrorMessage   *string `json:"errorMessage"`
}

// Key returns KeyCreateClusterMirror.
func (*CreateClusterMirrorResponse) Key() int16 { return KeyCreateClusterMirror }

// AppendTo appends the response body.
func (v *CreateClusterMirrorResponse) AppendTo(dst []byte) []byte {
	dst = appendStatus(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage)
	return appendNoTags(dst)
}

// ReadFrom decodes a response body.
func (v *CreateClusterMirrorResponse) ReadFrom(src []byte) error {
	*v = CreateClusterMirrorResponse{versioned: v.versioned}
	d := newDecoder(src)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage = d.status()
	d.tags(nil)
	return d.finish()
}
