package sidecar

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// The raft.peers of the deployments the cases use: three hosts, and three
// sidecars on one host (the loopback test bed, a developer's machine).
const (
	threeHosts = "1@10.0.0.1:9192,2@10.0.0.2:9192,3@10.0.0.3:9192"
	oneHost    = "1@127.0.0.1:9192,2@127.0.0.1:9292,3@127.0.0.1:9392"
)

// docsThreeHost is what docs/installation.md sets on host 1 of a
// three-host deployment, beside the required keys.
var docsThreeHost = map[string]string{
	"admin.listener":            ":9191",
	"admin.advertised.listener": "10.0.0.1:9191",
	"raft.listener":             ":9192",
	"raft.peers":                threeHosts,
}

// with returns docsThreeHost with edits (an empty value deletes the key).
func with(edits map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range docsThreeHost {
		m[k] = v
	}
	for k, v := range edits {
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	return m
}

// TestAdvertisedErrors checks every refusal of an address the other
// sidecars cannot dial, by its whole line.
func TestAdvertisedErrors(t *testing.T) {
	cases := []struct {
		name  string
		edits map[string]string
		key   string
		want  string
	}{
		{
			name:  "the example's listeners in a group across hosts",
			edits: map[string]string{"raft.peers": threeHosts},
			key:   KeyAdminListener,
			want:  `config: admin.listener: "127.0.0.1:9191" is a loopback address, which the other sidecars in raft.peers (such as 2@10.0.0.2:9192) cannot reach (set admin.listener=:9191 to listen on every interface, and admin.advertised.listener=10.0.0.1:9191)`,
		},
		{
			name:  "every interface bound, no admin address advertised",
			edits: with(map[string]string{"admin.advertised.listener": ""}),
			key:   KeyAdminAdvertised,
			want:  `config: admin.advertised.listener: is not set, and admin.listener ":9191" listens on every interface, which is no address to dial (set admin.advertised.listener to an address of this host that the other sidecars reach, e.g. 10.0.0.1:9191)`,
		},
		{
			name:  "[::] bound, no admin address advertised, all on one host",
			edits: map[string]string{"admin.listener": "[::]:9191", "raft.peers": oneHost},
			key:   KeyAdminAdvertised,
			want:  `config: admin.advertised.listener: is not set, and admin.listener "[::]:9191" listens on every interface, which is no address to dial (set admin.advertised.listener to an address of this host that the other sidecars reach, e.g. <an address of this host>:9191)`,
		},
		{
			name:  "loopback admin address advertised",
			edits: with(map[string]string{"admin.advertised.listener": "127.0.0.1:9191"}),
			key:   KeyAdminAdvertised,
			want:  `config: admin.advertised.listener: "127.0.0.1:9191" is a loopback address, which the other sidecars in raft.peers (such as 2@10.0.0.2:9192) cannot reach (set it to an address of this host that they reach, e.g. 10.0.0.1:9191)`,
		},
		{
			name:  "localhost advertised",
			edits: with(map[string]string{"admin.advertised.listener": "localhost:9191"}),
			key:   KeyAdminAdvertised,
			want:  `config: admin.advertised.listener: "localhost:9191" is a loopback address, which the other sidecars in raft.peers (such as 2@10.0.0.2:9192) cannot reach (set it to an address of this host that they reach, e.g. 10.0.0.1:9191)`,
		},
		{
			name:  "wildcard admin address advertised",
			edits: with(map[string]string{"admin.advertised.listener": "0.0.0.0:9191"}),
			key:   KeyAdminAdvertised,
			want:  `config: admin.advertised.listener: "0.0.0.0:9191" is a wildcard address, which no sidecar can dial (set it to an address of this host that the other sidecars reach, e.g. 10.0.0.1:9191)`,
		},
		{
			name:  "wildcard admin address advertised by a group of one",
			edits: map[string]string{"admin.advertised.listener": "[::]:9191"},
			key:   KeyAdminAdvertised,
			want:  `config: admin.advertised.listener: "[::]:9191" is a wildcard address, which no sidecar can dial (set it to an address of this host that the other sidecars reach, e.g. <an address of this host>:9191)`,
		},
		{
			name:  "advertised port 0",
			edits: with(map[string]string{"admin.advertised.listener": "10.0.0.1:0"}),
			key:   KeyAdminAdvertised,
			want:  `config: admin.advertised.listener: "10.0.0.1:0" has port 0 (expected a number from 1 to 65535)`,
		},
		{
			name:  "advertised without port",
			edits: with(map[string]string{"admin.advertised.listener": "10.0.0.1"}),
			key:   KeyAdminAdvertised,
			want:  `config: admin.advertised.listener: "10.0.0.1" is not a host:port address: missing port in address (expected host:port, e.g. 127.0.0.1:9092)`,
		},
		{
			name:  "loopback admin.listener behind a routable advertised address",
			edits: with(map[string]string{"admin.listener": "127.0.0.1:9191"}),
			key:   KeyAdminListener,
			want:  `config: admin.listener: "127.0.0.1:9191" is a loopback address, which the other sidecars in raft.peers (such as 2@10.0.0.2:9192) cannot reach (set admin.listener=:9191 to listen on every interface, and admin.advertised.listener=10.0.0.1:9191)`,
		},
		{
			name:  "the example's raft.listener in a group across hosts",
			edits: with(map[string]string{"raft.listener": ""}),
			key:   KeyRaftListener,
			want:  `config: raft.listener: "127.0.0.1:9192" is a loopback address, which the other sidecars in raft.peers (such as 2@10.0.0.2:9192) cannot reach at 10.0.0.1:9192 (set raft.listener=:9192 to listen on every interface)`,
		},
		{
			name:  "raft address advertised other than raft.peers says",
			edits: with(map[string]string{"raft.advertised.listener": "10.0.0.9:9192"}),
			key:   KeyRaftAdvertised,
			want:  `config: raft.advertised.listener: "10.0.0.9:9192" differs from this sidecar's entry "1@10.0.0.1:9192" in raft.peers (expected the same address, where the other sidecars dial this one; or leave raft.advertised.listener unset)`,
		},
		{
			name:  "wildcard raft address advertised",
			edits: map[string]string{"raft.advertised.listener": "0.0.0.0:9192"},
			key:   KeyRaftAdvertised,
			want:  `config: raft.advertised.listener: "0.0.0.0:9192" is a wildcard address, which no sidecar can dial (set it to an address of this host that the other sidecars reach, e.g. <an address of this host>:9192)`,
		},
		{
			name:  "this sidecar on loopback in raft.peers, the others not",
			edits: with(map[string]string{"raft.peers": "1@127.0.0.1:9192,2@10.0.0.2:9192,3@10.0.0.3:9192"}),
			key:   KeyRaftPeers,
			want:  `config: raft.peers: this sidecar's entry "1@127.0.0.1:9192" is a loopback address, which the other sidecars (such as 2@10.0.0.2:9192) cannot reach (expected 1@<an address of this host that they reach>:9192)`,
		},
		{
			name:  "wildcard address in raft.peers",
			edits: with(map[string]string{"raft.peers": "1@10.0.0.1:9192,2@0.0.0.0:9192"}),
			key:   KeyRaftPeers,
			want:  `config: raft.peers: "2@0.0.0.0:9192": address "0.0.0.0:9192" is a wildcard address, which no sidecar can dial (expected 2@<the address of that sidecar's host>:9192)`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseText(t, propsText(baseProps, tc.edits))
			if err == nil {
				t.Fatalf("ParseConfig succeeded, want\n%s", tc.want)
			}
			if err.Error() != tc.want {
				t.Errorf("ParseConfig error\n%s\nwant\n%s", err, tc.want)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Key != tc.key || !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %#v does not name key %s as a ConfigError", err, tc.key)
			}
		})
	}
}

