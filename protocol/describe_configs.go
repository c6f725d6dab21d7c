package protocol

import "github.com/twmb/franz-go/pkg/kbin"

// DescribeConfigs (key 32), Kafka's own schema, versions 0-4. The admin
// endpoint serves it for CLUSTER_MIRROR (64) resources (KIP-1279 §4.9), and
// for the throttle configs of BROKER (4) and TOPIC (2) resources (§4.12).
// Version 0's IsDefault has no field of its own here: it is ConfigSource ==
// ConfigSourceDefault on the wire, and reads back as ConfigSourceDefault or
// -1 (unknown).
//
//	{
//	  "apiKey": 32,
//	  "type": "request",
//	  "name": "DescribeConfigsRequest",
//	  "validVersions": "0-4",
//	  "flexibleVersions": "4+",
//	  "fields": [
//	    { "name": "Resources", "type": "[]DescribeConfigsResource", "versions": "0+",
//	      "about": "The resources whose configurations we want to describe.", "fields": [
//	      { "name": "ResourceType", "type": "int8", "versions": "0+",
//	        "about": "The resource type." },
//	      { "name": "ResourceName", "type": "string", "versions": "0+",
//	        "about": "The resource name." },
//	      { "name": "ConfigurationKeys", "type": "[]string", "versions": "0+", "nullableVersions": "0+",
//	        "about": "The configuration keys to list, or null to list all configuration keys." }
//	    ]},
//	    { "name": "IncludeSynonyms", "type": "bool", "versions": "1+", "default": "false",
//	      "about": "True if we should include all synonyms." },
//	    { "name": "IncludeDocumentation", "type": "bool", "versions": "3+", "default": "false",
//	      "about": "True if we should include configuration documentation." }
//	  ]
//	}
//
//	{
//	  "apiKey": 32,
//	  "type": "response",
//	  "name": "DescribeConfigsResponse",
//	  "validVersions": "0-4",
//	  "flexibleVersions": "4+",
//	  "fields": [
//	    { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+",
//	      "about": "The duration in milliseconds for which the request was throttled due to a quota violation, or zero if the request did not violate any quota." },
//	    { "name": "Results", "type": "[]DescribeConfigsResult", "versions": "0+",
//	      "about": "The results for each resource.", "fields": [
//	      { "name": "ErrorCode", "type": "int16", "versions": "0+",
//	        "about": "The error code, or 0 if we were able to successfully describe the configurations." },
//	      { "name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+",
//	        "about": "The error message, or null if we were able to successfully describe the configurations." },
//	      { "name": "ResourceType", "type": "int8", "versions": "0+",
//	        "about": "The resource type." },
//	      { "name": "ResourceName", "type": "string", "versions": "0+",
//	        "about": "The resource name." },
//	      { "name": "Configs", "type": "[]DescribeConfigsResourceResult", "versions": "0+",
//	        "about": "Each listed configuration.", "fields": [
//	        { "name": "Name", "type": "string", "versions": "0+",
//	          "about": "The configuration name." },
//	        { "name": "Value", "type": "string", "versions": "0+", "nullableVersions": "0+",
//	          "about": "The configuration value." },
//	        { "name": "ReadOnly", "type": "bool", "versions": "0+",
//	          "about": "True if the configuration is read-only." },
//	        { "name": "IsDefault", "type": "bool", "versions": "0",
//	          "about": "True if the configuration is not set." },
//	        { "name": "ConfigSource", "type": "int8", "versions": "1+", "default": "-1",
//	          "about": "The configuration source." },
//	        { "name": "IsSensitive", "type": "bool", "versions": "0+",
//	          "about": "True if this configuration is sensitive." },
//	        { "name": "Synonyms", "type": "[]DescribeConfigsSynonym", "versions": "1+",
//	          "about": "The synonyms for this configuration key.", "fields": [
//	          { "name": "Name", "type": "string", "versions": "1+",
//	            "about": "The synonym name." },
//	          { "name": "Value", "type": "string", "versions": "1+", "nullableVersions": "0+",
//	            "about": "The synonym value." },
//	          { "name": "Source", "type": "int8", "versions": "1+",
//	            "about": "The synonym source." }
//	        ]},
//	        { "name": "ConfigType", "type": "int8", "versions": "3+", "default": "0",
//	          "about": "The configuration data type. Type can be one of the following values - BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD." },
//	        { "name": "Documentation", "type": "string", "versions": "3+", "nullableVersions": "0+",
//	          "about": "The configuration documentation." }
//	      ]}
//	    ]}
//	  ]
//	}

// Config sources of DescribeConfigs (Kafka's ConfigSource). Kafka has no
// source of its own for CLUSTER_MIRROR resources yet; a mirror's own settings
// are reported as ConfigSourceDynamicResource, the per-resource dynamic
// source.
const (
	ConfigSourceUnknown         int8 = 0
	ConfigSourceDynamicResource int8 = 1 // Kafka's DYNAMIC_TOPIC_CONFIG
	ConfigSourceDynamicBroker   int8 = 2 // Kafka's DYNAMIC_BROKER_CONFIG
	ConfigSourceDefault         int8 = 5 // Kafka's DEFAULT_CONFIG
)

