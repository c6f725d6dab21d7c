package protocol

import "github.com/twmb/franz-go/pkg/kbin"

// DescribeSidecars (key 1014, sidemirror only): the raft group as the
// answering sidecar sees it: every server of the raft configuration with
// the addresses the sidecars registered (State.Sidecars), and the leader.
//
//	{
//	  "apiKey": 1014,
//	  "type": "request",
//	  "name": "DescribeSidecarsRequest",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": []
//	}
//
//	{
//	  "apiKey": 1014,
//	  "type": "response",
//	  "name": "DescribeSidecarsResponse",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+" },
//	    { "name": "ErrorCode", "type": "int16", "versions": "0+" },
//	    { "name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null" },
//	    { "name": "LeaderId", "type": "int32", "versions": "0+", "entityType": "brokerId",
//	      "about": "The broker ID of the raft leader, or -1 if none is known." },
//	    { "name": "Sidecars", "type": "[]DescribedSidecar", "versions": "0+",
//	      "about": "The servers of the raft configuration, by broker ID.", "fields": [
//	      { "name": "BrokerId", "type": "int32", "versions": "0+", "entityType": "brokerId" },
//	      { "name": "RaftAddress", "type": "string", "versions": "0+",
//	        "about": "The raft address in the raft configuration." },
//	      { "name": "AdminAddress", "type": "string", "versions": "0+", "nullableVersions": "0+",
//	        "about": "The registered admin endpoint, or null if the sidecar has not registered." },
//	      { "name": "Voter", "type": "bool", "versions": "0+",
//	        "about": "True for a voter, false for a non-voter." },
//	      { "name": "Version", "type": "string", "versions": "0+",
//	        "about": "The registered sidemirror version, empty if unknown." }
//	    ]}
//	  ]
//	}

// DescribeSidecarsRequest asks for the raft group's members.
type DescribeSidecarsRequest struct {
	versioned
}

// Key returns KeyDescribeSidecars.
func (*DescribeSidecarsRequest) Key() int16 { return KeyDescribeSidecars }

// ResponseKind returns an empty DescribeSidecarsResponse.
func (v *DescribeSidecarsRequest) ResponseKind() Response {
	return &DescribeSidecarsResponse{versioned: v.versioned}
}

// AppendTo appends the request body.
func (v *DescribeSidecarsRequest) AppendTo(dst []byte) []byte { return appendNoTags(dst) }

// ReadFrom decodes a request body.
func (v *DescribeSidecarsRequest) ReadFrom(src []byte) error {
	d := newRequestDecoder(src)
	d.tags(nil)
	return d.finish()
}

// DescribeSidecarsResponse answers DescribeSidecarsRequest.
type DescribeSidecarsResponse struct {
	versioned
	ThrottleTimeMs int32              `json:"throttleTimeMs"`
	ErrorCode      int16              `json:"errorCode"`
	ErrorMessage   *string            `json:"errorMessage"`
	LeaderId       int32              `json:"leaderId"`
	Sidecars       []DescribedSidecar `json:"sidecars"`
}

// DescribedSidecar is one member of the raft group.
type DescribedSidecar struct {
	BrokerId     int32   `json:"brokerId"`
	RaftAddress  string  `json:"raftAddress"`
	AdminAddress *string `json:"adminAddress"`
	Voter        bool    `json:"voter"`
	Version      string  `json:"version"`
}

func (s *DescribedSidecar) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, s.BrokerId)
	dst = kbin.AppendCompactString(dst, s.RaftAddress)
	dst = kbin.AppendCompactNullableString(dst, s.AdminAddress)
	dst = kbin.AppendBool(dst, s.Voter)
	dst = kbin.AppendCompactString(dst, s.Version)
	return appendNoTags(dst)
}

func (s *DescribedSidecar) readFrom(d *decoder) {
	s.BrokerId = d.int32()
	s.RaftAddress = d.string()
	s.AdminAddress = d.nullableString()
	s.Voter = d.bool()
	s.Version = d.string()
	d.tags(nil)
}

// Key returns KeyDescribeSidecars.
func (*DescribeSidecarsResponse) Key() int16 { return KeyDescribeSidecars }

// AppendTo appends the response body.
func (v *DescribeSidecarsResponse) AppendTo(dst []byte) []byte {
	dst = appendStatus(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage)
	dst = kbin.AppendInt32(dst, v.LeaderId)
	dst = appendArray(dst, v.Sidecars)
	return appendNoTags(dst)
}

// ReadFrom decodes a response body.
func (v *DescribeSidecarsResponse) ReadFrom(src []byte) error {
	*v = DescribeSidecarsResponse{versioned: v.versioned}
	d := newDecoder(src)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage = d.status()
	v.LeaderId = d.int32()
	v.Sidecars = readArray[DescribedSidecar](d)
	d.tags(nil)
	return d.finish()
}