// TestAdvertisedDefaults checks what a valid configuration advertises: the
// admin address registered for forwarding, the fan-out and the liveness
// probes (from the address the listener was bound to), and the raft
// address.
func TestAdvertisedDefaults(t *testing.T) {
	cases := []struct {
		name       string
		edits      map[string]string
		bound      string // admin.listener's bound address, as net.Listener.Addr gives it
		admin      string
		raft       string
		raftGroup1 bool // a group of one: RaftMembers is this sidecar at raft
	}{
		{name: "the example's defaults, a group of one", bound: "127.0.0.1:9191", admin: "127.0.0.1:9191", raft: "127.0.0.1:9192", raftGroup1: true},
		{name: "any port on every interface, a group of one", edits: map[string]string{"admin.listener": ":0", "raft.listener": "0.0.0.0:9192"},
			bound: "[::]:41234", admin: "127.0.0.1:41234", raft: "127.0.0.1:9192", raftGroup1: true},
		{name: "[::], a group of one", edits: map[string]string{"admin.listener": "[::]:9191", "raft.listener": "[::]:9192"},
			bound: "[::]:9191", admin: "[::1]:9191", raft: "[::1]:9192", raftGroup1: true},
		{name: "the docs' three-host deployment", edits: docsThreeHost, bound: "[::]:9191", admin: "10.0.0.1:9191", raft: "10.0.0.1:9192"},
		{name: "three hosts, listeners on the host's address", edits: map[string]string{"admin.listener": "10.0.0.1:9191", "raft.listener": "10.0.0.1:9192", "raft.peers": threeHosts},
			bound: "10.0.0.1:9191", admin: "10.0.0.1:9191", raft: "10.0.0.1:9192"},
		{name: "three hosts by name", edits: map[string]string{"admin.listener": "kafka-1.example:9191", "raft.listener": ":9192",
			"raft.peers": "1@kafka-1.example:9192,2@kafka-2.example:9192,3@kafka-3.example:9192"},
			bound: "10.0.0.1:9191", admin: "kafka-1.example:9191", raft: "kafka-1.example:9192"},
		{name: "raft address advertised as raft.peers says", edits: with(map[string]string{"raft.advertised.listener": "10.0.0.1:9192"}),
			bound: "[::]:9191", admin: "10.0.0.1:9191", raft: "10.0.0.1:9192"},
		{name: "three sidecars on one host", edits: map[string]string{"admin.listener": "127.0.0.1:0", "raft.listener": "127.0.0.1:9192", "raft.peers": oneHost},
			bound: "127.0.0.1:40001", admin: "127.0.0.1:40001", raft: "127.0.0.1:9192"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseText(t, propsText(baseProps, tc.edits))
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			if got := cfg.AdminAdvertisedAddr(tc.bound); got != tc.admin {
				t.Errorf("AdminAdvertisedAddr(%s) = %s, want %s", tc.bound, got, tc.admin)
			}
			if got := cfg.RaftAdvertisedAddr(); got != tc.raft {
				t.Errorf("RaftAdvertisedAddr = %s, want %s", got, tc.raft)
			}
			if tc.raftGroup1 {
				if got, want := cfg.RaftMembers(), []RaftPeer{{1, tc.raft}}; !reflect.DeepEqual(got, want) {
					t.Errorf("RaftMembers = %v, want %v", got, want)
				}
			}
		})
	}
}

