package protocol

// DescribeLocalPartitions (key 1011, internal, sidemirror only): the sidecar
// serving DescribeClusterMirrors asks every other sidecar for the rows of the
// mirror partitions it owns, and merges them. Mirrors has the shape of
// DescribeClusterMirrors' Mirrors, tagged fields included.
//
//	{
//	  "apiKey": 1011,
//	  "type": "request",
//	  "name": "DescribeLocalPartitionsRequest",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "MirrorNames", "type": "[]string", "versions": "0+", "nullableVersions": "0+",
//	      "entityType": "mirrorName",
//	      "about": "The mirrors to describe. Null or empty array means all mirrors." }
//	  ]
//	}
//
//	{
//	  "apiKey": 1011,
//	  "type": "response",
//	  "name": "DescribeLocalPartitionsResponse",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+" },
//	    { "name": "ErrorCode", "type": "int16", "versions": "0+" },
//	    { "name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null" },
//	    { "name": "Mirrors", "type": "[]DescribedMirror", "versions": "0+",
//	      "about": "The local partitions, by mirror and topic (see DescribeClusterMirrorsResponse)." }
//	  ]
//	}

// DescribeLocalPartitionsRequest asks a sidecar for the rows of the mirror
// partitions it owns.
type DescribeLocalPartitionsRequest struct {
	versioned
	MirrorNames []string `json:"mirrorNames"` // nil (null) or empty: all mirrors
}

// Key returns KeyDescribeLocalPartitions.
func (*DescribeLocalPartitionsRequest) Key() int16 { return KeyDescribeLocalPartitions }

// ResponseKind returns an empty DescribeLocalPartitionsResponse.
func (v *DescribeLocalPartitionsRequest) ResponseKind() Response {
	return &DescribeLocalPartitionsResponse{versioned: v.versioned}
}

// AppendTo appends the request body.
func (v *DescribeLocalPartitionsRequest) AppendTo(dst []byte) []byte {
	dst = appendNullableStrings(dst, v.MirrorNames)
	return appendNoTags(dst)
}

// ReadFrom decodes a request body.
func (v *DescribeLocalPartitionsRequest) ReadFrom(src []byte) error {
	*v = DescribeLocalPartitionsRequest{versioned: v.versioned}
	d := newRequestDecoder(src)
	v.MirrorNames = d.nullableStrings()
	d.tags(nil)
	return d.finish()
}

// DescribeLocalPartitionsResponse answers DescribeLocalPartitionsRequest.
type DescribeLocalPartitionsResponse struct {
	versioned
	ThrottleTimeMs int32             `json:"throttleTimeMs"`
	ErrorCode      int16             `json:"errorCode"`
	ErrorMessage   *string           `json:"errorMessage"`
	Mirrors        []DescribedMirror `json:"mirrors"`
}

// Key returns KeyDescribeLocalPartitions.
func (*DescribeLocalPartitionsResponse) Key() int16 { return KeyDescribeLocalPartitions }

// AppendTo appends the response body.
func (v *DescribeLocalPartitionsResponse) AppendTo(dst []byte) []byte {
	dst = appendStatus(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage)
	dst = appendArray(dst, v.Mirrors)
	return appendNoTags(dst)
}

// ReadFrom decodes a response body.
func (v *DescribeLocalPartitionsResponse) ReadFrom(src []byte) error {
	*v = DescribeLocalPartitionsResponse{versioned: v.versioned}
	d := newDecoder(src)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage = d.status()
	v.Mirrors = readArray[DescribedMirror](d)
	d.tags(nil)
	return d.finish()
}
