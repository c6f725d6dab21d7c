package protocol

import "github.com/twmb/franz-go/pkg/kbin"

// ApiVersions (key 18), Kafka's own schema, versions 0-3. The Server answers
// it from the registry. A request of a newer version gets, as in Kafka
// (KIP-511), a v0 response with UNSUPPORTED_VERSION and one entry for
// ApiVersions itself naming the highest version to retry with.
//
//	{
//	  "apiKey": 18,
//	  "type": "request",
//	  "name": "ApiVersionsRequest",
//	  "validVersions": "0-3",
//	  "flexibleVersions": "3+",
//	  "fields": [
//	    { "name": "ClientSoftwareName", "type": "string", "versions": "3+",
//	      "about": "The name of the client." },
//	    { "name": "ClientSoftwareVersion", "type": "string", "versions": "3+",
//	      "about": "The version of the client." }
//	  ]
//	}
//
//	{
//	  "apiKey": 18,
//	  "type": "response",
//	  "name": "ApiVersionsResponse",
//	  "validVersions": "0-3",
//	  "flexibleVersions": "3+",
//	  "fields": [
//	    { "name": "ErrorCode", "type": "int16", "versions": "0+",
//	      "about": "The top-level error code." },
//	    { "name": "ApiKeys", "type": "[]ApiVersion", "versions": "0+",
//	      "about": "The APIs supported by the server.", "fields": [
//	      { "name": "ApiKey", "type": "int16", "versions": "0+", "mapKey": true },
//	      { "name": "MinVersion", "type": "int16", "versions": "0+" },
//	      { "name": "MaxVersion", "type": "int16", "versions": "0+" }
//	    ]},
//	    { "name": "ThrottleTimeMs", "type": "int32", "versions": "1+", "ignorable": true },
//	    { "name": "SupportedFeatures", "type": "[]SupportedFeatureKey", "versions": "3+",
//	      "tag": 0, "taggedVersions": "3+", "fields": [
//	      { "name": "Name", "type": "string", "versions": "3+", "mapKey": true },
//	      { "name": "MinVersion", "type": "int16", "versions": "3+" },
//	      { "name": "MaxVersion", "type": "int16", "versions": "3+" }
//	    ]},
//	    { "name": "FinalizedFeaturesEpoch", "type": "int64", "versions": "3+",
//	      "tag": 1, "taggedVersions": "3+", "default": "-1" },
//	    { "name": "FinalizedFeatures", "type": "[]FinalizedFeatureKey", "versions": "3+",
//	      "tag": 2, "taggedVersions": "3+", "fields": [
//	      { "name": "Name", "type": "string", "versions": "3+", "mapKey": true },
//	      { "name": "MaxVersionLevel", "type": "int16", "versions": "3+" },
//	      { "name": "MinVersionLevel", "type": "int16", "versions": "3+" }
//	    ]},
//	    { "name": "ZkMigrationReady", "type": "bool", "versions": "3+",
//	      "tag": 3, "taggedVersions": "3+", "default": "false" }
//	  ]
//	}

// ApiVersionsRequest asks which APIs and versions the server supports.
type ApiVersionsRequest struct {
	versioned
	ClientSoftwareName    string `json:"clientSoftwareName"`    // v3+
	ClientSoftwareVersion string `json:"clientSoftwareVersion"` // v3+
}

// Key returns KeyApiVersions.
func (*ApiVersionsRequest) Key() int16 { return KeyApiVersions }

// ResponseKind returns an empty ApiVersionsResponse of the same version.
func (v *ApiVersionsRequest) ResponseKind() Response {
	r := NewApiVersionsResponse()
	r.SetVersion(v.version)
	return r
}

// AppendTo appends the request body.
func (v *ApiVersionsRequest) AppendTo(dst []byte) []byte {
	if v.version >= 3 {
		dst = kbin.AppendCompactString(dst, v.ClientSoftwareName)
		dst = kbin.AppendCompactString(dst, v.ClientSoftwareVersion)
		dst = appendNoTags(dst)
	}
	return dst
}

// ReadFrom decodes a request body.
func (v *ApiVersionsRequest) ReadFrom(src []byte) error {
	*v = ApiVersionsRequest{versioned: v.versioned}
	d := newRequestDecoder(src)
	if v.version >= 3 {
		v.ClientSoftwareName = d.string()
		v.ClientSoftwareVersion = d.string()
		d.tags(nil)
	}
	return d.finish()
}

// ApiVersionsResponse lists the supported APIs and versions.
type ApiVersionsResponse struct {
	versioned
	ErrorCode              int16                         `json:"errorCode"`
	ApiKeys                []ApiVersionsKey              `json:"apiKeys"`
	ThrottleTimeMs         int32                         `json:"throttleTimeMs"`         // v1+
	SupportedFeatures      []ApiVersionsSupportedFeature `json:"supportedFeatures"`      // v3+, tag 0
	FinalizedFeaturesEpoch int64                         `json:"finalizedFeaturesEpoch"` // v3+, tag 1, default -1
	FinalizedFeatures      []ApiVersionsFinalizedFeature `json:"finalizedFeatures"`      // v3+, tag 2
	ZkMigrationReady       bool                          `json:"zkMigrationReady"`       // v3+, tag 3
}