// TestDocsThreeHosts loads the three-host configuration of
// docs/installation.md as host 1 and checks the addresses it advertises,
// and that the error the section quotes for the example's loopback
// listeners is the one the sidecar gives.
func TestDocsThreeHosts(t *testing.T) {
	data, err := os.ReadFile("../docs/installation.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Three hosts\n")
	if !ok {
		t.Fatal(`docs/installation.md has no section "## Three hosts"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```properties\n")
	if !ok {
		t.Fatal("the section has no properties block")
	}
	block, _, _ = strings.Cut(block, "```")
	cfg, err := parseText(t, block)
	if err != nil {
		t.Fatalf("the section's configuration does not load: %v", err)
	}
	if got := cfg.AdminAdvertisedAddr("[::]:9191"); got != "10.0.0.1:9191" {
		t.Errorf("admin address advertised: %s, want 10.0.0.1:9191", got)
	}
	if got := cfg.RaftAdvertisedAddr(); got != "10.0.0.1:9192" {
		t.Errorf("raft address advertised: %s, want 10.0.0.1:9192", got)
	}

	example, err := os.ReadFile("../deploy/examples/sidecar.properties")
	if err != nil {
		t.Fatal(err)
	}
	_, err = parseText(t, string(example)+"raft.peers="+formatPeers(cfg.RaftPeers)+"\n")
	if err == nil {
		t.Fatal("the example with the section's raft.peers loads, want the loopback error")
	}
	if quoted := "sidemirror: " + err.Error() + "\n"; !strings.Contains(section, "\n"+quoted) {
		t.Errorf("the section does not quote the error the example gives in this group:\n%s", quoted)
	}
}
