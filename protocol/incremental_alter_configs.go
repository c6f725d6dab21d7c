package protocol

import "github.com/twmb/franz-go/pkg/kbin"

// IncrementalAlterConfigs (key 44), Kafka's own schema, versions 0-1. The
// admin endpoint serves it for CLUSTER_MIRROR (64) resources, named after
// the mirror (KIP-1279 §4.9), so that a mirror's configuration can be
// changed as kafka-configs.sh --entity-type cluster-mirrors does, and for
// the throttle configs of BROKER (4) and TOPIC (2) resources (§4.12).
//
//	{
//	  "apiKey": 44,
//	  "type": "request",
//	  "name": "IncrementalAlterConfigsRequest",
//	  "validVersions": "0-1",
//	  "flexibleVersions": "1+",
//	  "fields": [
//	    { "name": "Resources", "type": "[]AlterConfigsResource", "versions": "0+",
//	      "about": "The incremental updates for each resource.", "fields": [
//	      { "name": "ResourceType", "type": "int8", "versions": "0+", "mapKey": true,
//	        "about": "The resource type." },
//	      { "name": "ResourceName", "type": "string", "versions": "0+", "mapKey": true,
//	        "about": "The resource name." },
//	      { "name": "Configs", "type": "[]AlterableConfig", "versions": "0+",
//	        "about": "The configurations.", "fields": [
//	        { "name": "Name", "type": "string", "versions": "0+", "mapKey": true,
//	          "about": "The configuration key name." },
//	        { "name": "ConfigOperation", "type": "int8", "versions": "0+", "mapKey": true,
//	          "about": "The type (Set, Delete, Append, Subtract) of operation." },
//	        { "name": "Value", "type": "string", "versions": "0+", "nullableVersions": "0+",
//	          "about": "The value to set for the configuration key." }
//	      ]}
//	    ]},
//	    { "name": "ValidateOnly", "type": "bool", "versions": "0+",
//	      "about": "True if we should validate the request, but not change the configurations." }
//	  ]
//	}
//
//	{
//	  "apiKey": 44,
//	  "type": "response",
//	  "name": "IncrementalAlterConfigsResponse",
//	  "validVersions": "0-1",
//	  "flexibleVersions": "1+",
//	  "fields": [
//	    { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+",
//	      "about": "Duration in milliseconds for which the request was throttled due to a quota violation, or zero if the request did not violate any quota." },
//	    { "name": "Responses", "type": "[]AlterConfigsResourceResponse", "versions": "0+",
//	      "about": "The responses for each resource.", "fields": [
//	      { "name": "ErrorCode", "type": "int16", "versions": "0+",
//	        "about": "The resource error code." },
//	      { "name": "ErrorMessage", "type": "string", "nullableVersions": "0+", "versions": "0+",
//	        "about": "The resource error message, or null if there was no error." },
//	      { "name": "ResourceType", "type": "int8", "versions": "0+",
//	        "about": "The resource type." },
//	      { "name": "ResourceName", "type": "string", "versions": "0+",
//	        "about": "The resource name." }
//	    ]}
//	  ]
//	}

// ResourceTypeClusterMirror is the config resource type of a mirror
// (KIP-1279's ConfigResource.Type.CLUSTER_MIRROR); the resource name is the
// mirror name.
const ResourceTypeClusterMirror int8 = 64

// ResourceTypeTopic and ResourceTypeBroker are Kafka's config resource
// types of a topic (named after it) and a broker (named by its ID). The
// admin endpoint serves them for the destination-side throttle configs of
// KIP-1279 §4.12 only (mirror.replication.throttled.replicas,
// mirror.replication.throttled.rate), which the sidecars keep.
const (
	ResourceTypeTopic  int8 = 2
	ResourceTypeBroker int8 = 4
)

// Config operations of IncrementalAlterConfigs (Kafka's OpType).
const (
	ConfigOpSet      int8 = 0 // set the key to the value
	ConfigOpDelete   int8 = 1 // remove the key (back to its default)
	ConfigOpAppend   int8 = 2 // add the value's entries to a list key
	ConfigOpSubtract int8 = 3 // remove the value's entries from a list key
)

// IncrementalAlterConfigsRequest changes configuration keys of resources.
type IncrementalAlterConfigsRequest struct {
	versioned
	Resources    []AlterConfigsResource `json:"resources"`
	ValidateOnly bool                   `json:"validateOnly"`
}

// AlterConfigsResource is one resource of an IncrementalAlterConfigsRequest.
type AlterConfigsResource struct {
	ResourceType int8              `json:"resourceType"`
	ResourceName string            `json:"resourceName"`
	Configs      []AlterableConfig `json:"configs"`
}

// AlterableConfig is one change of a configuration key.
type AlterableConfig struct {
	Name            string  `json:"name"`
	ConfigOperation int8    `json:"configOperation"` // ConfigOpSet, ...
	Value           *string `json:"value"`
}

