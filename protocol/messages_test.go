package protocol

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newLike returns an empty message of m's API, direction and version.
func newLike(t testing.TB, m Message) Message {
	t.Helper()
	api, ok := LookupAPI(m.Key())
	if !ok {
		t.Fatalf("key %d not in the registry", m.Key())
	}
	var out Message
	if _, isReq := m.(Request); isReq {
		out = api.NewRequest()
	} else {
		out = api.NewResponse()
	}
	out.SetVersion(m.Version())
	return out
}

func sampleName(m Message) string {
	dir := "Response"
	if _, ok := m.(Request); ok {
		dir = "Request"
	}
	return fmt.Sprintf("%s%s/v%d", KeyName(m.Key()), dir, m.Version())
}

func TestRoundTrip(t *testing.T) {
	for _, m := range sampleMessages() {
		t.Run(sampleName(m), func(t *testing.T) {
			b := m.AppendTo(nil)
			got := newLike(t, m)
			if err := got.ReadFrom(b); err != nil {
				t.Fatalf("ReadFrom: %v (bytes %x)", err, b)
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("round trip mismatch\n got: %+v\nwant: %+v", got, m)
			}
			if b2 := got.AppendTo(nil); !bytes.Equal(b, b2) {
				t.Fatalf("re-encoding differs\n got: %x\nwant: %x", b2, b)
			}
			// Every proper prefix fails to decode, and so does a trailing byte.
			for i := range b {
				if err := newLike(t, m).ReadFrom(b[:i]); err == nil {
					t.Fatalf("ReadFrom(%d of %d bytes) succeeded", i, len(b))
				}
			}
			if err := newLike(t, m).ReadFrom(append(b[:len(b):len(b)], 0)); !errors.Is(err, ErrMalformed) {
				t.Fatalf("ReadFrom with a trailing byte: %v, want ErrMalformed", err)
			}
		})
	}
}

// TestSamplesCoverEveryField makes sure the samples at each API's highest
// version set every exported field, in every nested structure, to a value
// other than its default; otherwise a field the codec forgot could still
// round-trip.
func TestSamplesCoverEveryField(t *testing.T) {
	type fieldKey struct {
		typ   reflect.Type
		field int
	}
	seen := map[fieldKey]bool{}
	types := map[reflect.Type]bool{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		case reflect.Struct:
			typ := v.Type()
			if strings.HasSuffix(typ.PkgPath(), "franz-go/pkg/kmsg") {
				return // kmsg's codecs are franz-go's, tested there; TestRoundTrip covers our use
			}
			types[typ] = true
			def := defaultOf(typ)
			for i := 0; i < typ.NumField(); i++ {
				if !typ.Field(i).IsExported() {
					continue
				}
				if !reflect.DeepEqual(v.Field(i).Interface(), def.Field(i).Interface()) {
					seen[fieldKey{typ, i}] = true
				}
				walk(v.Field(i))
			}
		}
	}
	maxSample := map[string]Message{}
	for _, m := range sampleMessages() {
		maxSample[fmt.Sprintf("%T", m)] = m // later samples have higher versions
	}
	for _, m := range maxSample {
		walk(reflect.ValueOf(m))
	}
	for typ := range types {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if f.IsExported() && f.Type.Kind() != reflect.Array && !seen[fieldKey{typ, i}] {
				t.Errorf("no sample sets %s.%s to a non-default value", typ.Name(), f.Name)
			}
		}
	}
}

// defaultOf returns the default value of a struct type: its Default method's
// result where it has one, else the zero value.
func defaultOf(typ reflect.Type) reflect.Value {
	p := reflect.New(typ)
	if d, ok := p.Interface().(interface{ Default() }); ok {
		d.Default()
	}
	return p.Elem()
}