// Config data types of DescribeConfigs (Kafka's ConfigType), version 3+.
const (
	ConfigTypeUnknown  int8 = 0
	ConfigTypeBoolean  int8 = 1
	ConfigTypeString   int8 = 2
	ConfigTypeInt      int8 = 3
	ConfigTypeShort    int8 = 4
	ConfigTypeLong     int8 = 5
	ConfigTypeDouble   int8 = 6
	ConfigTypeList     int8 = 7
	ConfigTypeClass    int8 = 8
	ConfigTypePassword int8 = 9
)

// DescribeConfigsRequest asks for the configuration of resources.
type DescribeConfigsRequest struct {
	versioned
	Resources            []DescribeConfigsResource `json:"resources"`
	IncludeSynonyms      bool                      `json:"includeSynonyms"`      // v1+
	IncludeDocumentation bool                      `json:"includeDocumentation"` // v3+
}

// DescribeConfigsResource is one resource of a DescribeConfigsRequest.
type DescribeConfigsResource struct {
	ResourceType int8   `json:"resourceType"`
	ResourceName string `json:"resourceName"`
	// ConfigurationKeys lists the keys to return; nil returns every key.
	ConfigurationKeys []string `json:"configurationKeys"`
}

// Key returns KeyDescribeConfigs.
func (*DescribeConfigsRequest) Key() int16 { return KeyDescribeConfigs }

// ResponseKind returns an empty DescribeConfigsResponse.
func (v *DescribeConfigsRequest) ResponseKind() Response {
	return &DescribeConfigsResponse{versioned: v.versioned}
}

func (v *DescribeConfigsRequest) flexible() bool { return v.version >= 4 }

// AppendTo appends the request body.
func (v *DescribeConfigsRequest) AppendTo(dst []byte) []byte {
	flex := v.flexible()
	dst = appendLen(dst, len(v.Resources), flex)
	for _, r := range v.Resources {
		dst = kbin.AppendInt8(dst, r.ResourceType)
		dst = appendStr(dst, r.ResourceName, flex)
		dst = appendNullableLen(dst, len(r.ConfigurationKeys), r.ConfigurationKeys == nil, flex)
		for _, k := range r.ConfigurationKeys {
			dst = appendStr(dst, k, flex)
		}
		dst = appendTagsIf(dst, flex)
	}
	if v.version >= 1 {
		dst = kbin.AppendBool(dst, v.IncludeSynonyms)
	}
	if v.version >= 3 {
		dst = kbin.AppendBool(dst, v.IncludeDocumentation)
	}
	return appendTagsIf(dst, flex)
}

// ReadFrom decodes a request body.
func (v *DescribeConfigsRequest) ReadFrom(src []byte) error {
	*v = DescribeConfigsRequest{versioned: v.versioned}
	flex := v.flexible()
	d := newRequestDecoder(src)
	n := d.arrayLenV(flex)
	for i := 0; i < n && d.ok(); i++ {
		var r DescribeConfigsResource
		r.ResourceType = d.int8()
		r.ResourceName = d.str(flex)
		r.ConfigurationKeys = d.nullableStringsV(flex)
		d.tagsIf(flex)
		v.Resources = append(v.Resources, r)
	}
	if v.version >= 1 {
		v.IncludeSynonyms = d.bool()
	}
	if v.version >= 3 {
		v.IncludeDocumentation = d.bool()
	}
	d.tagsIf(flex)
	return d.finish()
}

// DescribeConfigsResponse answers DescribeConfigsRequest with one result
// per resource.
type DescribeConfigsResponse struct {
	versioned
	ThrottleTimeMs int32                   `json:"throttleTimeMs"`
	Results        []DescribeConfigsResult `json:"results"`
}

// DescribeConfigsResult is the configuration of one resource.
type DescribeConfigsResult struct {
	ErrorCode    int16                  `json:"errorCode"`
	ErrorMessage *string                `json:"errorMessage"`
	ResourceType int8                   `json:"resourceType"`
	ResourceName string                 `json:"resourceName"`
	Configs      []DescribeConfigsEntry `json:"configs"`
}

// DescribeConfigsEntry is one configuration key of a resource. A sensitive
// key has a null Value.
type DescribeConfigsEntry struct {
	Name     string  `json:"name"`
	Value    *string `json:"value"`
	ReadOnly bool    `json:"readOnly"`
	// ConfigSource is v1+ (default -1); v0 carries IsDefault, which is
	// ConfigSource == ConfigSourceDefault.
	ConfigSource  int8                     `json:"configSource"`
	IsSensitive   bool                     `json:"isSensitive"`
	Synonyms      []DescribeConfigsSynonym `json:"synonyms"`      // v1+
	ConfigType    int8                     `json:"configType"`    // v3+
	Documentation *string                  `json:"documentation"` // v3+
}

