package protocol

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConfigAPIsMatchKmsg checks the DescribeConfigs and
// IncrementalAlterConfigs codecs against franz-go's for every sample and
// version: kmsg reads our encoding and re-encodes the same bytes, and we
// read kmsg's.
func TestConfigAPIsMatchKmsg(t *testing.T) {
	n := 0
	for _, m := range sampleMessages() {
		if m.Key() != KeyDescribeConfigs && m.Key() != KeyIncrementalAlterConfigs {
			continue
		}
		n++
		t.Run(sampleName(m), func(t *testing.T) {
			var km interface {
				SetVersion(int16)
				AppendTo([]byte) []byte
				ReadFrom([]byte) error
			}
			if _, isReq := m.(Request); isReq {
				km = kmsg.RequestForKey(m.Key())
			} else {
				km = kmsg.ResponseForKey(m.Key())
			}
			km.SetVersion(m.Version())
			ours := m.AppendTo(nil)
			if err := km.ReadFrom(ours); err != nil {
				t.Fatalf("kmsg cannot read our encoding: %v", err)
			}
			theirs := km.AppendTo(nil)
			if !bytes.Equal(ours, theirs) {
				t.Fatalf("encodings differ\n ours: %x\nkmsg: %x", ours, theirs)
			}
			back := newLike(t, m)
			if err := back.ReadFrom(theirs); err != nil {
				t.Fatalf("reading kmsg's encoding: %v", err)
			}
		})
	}
	if n < 8 {
		t.Fatalf("only %d samples of the config APIs", n)
	}
}

// TestDescribeConfigsV0IsDefault pins how version 0's IsDefault maps to
// ConfigSource.
func TestDescribeConfigsV0IsDefault(t *testing.T) {
	resp := &DescribeConfigsResponse{Results: []DescribeConfigsResult{{ResourceType: ResourceTypeClusterMirror, ResourceName: "m",
		Configs: []DescribeConfigsEntry{
			{Name: "a", ConfigSource: ConfigSourceDefault},
			{Name: "b", ConfigSource: ConfigSourceDynamicResource},
		}}}}
	kresp := kmsg.NewPtrDescribeConfigsResponse()
	if err := kresp.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	cs := kresp.Resources[0].Configs
	if !cs[0].IsDefault || cs[1].IsDefault {
		t.Fatalf("IsDefault = %v, %v; want true, false", cs[0].IsDefault, cs[1].IsDefault)
	}
	var back DescribeConfigsResponse
	if err := back.ReadFrom(kresp.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	if got := back.Results[0].Configs; got[0].ConfigSource != ConfigSourceDefault || got[1].ConfigSource != -1 {
		t.Fatalf("ConfigSource read back as %d, %d; want %d, -1", got[0].ConfigSource, got[1].ConfigSource, ConfigSourceDefault)
	}
}