func TestRegistry(t *testing.T) {
	have := map[string]bool{}
	for _, m := range sampleMessages() {
		_, isReq := m.(Request)
		have[fmt.Sprintf("%d/%v", m.Key(), isReq)] = true
	}
	prev := int16(-1)
	for _, a := range APIs() {
		if a.Key <= prev {
			t.Errorf("registry not sorted at key %d", a.Key)
		}
		prev = a.Key
		for _, isReq := range []bool{true, false} {
			if !have[fmt.Sprintf("%d/%v", a.Key, isReq)] {
				t.Errorf("%s: no sample (request=%v)", a.Name, isReq)
			}
		}
		req, resp := a.NewRequest(), a.NewResponse()
		if req.Key() != a.Key || resp.Key() != a.Key || req.ResponseKind().Key() != a.Key {
			t.Errorf("%s: constructors disagree on the key", a.Name)
		}
		if got, ok := LookupAPI(a.Key); !ok || got.Name != a.Name {
			t.Errorf("LookupAPI(%d) = %v, %v", a.Key, got.Name, ok)
		}
		if KeyName(a.Key) != a.Name {
			t.Errorf("KeyName(%d) = %q", a.Key, KeyName(a.Key))
		}
		if _, err := NewRequest(a.Key, a.MaxVersion+1); !errors.Is(err, ErrUnsupportedVersion) {
			t.Errorf("%s: NewRequest above max version: %v", a.Name, err)
		}
	}
	if _, err := NewRequest(999, 0); !errors.Is(err, ErrUnknownAPIKey) {
		t.Errorf("NewRequest(999): %v", err)
	}
	if KeyName(999) != "Unknown(999)" {
		t.Errorf("KeyName(999) = %q", KeyName(999))
	}
}

