package protocol

import "github.com/twmb/franz-go/pkg/kbin"

// RemoveSidecar (key 1013, sidemirror only): remove a sidecar from the raft
// group (DESIGN.md D5). Only the raft leader changes the membership; any
// other sidecar answers NOT_CONTROLLER with the leader's admin address in
// LeaderAdminAddress. An ID that is not a member, and the last voter, are
// refused.
//
//	{
//	  "apiKey": 1013,
//	  "type": "request",
//	  "name": "RemoveSidecarRequest",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "BrokerId", "type": "int32", "versions": "0+", "entityType": "brokerId",
//	      "about": "The broker ID of the sidecar to remove." }
//	  ]
//	}
//
//	{
//	  "apiKey": 1013,
//	  "type": "response",
//	  "name": "RemoveSidecarResponse",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    (the same fields as AddSidecarResponse)
//	  ]
//	}

// RemoveSidecarRequest removes a sidecar from the raft group.
type RemoveSidecarRequest struct {
	versioned
	BrokerId int32 `json:"brokerId"`
}

// Key returns KeyRemoveSidecar.
func (*RemoveSidecarRequest) Key() int16 { return KeyRemoveSidecar }

// ResponseKind returns an empty RemoveSidecarResponse.
func (v *RemoveSidecarRequest) ResponseKind() Response {
	return &RemoveSidecarResponse{versioned: v.versioned}
}

// AppendTo appends the request body.
func (v *RemoveSidecarRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.BrokerId)
	return appendNoTags(dst)
}

// ReadFrom decodes a request body.
func (v *RemoveSidecarRequest) ReadFrom(src []byte) error {
	*v = RemoveSidecarRequest{versioned: v.versioned}
	d := newRequestDecoder(src)
	v.BrokerId = d.int32()
	d.tags(nil)
	return d.finish()
}

// RemoveSidecarResponse answers RemoveSidecarRequest.
type RemoveSidecarResponse struct {
	versioned
	ThrottleTimeMs     int32   `json:"throttleTimeMs"`
	ErrorCode          int16   `json:"errorCode"`
	ErrorMessage       *string `json:"errorMessage"`
	LeaderAdminAddress *string `json:"leaderAdminAddress"` // tag 0
}

// Key returns KeyRemoveSidecar.
func (*RemoveSidecarResponse) Key() int16 { return KeyRemoveSidecar }

// AppendTo appends the response body.
func (v *RemoveSidecarResponse) AppendTo(dst []byte) []byte {
	return appendMembershipResponse(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage, v.LeaderAdminAddress)
}

// ReadFrom decodes a response body.
func (v *RemoveSidecarResponse) ReadFrom(src []byte) error {
	*v = RemoveSidecarResponse{versioned: v.versioned}
	d := newDecoder(src)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage, v.LeaderAdminAddress = d.membershipResponse()
	return d.finish()
}