// Key returns KeyIncrementalAlterConfigs.
func (*IncrementalAlterConfigsRequest) Key() int16 { return KeyIncrementalAlterConfigs }

// ResponseKind returns an empty IncrementalAlterConfigsResponse.
func (v *IncrementalAlterConfigsRequest) ResponseKind() Response {
	return &IncrementalAlterConfigsResponse{versioned: v.versioned}
}

func (v *IncrementalAlterConfigsRequest) flexible() bool { return v.version >= 1 }

// AppendTo appends the request body.
func (v *IncrementalAlterConfigsRequest) AppendTo(dst []byte) []byte {
	flex := v.flexible()
	dst = appendLen(dst, len(v.Resources), flex)
	for _, r := range v.Resources {
		dst = kbin.AppendInt8(dst, r.ResourceType)
		dst = appendStr(dst, r.ResourceName, flex)
		dst = appendLen(dst, len(r.Configs), flex)
		for _, c := range r.Configs {
			dst = appendStr(dst, c.Name, flex)
			dst = kbin.AppendInt8(dst, c.ConfigOperation)
			dst = appendNullableStr(dst, c.Value, flex)
			dst = appendTagsIf(dst, flex)
		}
		dst = appendTagsIf(dst, flex)
	}
	dst = kbin.AppendBool(dst, v.ValidateOnly)
	return appendTagsIf(dst, flex)
}

// ReadFrom decodes a request body.
func (v *IncrementalAlterConfigsRequest) ReadFrom(src []byte) error {
	*v = IncrementalAlterConfigsRequest{versioned: v.versioned}
	flex := v.flexible()
	d := newRequestDecoder(src)
	n := d.arrayLenV(flex)
	for i := 0; i < n && d.ok(); i++ {
		var r AlterConfigsResource
		r.ResourceType = d.int8()
		r.ResourceName = d.str(flex)
		nc := d.arrayLenV(flex)
		for j := 0; j < nc && d.ok(); j++ {
			var c AlterableConfig
			c.Name = d.str(flex)
			c.ConfigOperation = d.int8()
			c.Value = d.nullableStr(flex)
			d.tagsIf(flex)
			r.Configs = append(r.Configs, c)
		}
		d.tagsIf(flex)
		v.Resources = append(v.Resources, r)
	}
	v.ValidateOnly = d.bool()
	d.tagsIf(flex)
	return d.finish()
}

// IncrementalAlterConfigsResponse answers IncrementalAlterConfigsRequest
// with one entry per resource.
type IncrementalAlterConfigsResponse struct {
	versioned
	ThrottleTimeMs int32                          `json:"throttleTimeMs"`
	Responses      []AlterConfigsResourceResponse `json:"responses"`
}

// AlterConfigsResourceResponse is the outcome for one resource.
type AlterConfigsResourceResponse struct {
	ErrorCode    int16   `json:"errorCode"`
	ErrorMessage *string `json:"errorMessage"`
	ResourceType int8    `json:"resourceType"`
	ResourceName string  `json:"resourceName"`
}

// Key returns KeyIncrementalAlterConfigs.
func (*IncrementalAlterConfigsResponse) Key() int16 { return KeyIncrementalAlterConfigs }

func (v *IncrementalAlterConfigsResponse) flexible() bool { return v.version >= 1 }

// AppendTo appends the response body.
func (v *IncrementalAlterConfigsResponse) AppendTo(dst []byte) []byte {
	flex := v.flexible()
	dst = kbin.AppendInt32(dst, v.ThrottleTimeMs)
	dst = appendLen(dst, len(v.Responses), flex)
	for _, r := range v.Responses {
		dst = kbin.AppendInt16(dst, r.ErrorCode)
		dst = appendNullableStr(dst, r.ErrorMessage, flex)
		dst = kbin.AppendInt8(dst, r.ResourceType)
		dst = appendStr(dst, r.ResourceName, flex)
		dst = appendTagsIf(dst, flex)
	}
	return appendTagsIf(dst, flex)
}

// ReadFrom decodes a response body.
func (v *IncrementalAlterConfigsResponse) ReadFrom(src []byte) error {
	*v = IncrementalAlterConfigsResponse{versioned: v.versioned}
	flex := v.flexible()
	d := newDecoder(src)
	v.ThrottleTimeMs = d.int32()
	n := d.arrayLenV(flex)
	for i := 0; i < n && d.ok(); i++ {
		var r AlterConfigsResourceResponse
		r.ErrorCode = d.int16()
		r.ErrorMessage = d.nullableStr(flex)
		r.ResourceType = d.int8()
		r.ResourceName = d.str(flex)
		d.tagsIf(flex)
		v.Responses = append(v.Responses, r)
	}
	d.tagsIf(flex)
	return d.finish()
}