// TestGoldenBytes pins the wire encoding, so that a mistake made the same
// way in the encoder and the decoder cannot hide.
func TestGoldenBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  Message
		hex  string
	}{
		{
			name: "DeleteClusterMirrorRequest",
			msg:  &DeleteClusterMirrorRequest{MirrorName: "m"},
			hex:  "02" + "6d" + "00", // compact string "m", no tags
		},
		{
			name: "CreateClusterMirrorRequest with a null value",
			msg:  &CreateClusterMirrorRequest{MirrorName: "m", Config: []ClusterMirrorConfig{{Name: "k", Value: nil}}},
			hex:  "026d" + "02" + "026b" + "00" + "00" + "00", // name, 1 config: "k", null, no tags; no tags
		},
		{
			name: "StopMirrorTopicsRequest with TopicPatterns",
			msg:  &StopMirrorTopicsRequest{MirrorName: "m", TopicPatterns: []string{"a"}},
			// name, topics [], patterns [], 1 tag: tag 0, 3 bytes: [ "a" ]
			hex: "026d" + "01" + "01" + "01" + "00" + "03" + "02" + "0261",
		},
		{
			name: "StartMirrorTopicsRequest with Reseed",
			msg:  &StartMirrorTopicsRequest{MirrorName: "m", TopicPatterns: []string{"a"}, Reseed: true},
			// name, topics [], include [], exclude [], 2 tags: tag 0, 3 bytes: [ "a" ]; tag 1, 1 byte: true
			hex: "026d" + "01" + "01" + "01" + "02" + "00" + "03" + "02" + "0261" + "01" + "01" + "01",
		},
		{
			name: "StartMirrorTopicsRequest without Reseed (as before it existed)",
			msg:  &StartMirrorTopicsRequest{MirrorName: "m", TopicPatterns: []string{"a"}},
			hex:  "026d" + "01" + "01" + "01" + "01" + "00" + "03" + "02" + "0261",
		},
		{
			name: "StartMirrorTopicsResponse with Reseeded",
			msg: &StartMirrorTopicsResponse{MirrorName: "m", Reseeded: []ReseededTopic{{Name: "t", CopyTopic: "c",
				Partitions: []ReseededPartition{{Partition: 1, FirstOffset: 2, EndOffset: 4, Records: 2}}}}},
			hex: "00000000" + "0000" + "00" + "026d" + "01" + // status, "m", no topics
				"01" + "00" + "24" + // 1 tag: tag 0, 36 bytes
				"02" + "0274" + "0263" + "02" + // 1 topic "t", copy "c", 1 partition
				"00000001" + "0000000000000002" + "0000000000000004" + "0000000000000002" + "00" + // partition, no tags
				"00", // topic tags
		},
		{
			name: "DescribeClusterMirrorsRequest null names",
			msg:  &DescribeClusterMirrorsRequest{},
			hex:  "00" + "00" + "00",
		},
		{
			name: "DescribeClusterMirrorsRequest empty names",
			msg:  &DescribeClusterMirrorsRequest{MirrorNames: []string{}},
			hex:  "01" + "00" + "00",
		},
		{
			name: "DescribeClusterMirrorsResponse partition tags",
			msg: &DescribeClusterMirrorsResponse{Mirrors: []DescribedMirror{{
				MirrorName: "m", AuthorizedOperations: -2147483648,
				Topics: []DescribedTopic{{TopicName: "t", Partitions: []PartitionDetail{{
					PartitionIndex: 1, SourceOffset: -1, DestinationOffset: -1, Lag: -1, State: "S",
					LastMirrorEpoch: -1, LastError: strp("e"), OwnerBrokerId: 2,
					SourceUnreachableSinceMs: -1, LagTimeMs: 3, LastFetchTimestampMs: -1, MaxRetryAttempts: -1, MirroredBytes: -1,
				}}}},
			}}},
			hex: "00000000" + "0000" + "00" + // throttle, error code, null message
				"02" + "0000" + "026d" + "80000000" + // 1 mirror: error code, "m", authorized operations
				"02" + "0274" + "02" + // 1 topic "t", 1 partition
				"00000001" + "ffffffffffffffff" + "ffffffffffffffff" + "ffffffffffffffff" + "0253" + "ffffffff" +
				"03" + "00" + "02" + "0265" + "01" + "04" + "00000002" + // tags: LastError "e", OwnerBrokerId 2,
				"03" + "08" + "0000000000000003" + // LagTimeMs 3
				"00" + // topic tags
				"00" + // mirror tags
				"00", // response tags
		},
		{
			name: "DescribeClusterMirrorsResponse retry and bytes tags",
			msg: &DescribeClusterMirrorsResponse{Mirrors: []DescribedMirror{{
				MirrorName: "m", AuthorizedOperations: -2147483648,
				Topics: []DescribedTopic{{TopicName: "t", Partitions: []PartitionDetail{{
					PartitionIndex: 1, SourceOffset: -1, DestinationOffset: -1, Lag: -1, State: "S",
					LastMirrorEpoch: -1, OwnerBrokerId: -1, SourceUnreachableSinceMs: -1, LagTimeMs: -1, LastFetchTimestampMs: -1,
					RetryAttempt: 3, MaxRetryAttempts: 20, NonRetryable: true, MirroredBytes: 1 << 20,
				}}}},
			}}},
			hex: "00000000" + "0000" + "00" + // throttle, error code, null message
				"02" + "0000" + "026d" + "80000000" + // 1 mirror: error code, "m", authorized operations
				"02" + "0274" + "02" + // 1 topic "t", 1 partition
				"00000001" + "ffffffffffffffff" + "ffffffffffffffff" + "ffffffffffffffff" + "0253" + "ffffffff" +
				"04" + "05" + "02" + "0003" + "06" + "02" + "0014" + "07" + "01" + "01" + // tags: RetryAttempt 3, MaxRetryAttempts 20, NonRetryable,
				"08" + "08" + "0000000000100000" + // MirroredBytes 1 MiB
				"00" + // topic tags
				"00" + // mirror tags
				"00", // response tags
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := hex.EncodeToString(tc.msg.AppendTo(nil)); got != tc.hex {
				t.Fatalf("encoding\n got: %s\nwant: %s", got, tc.hex)
			}
		})
	}
}