// NewDescribeConfigsEntry returns an entry with its defaults set.
func NewDescribeConfigsEntry() DescribeConfigsEntry {
	var e DescribeConfigsEntry
	e.Default()
	return e
}

// Default sets the schema's defaults.
func (e *DescribeConfigsEntry) Default() { *e = DescribeConfigsEntry{ConfigSource: -1} }

// DescribeConfigsSynonym is a source a configuration value could come from,
// in order of precedence.
type DescribeConfigsSynonym struct {
	Name   string  `json:"name"`
	Value  *string `json:"value"`
	Source int8    `json:"source"`
}

// Key returns KeyDescribeConfigs.
func (*DescribeConfigsResponse) Key() int16 { return KeyDescribeConfigs }

func (v *DescribeConfigsResponse) flexible() bool { return v.version >= 4 }

// AppendTo appends the response body.
func (v *DescribeConfigsResponse) AppendTo(dst []byte) []byte {
	flex := v.flexible()
	dst = kbin.AppendInt32(dst, v.ThrottleTimeMs)
	dst = appendLen(dst, len(v.Results), flex)
	for _, r := range v.Results {
		dst = kbin.AppendInt16(dst, r.ErrorCode)
		dst = appendNullableStr(dst, r.ErrorMessage, flex)
		dst = kbin.AppendInt8(dst, r.ResourceType)
		dst = appendStr(dst, r.ResourceName, flex)
		dst = appendLen(dst, len(r.Configs), flex)
		for i := range r.Configs {
			dst = r.Configs[i].appendTo(dst, v.version, flex)
		}
		dst = appendTagsIf(dst, flex)
	}
	return appendTagsIf(dst, flex)
}

func (e *DescribeConfigsEntry) appendTo(dst []byte, version int16, flex bool) []byte {
	dst = appendStr(dst, e.Name, flex)
	dst = appendNullableStr(dst, e.Value, flex)
	dst = kbin.AppendBool(dst, e.ReadOnly)
	if version == 0 {
		dst = kbin.AppendBool(dst, e.ConfigSource == ConfigSourceDefault)
	} else {
		dst = kbin.AppendInt8(dst, e.ConfigSource)
	}
	dst = kbin.AppendBool(dst, e.IsSensitive)
	if version >= 1 {
		dst = appendLen(dst, len(e.Synonyms), flex)
		for _, s := range e.Synonyms {
			dst = appendStr(dst, s.Name, flex)
			dst = appendNullableStr(dst, s.Value, flex)
			dst = kbin.AppendInt8(dst, s.Source)
			dst = appendTagsIf(dst, flex)
		}
	}
	if version >= 3 {
		dst = kbin.AppendInt8(dst, e.ConfigType)
		dst = appendNullableStr(dst, e.Documentation, flex)
	}
	return appendTagsIf(dst, flex)
}

// ReadFrom decodes a response body.
func (v *DescribeConfigsResponse) ReadFrom(src []byte) error {
	*v = DescribeConfigsResponse{versioned: v.versioned}
	flex := v.flexible()
	d := newDecoder(src)
	v.ThrottleTimeMs = d.int32()
	n := d.arrayLenV(flex)
	for i := 0; i < n && d.ok(); i++ {
		var r DescribeConfigsResult
		r.ErrorCode = d.int16()
		r.ErrorMessage = d.nullableStr(flex)
		r.ResourceType = d.int8()
		r.ResourceName = d.str(flex)
		nc := d.arrayLenV(flex)
		for j := 0; j < nc && d.ok(); j++ {
			r.Configs = append(r.Configs, d.describeConfigsEntry(v.version, flex))
		}
		d.tagsIf(flex)
		v.Results = append(v.Results, r)
	}
	d.tagsIf(flex)
	return d.finish()
}

func (d *decoder) describeConfigsEntry(version int16, flex bool) DescribeConfigsEntry {
	e := NewDescribeConfigsEntry()
	e.Name = d.str(flex)
	e.Value = d.nullableStr(flex)
	e.ReadOnly = d.bool()
	if version == 0 {
		if d.bool() {
			e.ConfigSource = ConfigSourceDefault
		}
	} else {
		e.ConfigSource = d.int8()
	}
	e.IsSensitive = d.bool()
	if version >= 1 {
		n := d.arrayLenV(flex)
		for i := 0; i < n && d.ok(); i++ {
			var s DescribeConfigsSynonym
			s.Name = d.str(flex)
			s.Value = d.nullableStr(flex)
			s.Source = d.int8()
			d.tagsIf(flex)
			e.Synonyms = append(e.Synonyms, s)
		}
	}
	if version >= 3 {
		e.ConfigType = d.int8()
		e.Documentation = d.nullableStr(flex)
	}
	d.tagsIf(flex)
	return e
}