// NewApiVersionsResponse returns an empty response with its defaults set.
func NewApiVersionsResponse() *ApiVersionsResponse {
	r := new(ApiVersionsResponse)
	r.Default()
	return r
}

// Default sets the schema's defaults, keeping the version.
func (v *ApiVersionsResponse) Default() {
	*v = ApiVersionsResponse{versioned: v.versioned, FinalizedFeaturesEpoch: -1}
}

// ApiVersionsKey is one supported API.
type ApiVersionsKey struct {
	ApiKey     int16 `json:"apiKey"`
	MinVersion int16 `json:"minVersion"`
	MaxVersion int16 `json:"maxVersion"`
}

// ApiVersionsSupportedFeature is a feature and its supported version range.
type ApiVersionsSupportedFeature struct {
	Name       string `json:"name"`
	MinVersion int16  `json:"minVersion"`
	MaxVersion int16  `json:"maxVersion"`
}

// ApiVersionsFinalizedFeature is a feature and its finalized version range.
type ApiVersionsFinalizedFeature struct {
	Name            string `json:"name"`
	MaxVersionLevel int16  `json:"maxVersionLevel"`
	MinVersionLevel int16  `json:"minVersionLevel"`
}

// Key returns KeyApiVersions.
func (*ApiVersionsResponse) Key() int16 { return KeyApiVersions }

// AppendTo appends the response body.
func (v *ApiVersionsResponse) AppendTo(dst []byte) []byte {
	flexible := v.version >= 3
	dst = kbin.AppendInt16(dst, v.ErrorCode)
	if flexible {
		dst = kbin.AppendCompactArrayLen(dst, len(v.ApiKeys))
	} else {
		dst = kbin.AppendArrayLen(dst, len(v.ApiKeys))
	}
	for _, k := range v.ApiKeys {
		dst = kbin.AppendInt16(dst, k.ApiKey)
		dst = kbin.AppendInt16(dst, k.MinVersion)
		dst = kbin.AppendInt16(dst, k.MaxVersion)
		if flexible {
			dst = appendNoTags(dst)
		}
	}
	if v.version >= 1 {
		dst = kbin.AppendInt32(dst, v.ThrottleTimeMs)
	}
	if !flexible {
		return dst
	}
	var tw tagWriter
	if len(v.SupportedFeatures) > 0 {
		b := kbin.AppendCompactArrayLen(nil, len(v.SupportedFeatures))
		for _, f := range v.SupportedFeatures {
			b = kbin.AppendCompactString(b, f.Name)
			b = kbin.AppendInt16(b, f.MinVersion)
			b = kbin.AppendInt16(b, f.MaxVersion)
			b = appendNoTags(b)
		}
		tw.add(0, b)
	}
	if v.FinalizedFeaturesEpoch != -1 {
		tw.add(1, kbin.AppendInt64(nil, v.FinalizedFeaturesEpoch))
	}
	if len(v.FinalizedFeatures) > 0 {
		b := kbin.AppendCompactArrayLen(nil, len(v.FinalizedFeatures))
		for _, f := range v.FinalizedFeatures {
			b = kbin.AppendCompactString(b, f.Name)
			b = kbin.AppendInt16(b, f.MaxVersionLevel)
			b = kbin.AppendInt16(b, f.MinVersionLevel)
			b = appendNoTags(b)
		}
		tw.add(2, b)
	}
	if v.ZkMigrationReady {
		tw.add(3, kbin.AppendBool(nil, true))
	}
	return tw.appendTo(dst)
}

// ReadFrom decodes a response body.
func (v *ApiVersionsResponse) ReadFrom(src []byte) error {
	v.Default()
	flexible := v.version >= 3
	d := newDecoder(src)
	v.ErrorCode = d.int16()
	n := 0
	if flexible {
		n = d.arrayLen()
	} else {
		n = d.legacyArrayLen()
	}
	for i := 0; i < n && d.ok(); i++ {
		var k ApiVersionsKey
		k.ApiKey = d.int16()
		k.MinVersion = d.int16()
		k.MaxVersion = d.int16()
		if flexible {
			d.tags(nil)
		}
		v.ApiKeys = append(v.ApiKeys, k)
	}
	if v.version >= 1 {
		v.ThrottleTimeMs = d.int32()
	}
	if flexible {
		d.tags(func(tag uint32, f *decoder) bool {
			switch tag {
			case 0:
				v.SupportedFeatures = nil
				n := f.arrayLen()
				for i := 0; i < n && f.ok(); i++ {
					var sf ApiVersionsSupportedFeature
					sf.Name = f.string()
					sf.MinVersion = f.int16()
					sf.MaxVersion = f.int16()
					f.tags(nil)
					v.SupportedFeatures = append(v.SupportedFeatures, sf)
				}
			case 1:
				v.FinalizedFeaturesEpoch = f.int64()
			case 2:
				v.FinalizedFeatures = nil
				n := f.arrayLen()
				for i := 0; i < n && f.ok(); i++ {
					var ff ApiVersionsFinalizedFeature
					ff.Name = f.string()
					ff.MaxVersionLevel = f.int16()
					ff.MinVersionLevel = f.int16()
					f.tags(nil)
					v.FinalizedFeatures = append(v.FinalizedFeatures, ff)
				}
			case 3:
				v.ZkMigrationReady = f.bool()
			default:
				return false
			}
			return true
		})
	}
	return d.finish()
}