// TestApiVersionsMatchesKmsg checks our ApiVersions codec against
// franz-go's, in both directions and for every version we support.
func TestApiVersionsMatchesKmsg(t *testing.T) {
	for v := int16(0); v <= 3; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			kreq := kmsg.NewPtrApiVersionsRequest()
			kreq.Version = v
			kreq.ClientSoftwareName, kreq.ClientSoftwareVersion = "franz-go", "1.0"
			var req ApiVersionsRequest
			req.SetVersion(v)
			if err := req.ReadFrom(kreq.AppendTo(nil)); err != nil {
				t.Fatalf("reading kmsg's request: %v", err)
			}
			if !bytes.Equal(req.AppendTo(nil), kreq.AppendTo(nil)) {
				t.Fatalf("request encodings differ")
			}

			resp := NewApiVersionsResponse()
			resp.SetVersion(v)
			resp.ErrorCode = 0
			resp.ApiKeys = []ApiVersionsKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 3}, {ApiKey: 1004, MaxVersion: 0}}
			if v >= 1 {
				resp.ThrottleTimeMs = 7
			}
			if v >= 3 {
				resp.SupportedFeatures = []ApiVersionsSupportedFeature{{Name: "f", MinVersion: 1, MaxVersion: 2}}
				resp.FinalizedFeaturesEpoch = 3
				resp.FinalizedFeatures = []ApiVersionsFinalizedFeature{{Name: "f", MaxVersionLevel: 2, MinVersionLevel: 1}}
				resp.ZkMigrationReady = true
			}
			b := resp.AppendTo(nil)
			kresp := kmsg.NewPtrApiVersionsResponse()
			kresp.Version = v
			if err := kresp.ReadFrom(b); err != nil {
				t.Fatalf("kmsg reading our response: %v", err)
			}
			if !bytes.Equal(kresp.AppendTo(nil), b) {
				t.Fatalf("response encodings differ\nkmsg: %x\n ours: %x", kresp.AppendTo(nil), b)
			}
			if len(kresp.ApiKeys) != 2 || kresp.ApiKeys[1].ApiKey != 1004 || kresp.ThrottleMillis != resp.ThrottleTimeMs {
				t.Fatalf("kmsg read %+v", kresp)
			}
		})
	}
}

// tagBytes encodes one tagged field.
func tagBytes(tag uint32, field []byte) []byte {
	b := kbin.AppendUvarint(nil, tag)
	b = kbin.AppendUvarint(b, uint32(len(field)))
	return append(b, field...)
}

