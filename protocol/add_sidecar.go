package protocol

import "github.com/twmb/franz-go/pkg/kbin"

// AddSidecar (key 1012, sidemirror only): add a sidecar to the raft group as
// a voter (DESIGN.md D5). Only the raft leader changes the membership; any
// other sidecar answers NOT_CONTROLLER with the leader's admin address in
// LeaderAdminAddress, and the client sends the request there. An ID already
// in the group at the same raft address is a no-op; an ID at another
// address, or an address under another ID, replaces the stale entry.
//
//	{
//	  "apiKey": 1012,
//	  "type": "request",
//	  "name": "AddSidecarRequest",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "BrokerId", "type": "int32", "versions": "0+", "entityType": "brokerId",
//	      "about": "The broker ID of the sidecar's broker: its raft server ID." },
//	    { "name": "RaftAddress", "type": "string", "versions": "0+",
//	      "about": "The sidecar's raft transport address (host:port)." },
//	    { "name": "AdminAddress", "type": "string", "versions": "0+",
//	      "about": "The sidecar's admin endpoint (host:port)." }
//	  ]
//	}
//
//	{
//	  "apiKey": 1012,
//	  "type": "response",
//	  "name": "AddSidecarResponse",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+" },
//	    { "name": "ErrorCode", "type": "int16", "versions": "0+" },
//	    { "name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null" },
//	    { "name": "LeaderAdminAddress", "type": "string", "versions": "0+", "nullableVersions": "0+",
//	      "default": "null", "tag": 0, "taggedVersions": "0+",
//	      "about": "With NOT_CONTROLLER: the admin endpoint of the raft leader, if known." }
//	  ]
//	}

// AddSidecarRequest adds a sidecar to the raft group.
type AddSidecarRequest struct {
	versioned
	BrokerId     int32  `json:"brokerId"`
	RaftAddress  string `json:"raftAddress"`
	AdminAddress string `json:"adminAddress"`
}

// Key returns KeyAddSidecar.
func (*AddSidecarRequest) Key() int16 { return KeyAddSidecar }

// ResponseKind returns an empty AddSidecarResponse.
func (v *AddSidecarRequest) ResponseKind() Response {
	return &AddSidecarResponse{versioned: v.versioned}
}

// AppendTo appends the request body.
func (v *AddSidecarRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.BrokerId)
	dst = kbin.AppendCompactString(dst, v.RaftAddress)
	dst = kbin.AppendCompactString(dst, v.AdminAddress)
	return appendNoTags(dst)
}

// ReadFrom decodes a request body.
func (v *AddSidecarRequest) ReadFrom(src []byte) error {
	*v = AddSidecarRequest{versioned: v.versioned}
	d := newRequestDecoder(src)
	v.BrokerId = d.int32()
	v.RaftAddress = d.string()
	v.AdminAddress = d.string()
	d.tags(nil)
	return d.finish()
}

// AddSidecarResponse answers AddSidecarRequest.
type AddSidecarResponse struct {
	versioned
	ThrottleTimeMs     int32   `json:"throttleTimeMs"`
	ErrorCode          int16   `json:"errorCode"`
	ErrorMessage       *string `json:"errorMessage"`
	LeaderAdminAddress *string `json:"leaderAdminAddress"` // tag 0
}

// Key returns KeyAddSidecar.
func (*AddSidecarResponse) Key() int16 { return KeyAddSidecar }

// AppendTo appends the response body.
func (v *AddSidecarResponse) AppendTo(dst []byte) []byte {
	return appendMembershipResponse(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage, v.LeaderAdminAddress)
}

// ReadFrom decodes a response body.
func (v *AddSidecarResponse) ReadFrom(src []byte) error {
	*v = AddSidecarResponse{versioned: v.versioned}
	d := newDecoder(src)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage, v.LeaderAdminAddress = d.membershipResponse()
	return d.finish()
}

// appendMembershipResponse appends the body shared by the responses of
// AddSidecar and RemoveSidecar: the status, then LeaderAdminAddress as
// tagged field 0 when it is set.
func appendMembershipResponse(dst []byte, throttleTimeMs int32, errorCode int16, errorMessage, leaderAdminAddress *string) []byte {
	dst = appendStatus(dst, throttleTimeMs, errorCode, errorMessage)
	var tw tagWriter
	if leaderAdminAddress != nil {
		tw.add(0, kbin.AppendCompactNullableString(nil, leaderAdminAddress))
	}
	return tw.appendTo(dst)
}

// membershipResponse reads what appendMembershipResponse appends.
func (d *decoder) membershipResponse() (throttleTimeMs int32, errorCode int16, errorMessage, leaderAdminAddress *string) {
	throttleTimeMs, errorCode, errorMessage = d.status()
	d.tags(func(tag uint32, f *decoder) bool {
		if tag != 0 {
			return false
		}
		leaderAdminAddress = f.nullableString()
		return true
	})
	return throttleTimeMs, errorCode, errorMessage, leaderAdminAddress
}