// TestUnknownTagsSkipped decodes a DescribeClusterMirrorsResponse whose
// partition, mirror and top-level tag sections hold tags we do not know,
// between and after known ones.
func TestUnknownTagsSkipped(t *testing.T) {
	var b []byte
	b = appendStatus(b, 1, 2, strp("msg"))
	b = kbin.AppendCompactArrayLen(b, 1) // mirrors
	b = kbin.AppendInt16(b, 0)
	b = kbin.AppendCompactString(b, "m")
	b = kbin.AppendInt32(b, 5)
	b = kbin.AppendCompactArrayLen(b, 1) // topics
	b = kbin.AppendCompactString(b, "t")
	b = kbin.AppendCompactArrayLen(b, 1) // partitions
	b = kbin.AppendInt32(b, 0)
	b = kbin.AppendInt64(b, 10)
	b = kbin.AppendInt64(b, 8)
	b = kbin.AppendInt64(b, 2)
	b = kbin.AppendCompactString(b, "MIRRORING")
	b = kbin.AppendInt32(b, 3)
	b = kbin.AppendUvarint(b, 4) // partition tags: 0, 1, 99, 300
	b = append(b, tagBytes(0, kbin.AppendCompactNullableString(nil, strp("boom")))...)
	b = append(b, tagBytes(1, kbin.AppendInt32(nil, 9))...)
	b = append(b, tagBytes(99, []byte("future"))...)
	b = append(b, tagBytes(300, nil)...)
	b = kbin.AppendUvarint(b, 0) // topic tags
	b = kbin.AppendUvarint(b, 2) // mirror tags: 0, 42
	b = append(b, tagBytes(0, kbin.AppendCompactString(nil, "cluster"))...)
	b = append(b, tagBytes(42, bytes.Repeat([]byte{0xff}, 200))...)
	b = kbin.AppendUvarint(b, 1) // response tags: 5
	b = append(b, tagBytes(5, []byte{1, 2, 3})...)

	var got DescribeClusterMirrorsResponse
	if err := got.ReadFrom(b); err != nil {
		t.Fatalf("ReadFrom: %v", err)
	}
	want := DescribeClusterMirrorsResponse{
		ThrottleTimeMs: 1, ErrorCode: 2, ErrorMessage: strp("msg"),
		Mirrors: []DescribedMirror{{
			MirrorName: "m", AuthorizedOperations: 5, SourceClusterId: "cluster",
			Topics: []DescribedTopic{{TopicName: "t", Partitions: []PartitionDetail{{
				SourceOffset: 10, DestinationOffset: 8, Lag: 2, State: "MIRRORING", LastMirrorEpoch: 3,
				LastError: strp("boom"), OwnerBrokerId: 9,
				SourceUnreachableSinceMs: -1, LagTimeMs: -1, LastFetchTimestampMs: -1, MaxRetryAttempts: -1, MirroredBytes: -1,
			}}}},
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}

	// Every message with an empty top-level tag section also skips an
	// unknown tag there.
	for _, m := range sampleMessages() {
		b := m.AppendTo(nil)
		if api, _ := LookupAPI(m.Key()); len(b) == 0 || b[len(b)-1] != 0 || !api.Flexible(m.Version()) {
			continue
		}
		if r, ok := m.(*StartMirrorTopicsResponse); ok && len(r.Reseeded) > 0 {
			continue // its top-level tag section is not empty: it ends with the nested structures' tags
		}
		if isKmsg(m) {
			continue // kmsg keeps unknown tags (UnknownTags) rather than dropping them
		}
		withTag := append(b[:len(b)-1:len(b)-1], 1)
		withTag = append(withTag, tagBytes(99, []byte("unknown"))...)
		got := newLike(t, m)
		if err := got.ReadFrom(withTag); err != nil {
			t.Errorf("%s with an unknown tag: %v", sampleName(m), err)
			continue
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%s with an unknown tag decodes differently", sampleName(m))
		}
	}
}

func TestMalformedTags(t *testing.T) {
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"known tag with extra bytes", append([]byte{0x02, 'm', 0x01, 0x01, 0x01}, tagBytes(0, []byte{0x01, 0xff})...)},
		{"known tag too short", append([]byte{0x02, 'm', 0x01, 0x01, 0x01}, tagBytes(0, []byte{0x03, 0x02})...)},
		{"tag count beyond the data", []byte{0x02, 'm', 0x01, 0x01, 0x7f}},
		{"tag size beyond the data", []byte{0x02, 'm', 0x01, 0x01, 0x01, 0x05, 0x10, 0x00}},
		{"array longer than the data", []byte{0x02, 'm', 0x7f, 0x01, 0x00}},
		{"negative array length", []byte{0x02, 'm', 0x82, 0x80, 0x80, 0x80, 0x08, 0x01, 0x00}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r StopMirrorTopicsRequest
			if err := r.ReadFrom(tc.body); !errors.Is(err, ErrMalformed) {
				t.Fatalf("ReadFrom = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestErrorFor(t *testing.T) {
	if ErrorFor(0, strp("ignored")) != nil {
		t.Fatal("ErrorFor(0) != nil")
	}
	err := ErrorFor(3, strp("topic foo does not exist"))
	if err.Error() != "UNKNOWN_TOPIC_OR_PARTITION: topic foo does not exist" {
		t.Errorf("Error() = %q", err)
	}
	var ke *Error
	if !errors.As(err, &ke) || ke.Code != 3 || ke.Name() != "UNKNOWN_TOPIC_OR_PARTITION" {
		t.Errorf("errors.As: %+v", ke)
	}
	if got := ErrorFor(42, nil).Error(); got != "INVALID_REQUEST: This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details." {
		t.Errorf("without message: %q", got)
	}
	if got := (&Error{Code: 30000}).Name(); got != "UNKNOWN_SERVER_ERROR(30000)" {
		t.Errorf("unknown code name: %q", got)
	}
}

func TestIsRefusedSettings(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{ErrorFor(40, strp(RefusedSettingsPrefix+"config: sasl.mechanism: GSSAPI is not supported")), true},
		{fmt.Errorf("CreateClusterMirror: %w", ErrorFor(40, strp(RefusedSettingsPrefix+"unknown mirror config key"))), true},
		{ErrorFor(40, strp("cannot reach the source cluster at x:1")), false},
		{ErrorFor(40, nil), false},
		{ErrorFor(42, strp(RefusedSettingsPrefix+"not an INVALID_CONFIG")), false},
		{errors.New(RefusedSettingsPrefix + "not a Kafka error"), false},
		{nil, false},
	} {
		if got := IsRefusedSettings(tc.err); got != tc.want {
			t.Errorf("IsRefusedSettings(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// isKmsg reports whether m is one of Kafka's APIs that wrap franz-go's kmsg
// types (kafka_apis.go).
func isKmsg(m Message) bool {
	switch m.Key() {
	case KeySaslHandshake, KeySaslAuthenticate, KeyDescribeAcls, KeyCreateAcls, KeyDeleteAcls:
		return true
	}
	return false
}
