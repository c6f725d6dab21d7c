package deploycheck

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/sidemirror/sidemirror/sidecar"
)

const manifestDir = "../../deploy/kubernetes"

// manifests is what one directory of deploy/kubernetes declares.
type manifests struct {
	dir          string
	statefulSets []*appsv1.StatefulSet
	services     []*corev1.Service
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret
	strimzi      map[string][]map[string]any // kind: objects (Kafka, KafkaNodePool, KafkaUser)
}

// load parses every YAML document under dir into its Kubernetes type,
// refusing unknown fields, or (Strimzi's kinds, which have no Go types
// here) into a map.
func load(t *testing.T, dir string) *manifests {
	t.Helper()
	m := &manifests{dir: dir, configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		strimzi: map[string][]map[string]any{}}
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests in %s (%v)", dir, err)
	}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			where := fmt.Sprintf("%s, document %d", filepath.Base(path), i+1)
			var meta struct{ APIVersion, Kind string }
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			strict := func(v any) {
				if err := yaml.UnmarshalStrict([]byte(doc), v); err != nil {
					t.Fatalf("%s (%s): %v", where, meta.Kind, err)
				}
			}
			switch meta.APIVersion + " " + meta.Kind {
			case "apps/v1 StatefulSet":
				var s appsv1.StatefulSet
				strict(&s)
				m.statefulSets = append(m.statefulSets, &s)
			case "v1 Service":
				var s corev1.Service
				strict(&s)
				m.services = append(m.services, &s)
			case "v1 ConfigMap":
				var c corev1.ConfigMap
				strict(&c)
				m.configMaps[c.Name] = &c
			case "v1 Secret":
				var s corev1.Secret
				strict(&s)
				m.secrets[s.Name] = &s
			case "kafka.strimzi.io/v1beta2 Kafka", "kafka.strimzi.io/v1beta2 KafkaNodePool", "kafka.strimzi.io/v1beta2 KafkaUser":
				var o map[string]any
				strict(&o)
				m.strimzi[meta.Kind] = append(m.strimzi[meta.Kind], o)
			default:
				t.Fatalf("%s: kind %q of %q is not one this test checks: add it", where, meta.Kind, meta.APIVersion)
			}
		}
	}
	return m
}

func stripComments(doc string) string {
	var b strings.Builder
	for line := range strings.Lines(doc) {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// pod is one pod a StatefulSet creates.
type pod struct {
	name, namespace string
	ordinal         int
	labels          map[string]string
	sts             *appsv1.StatefulSet
}

func (m *manifests) pods() []pod {
	var pods []pod
	for _, s := range m.statefulSets {
		replicas := 1
		if s.Spec.Replicas != nil {
			replicas = int(*s.Spec.Replicas)
		}
		for i := range replicas {
			labels := map[string]string{
				"apps.kubernetes.io/pod-index":       strconv.Itoa(i),
				"statefulset.kubernetes.io/pod-name": fmt.Sprintf("%s-%d", s.Name, i),
			}
			for k, v := range s.Spec.Template.Labels {
				labels[k] = v
			}
			pods = append(pods, pod{name: fmt.Sprintf("%s-%d", s.Name, i), namespace: s.Namespace, ordinal: i, labels: labels, sts: s})
		}
	}
	return pods
}

// sidecarContainer returns the pod's sidemirror container and whether it
// is a native sidecar (an init container with restartPolicy Always).
func sidecarContainer(spec *corev1.PodSpec) (*corev1.Container, bool) {
	for i, c := range spec.InitContainers {
		if c.Name == "sidemirror" {
			return &spec.InitContainers[i], c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		}
	}
	for i, c := range spec.Containers {
		if c.Name == "sidemirror" {
			return &spec.Containers[i], false
		}
	}
	return nil, false
}

// env resolves container c's environment in pod p as the kubelet would,
// with the pod IP a documentation address and Secrets from the manifests
// (or, for a KafkaUser's Secret, what Strimzi's User Operator writes).
func (m *manifests) env(t *testing.T, p pod, c *corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for _, e := range c.Env {
		where := fmt.Sprintf("%s: container %s: env %s", p.name, c.Name, e.Name)
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = ref.ReplaceAllStringFunc(e.Value, func(s string) string {
				if v, ok := env[s[2:len(s)-1]]; ok {
					return v
				}
				return s
			})
		case e.ValueFrom.FieldRef != nil:
			path := e.ValueFrom.FieldRef.FieldPath
			switch {
			case path == "metadata.name":
				env[e.Name] = p.name
			case path == "status.podIP":
				env[e.Name] = fmt.Sprintf("192.0.2.%d", 10+p.ordinal)
			case strings.HasPrefix(path, "metadata.labels['"):
				label := strings.TrimSuffix(strings.TrimPrefix(path, "metadata.labels['"), "']")
				v, ok := p.labels[label]
				if !ok {
					t.Fatalf("%s: the pod has no label %q", where, label)
				}
				env[e.Name] = v
			default:
				t.Fatalf("%s: field %q is not one this test knows", where, path)
			}
		case e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = m.secretValue(t, where, e.ValueFrom.SecretKeyRef)
		case e.ValueFrom.ResourceFieldRef != nil:
			env[e.Name] = "1073741824"
		default:
			t.Fatalf("%s: a source this test does not know", where)
		}
	}
	return env
}

func (m *manifests) secretValue(t *testing.T, where string, ref *corev1.SecretKeySelector) string {
	t.Helper()
	if s, ok := m.secrets[ref.Name]; ok {
		if v, ok := s.StringData[ref.Key]; ok {
			return v
		}
		if v, ok := s.Data[ref.Key]; ok {
			return string(v)
		}
		t.Fatalf("%s: Secret %s has no key %q", where, ref.Name, ref.Key)
	}
	for _, u := range m.strimzi["KafkaUser"] {
		if str(u, "metadata", "name") != ref.Name {
			continue
		}
		if str(u, "spec", "authentication", "type") != "scram-sha-512" {
			t.Fatalf("%s: KafkaUser %s does not use scram-sha-512", where, ref.Name)
		}
		switch ref.Key {
		case "password":
			return "strimzi-generated"
		case "sasl.jaas.config":
			return `org.apache.kafka.common.security.scram.ScramLoginModule required username="` + ref.Name + `" password="strimzi-generated";`
		}
		t.Fatalf("%s: Strimzi's Secret of KafkaUser %s has no key %q (password, sasl.jaas.config)", where, ref.Name, ref.Key)
	}
	t.Fatalf("%s: no Secret or KafkaUser %s in %s", where, ref.Name, m.dir)
	return ""
}

// sidecarConfig loads the sidemirror config of container c in pod p with
// sidemirror's own parser, its ${env:...} references resolved from the
// container's environment.
func (m *manifests) sidecarConfig(t *testing.T, p pod, c *corev1.Container) sidecar.Config {
	t.Helper()
	if len(c.Args) != 3 || c.Args[0] != "run" || c.Args[1] != "--config" {
		t.Fatalf("%s: sidemirror args %q, want run --config <file>", p.name, c.Args)
	}
	path := c.Args[2]
	var data string
	for _, vm := range c.VolumeMounts {
		if filepath.Dir(path) != filepath.Clean(vm.MountPath) {
			continue
		}
		for _, v := range p.sts.Spec.Template.Spec.Volumes {
			if v.Name == vm.Name && v.ConfigMap != nil {
				cm, ok := m.configMaps[v.ConfigMap.Name]
				if !ok {
					t.Fatalf("%s: volume %s names ConfigMap %s, which the manifests lack", p.name, v.Name, v.ConfigMap.Name)
				}
				if data, ok = cm.Data[filepath.Base(path)]; !ok {
					t.Fatalf("%s: ConfigMap %s has no key %s", p.name, cm.Name, filepath.Base(path))
				}
			}
		}
	}
	if data == "" {
		t.Fatalf("%s: no ConfigMap is mounted where --config %s points", p.name, path)
	}
	for k, v := range m.env(t, p, c) {
		t.Setenv(k, v)
	}
	file := filepath.Join(t.TempDir(), "sidecar.properties")
	if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := sidecar.LoadConfig(file)
	if err != nil {
		t.Fatalf("%s: sidemirror refuses the config of ConfigMap key %s: %v", p.name, filepath.Base(path), err)
	}
	return cfg
}

// containerPort resolves a probe's or Service's port (a number or a port
// name) against container c.
func containerPort(c *corev1.Container, port intstr.IntOrString) int32 {
	if port.Type == intstr.Int {
		return port.IntVal
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return p.ContainerPort
		}
	}
	return -1
}

func listenerPort(t *testing.T, where, addr string) (host string, port int32) {
	t.Helper()
	h, ps, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s: %q: %v", where, addr, err)
	}
	n, err := strconv.Atoi(ps)
	if err != nil {
		t.Fatalf("%s: %q: %v", where, addr, err)
	}
	return h, int32(n)
}

// sidecarPod is a pod running sidemirror, with its resolved config.
type sidecarPod struct {
	pod
	c      *corev1.Container
	native bool
	cfg    sidecar.Config
}

// checkSidecars checks what every sidemirror pod needs whatever runs the
// broker, and returns the pods.
func (m *manifests) checkSidecars(t *testing.T) []sidecarPod {
	t.Helper()
	var sps []sidecarPod
	for _, p := range m.pods() {
		c, native := sidecarContainer(&p.sts.Spec.Template.Spec)
		if c == nil {
			continue
		}
		sps = append(sps, sidecarPod{p, c, native, m.sidecarConfig(t, p, c)})
	}
	if len(sps) == 0 {
		t.Fatalf("no pod in %s runs a container named sidemirror", m.dir)
	}
	ids := map[int32]sidecarPod{}
	for _, sp := range sps {
		where := sp.name + ": sidemirror"
		cfg := sp.cfg
		if prev, dup := ids[cfg.LocalBrokerID]; dup {
			t.Errorf("%s and %s both have local.broker.id %d", prev.name, sp.name, cfg.LocalBrokerID)
		}
		ids[cfg.LocalBrokerID] = sp

		// Probes reach http.listener; /readyz for readiness, /healthz for liveness.
		// A sidecar in the broker's pod leaves the source check out: a
		// source outage must not take the destination brokers' pods out of
		// service (PodDisruptionBudgets, rolling updates).
		readyz := "/readyz"
		if sp.native {
			readyz = "/readyz?exclude=sources"
		}
		httpHost, httpPort := listenerPort(t, where+": http.listener", cfg.HTTPListener)
		if httpHost != "" && httpHost != "0.0.0.0" && httpHost != "::" {
			t.Errorf("%s: http.listener %s is not reachable by the kubelet's probes (bind 0.0.0.0)", where, cfg.HTTPListener)
		}
		for _, probe := range []struct {
			name, path string
			p          *corev1.Probe
		}{{"readinessProbe", readyz, sp.c.ReadinessProbe}, {"livenessProbe", "/healthz", sp.c.LivenessProbe}} {
			switch {
			case probe.p == nil || probe.p.HTTPGet == nil:
				t.Errorf("%s: no HTTP %s", where, probe.name)
			case probe.p.HTTPGet.Path != probe.path:
				t.Errorf("%s: %s on %s, want %s", where, probe.name, probe.p.HTTPGet.Path, probe.path)
			case containerPort(sp.c, probe.p.HTTPGet.Port) != httpPort:
				t.Errorf("%s: %s port %s is not http.listener's %d", where, probe.name, probe.p.HTTPGet.Port.String(), httpPort)
			}
		}
		if sp.c.StartupProbe != nil && sp.native {
			t.Errorf("%s: a native sidecar's startupProbe holds back the broker's start until it passes, and readiness needs the broker", where)
		}
		// The admin address is registered in raft: the others forward to it.
		if h, _ := listenerPort(t, where+": admin.listener", cfg.AdminListener); h == "" || net.ParseIP(h) == nil || net.ParseIP(h).IsUnspecified() || net.ParseIP(h).IsLoopback() {
			t.Errorf("%s: admin.listener %s: the other sidecars forward to this address; bind the pod IP", where, cfg.AdminListener)
		}
		// Every listener has a container port.
		for key, addr := range map[string]string{"admin.listener": cfg.AdminListener, "raft.listener": cfg.RaftListener, "http.listener": cfg.HTTPListener} {
			_, port := listenerPort(t, where+": "+key, addr)
			if !slices.ContainsFunc(sp.c.Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == port }) {
				t.Errorf("%s: %s port %d is not a container port", where, key, port)
			}
		}
		// data.dir persists: a volume claim of the StatefulSet.
		persistent := false
		for _, vm := range sp.c.VolumeMounts {
			if filepath.Clean(vm.MountPath) == cfg.DataDir {
				for _, vc := range sp.sts.Spec.VolumeClaimTemplates {
					persistent = persistent || vc.Name == vm.Name
				}
			}
		}
		if !persistent {
			t.Errorf("%s: data.dir %s is not on a volume claim (raft state must survive a restart)", where, cfg.DataDir)
		}
		// Non-root, read-only root file system (the image's user is 65532).
		sc, psc := sp.c.SecurityContext, sp.sts.Spec.Template.Spec.SecurityContext
		nonRoot := (sc != nil && sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) || (psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot)
		if !nonRoot || sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: want runAsNonRoot and readOnlyRootFilesystem", where)
		}
		// raft.peers: the same list everywhere, each entry a sidecar pod's
		// stable name on a headless Service that publishes not-ready pods.
		if len(cfg.RaftPeers) != len(sps) && len(sps) > 1 {
			t.Errorf("%s: raft.peers lists %d sidecars, the manifests run %d", where, len(cfg.RaftPeers), len(sps))
		}
		if got, want := fmt.Sprint(cfg.RaftPeers), fmt.Sprint(sps[0].cfg.RaftPeers); got != want {
			t.Errorf("%s: raft.peers %s differs from %s's %s", where, got, sps[0].name, want)
		}
	}
	_, raftPort := listenerPort(t, "raft.listener", sps[0].cfg.RaftListener)
	for _, peer := range sps[0].cfg.RaftPeers {
		sp, ok := ids[peer.ID]
		if !ok {
			t.Errorf("raft.peers names sidecar %d, which no pod runs", peer.ID)
			continue
		}
		want := fmt.Sprintf("%s.%s.%s.svc.cluster.local:%d", sp.name, sp.sts.Spec.ServiceName, sp.namespace, raftPort)
		if peer.Address != want {
			t.Errorf("raft.peers: %d@%s, want %d@%s (pod %s)", peer.ID, peer.Address, peer.ID, want, sp.name)
		}
		svc := m.service(sp.sts.Spec.ServiceName)
		switch {
		case svc == nil:
			t.Errorf("%s: serviceName %s is not in the manifests", sp.sts.Name, sp.sts.Spec.ServiceName)
		case svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses:
			t.Errorf("Service %s: raft peers resolve through it before they are ready: want clusterIP None and publishNotReadyAddresses", svc.Name)
		case !selects(svc.Spec.Selector, sp.labels):
			t.Errorf("Service %s does not select pod %s", svc.Name, sp.name)
		}
	}
	return sps
}

func (m *manifests) service(name string) *corev1.Service {
	for _, s := range m.services {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkServices: every Service selects pods, and its ports exist in them.
func (m *manifests) checkServices(t *testing.T) {
	for _, svc := range m.services {
		matched := false
		for _, p := range m.pods() {
			if !selects(svc.Spec.Selector, p.labels) {
				continue
			}
			matched = true
			spec := p.sts.Spec.Template.Spec
			for _, sp := range svc.Spec.Ports {
				target := sp.TargetPort
				if target.Type == intstr.Int && target.IntVal == 0 {
					target = intstr.FromInt32(sp.Port)
				}
				found := false
				for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
					found = found || containerPort(&c, target) > 0 && (target.Type == intstr.String || slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.ContainerPort == target.IntVal }))
				}
				if !found {
					t.Errorf("Service %s port %s: pod %s has no container port %s", svc.Name, sp.Name, p.name, target.String())
				}
			}
		}
		if !matched {
			t.Errorf("Service %s selects no pod of the manifests", svc.Name)
		}
	}
}

// The StatefulSet example: brokers with sidemirror as a native sidecar.
func TestStatefulSetExample(t *testing.T) {
	m := load(t, filepath.Join(manifestDir, "statefulset"))
	m.checkServices(t)
	sps := m.checkSidecars(t)
	for _, sp := range sps {
		where := sp.name
		if !sp.native {
			t.Errorf("%s: sidemirror is not a native sidecar (an init container with restartPolicy: Always)", where)
		}
		if r := sp.sts.Spec.Replicas; r != nil && *r > 1 && sp.sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
			t.Errorf("%s: podManagementPolicy %q: with OrderedReady the second pod waits for the first to be ready, which needs a raft majority", sp.sts.Name, sp.sts.Spec.PodManagementPolicy)
		}
		// The broker in the same pod.
		var kafka *corev1.Container
		for i, c := range sp.sts.Spec.Template.Spec.Containers {
			if c.Name == "kafka" {
				kafka = &sp.sts.Spec.Template.Spec.Containers[i]
			}
		}
		if kafka == nil {
			t.Fatalf("%s: no container kafka", where)
		}
		benv := m.env(t, sp.pod, kafka)
		nodeID := benv["KAFKA_NODE_ID"]
		if nodeID != strconv.Itoa(int(sp.cfg.LocalBrokerID)) || nodeID != strconv.Itoa(sp.ordinal) {
			t.Errorf("%s: broker node.id %q, sidecar local.broker.id %d, pod ordinal %d: want all equal", where, nodeID, sp.cfg.LocalBrokerID, sp.ordinal)
		}
		// local.bootstrap.servers: the broker's listener on loopback.
		if len(sp.cfg.LocalBootstrapServers) != 1 {
			t.Fatalf("%s: local.bootstrap.servers %q, want the broker's one listener", where, sp.cfg.LocalBootstrapServers)
		}
		host, port := listenerPort(t, where+": local.bootstrap.servers", sp.cfg.LocalBootstrapServers[0])
		listeners := benv["KAFKA_LISTENERS"]
		protoMap := benv["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"]
		listener := ""
		for l := range strings.SplitSeq(listeners, ",") {
			name, addr, _ := strings.Cut(l, "://")
			if strings.HasSuffix(addr, fmt.Sprintf(":%d", port)) {
				listener = name
			}
		}
		if host != "127.0.0.1" && host != "localhost" || listener == "" {
			t.Fatalf("%s: local.bootstrap.servers %s is not a listener of the broker in the pod (%s)", where, sp.cfg.LocalBootstrapServers[0], listeners)
		}
		if !strings.Contains(","+protoMap+",", ","+listener+":"+sp.cfg.Destination.SecurityProtocol+",") {
			t.Errorf("%s: the sidecar speaks %s, the broker's listener %s is %s", where, sp.cfg.Destination.SecurityProtocol, listener, protoMap)
		}
		// The sidecar's SASL user exists on that listener and is a super user.
		user := regexp.MustCompile(`username="([^"]+)"`).FindStringSubmatch(sp.cfg.Destination.SASLJAASConfig)
		if user == nil {
			t.Fatalf("%s: destination.sasl.jaas.config names no username", where)
		}
		jaas := benv["KAFKA_LISTENER_NAME_"+strings.ToUpper(listener)+"_"+strings.ReplaceAll(sp.cfg.Destination.SASLMechanism, "-", "_")+"_SASL_JAAS_CONFIG"]
		pw := regexp.MustCompile(`password="([^"]+)"`).FindStringSubmatch(sp.cfg.Destination.SASLJAASConfig)
		if pw == nil || !strings.Contains(jaas, `user_`+user[1]+`="`+pw[1]+`"`) {
			t.Errorf("%s: the broker's %s listener has no PLAIN user %s with the sidecar's password", where, listener, user[1])
		}
		superUsers := benv["KAFKA_SUPER_USERS"]
		if !slices.Contains(strings.Split(superUsers, ";"), "User:"+user[1]) {
			t.Errorf("%s: User:%s is not in the broker's super.users %q", where, user[1], superUsers)
		}
		if a := benv["KAFKA_AUTHORIZER_CLASS_NAME"]; a == "" {
			t.Errorf("%s: the broker has no authorizer; read-only mirror topics need one", where)
		}
		allow := benv["KAFKA_ALLOW_EVERYONE_IF_NO_ACL_FOUND"]
		if allow == "" {
			allow = "false"
		}
		if sp.cfg.AllowEveryone != allow {
			t.Errorf("%s: readonly.allow.everyone.if.no.acl.found=%s, the broker has %s", where, sp.cfg.AllowEveryone, allow)
		}
	}
}

// The Strimzi recipe: sidecar pods beside Strimzi's broker pods.
func TestStrimziRecipe(t *testing.T) {
	m := load(t, filepath.Join(manifestDir, "strimzi"))
	sps := m.checkSidecars(t)
	if len(m.strimzi["Kafka"]) != 1 {
		t.Fatalf("want one Kafka, got %d", len(m.strimzi["Kafka"]))
	}
	kafka := m.strimzi["Kafka"][0]
	cluster, ns := str(kafka, "metadata", "name"), str(kafka, "metadata", "namespace")
	// Broker pods: <cluster>-<pool>-<node ID> of every broker pool.
	brokerPods := map[string]int{}
	for _, pool := range m.strimzi["KafkaNodePool"] {
		if str(pool, "metadata", "labels", "strimzi.io/cluster") != cluster {
			continue
		}
		roles, _ := get(pool, "spec", "roles").([]any)
		if !slices.Contains(roles, any("broker")) {
			continue
		}
		lo, hi := nodeIDRange(t, str(pool, "metadata", "annotations", "strimzi.io/next-node-ids"))
		replicas, _ := get(pool, "spec", "replicas").(float64)
		if hi-lo+1 != int(replicas) {
			t.Errorf("KafkaNodePool %s: next-node-ids [%d-%d] for %v replicas", str(pool, "metadata", "name"), lo, hi, replicas)
		}
		for id := lo; id <= hi; id++ {
			brokerPods[fmt.Sprintf("%s-%s-%d", cluster, str(pool, "metadata", "name"), id)] = id
		}
	}
	if len(brokerPods) != len(sps) {
		t.Errorf("%d broker pods, %d sidecars: want one sidecar per broker", len(brokerPods), len(sps))
	}
	// The sidecars' user and the cluster's authorization.
	superUsers, _ := get(kafka, "spec", "kafka", "authorization", "superUsers").([]any)
	if str(kafka, "spec", "kafka", "authorization", "type") != "simple" {
		t.Errorf("Kafka %s: authorization type %q, want simple (read-only mirror topics need an authorizer)", cluster, str(kafka, "spec", "kafka", "authorization", "type"))
	}
	allow := fmt.Sprint(get(kafka, "spec", "kafka", "config", "allow.everyone.if.no.acl.found"))
	if allow == "<nil>" {
		allow = "false"
	}
	listeners, _ := get(kafka, "spec", "kafka", "listeners").([]any)
	for _, sp := range sps {
		where := sp.name
		// Scheduled beside broker local.broker.id.
		aff := sp.sts.Spec.Template.Spec.Affinity
		if aff == nil || aff.PodAffinity == nil || len(aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
			t.Fatalf("%s: want one required pod affinity term", where)
		}
		term := aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
		brokerPod := term.LabelSelector.MatchLabels["strimzi.io/pod-name"]
		if id, ok := brokerPods[brokerPod]; !ok || int32(id) != sp.cfg.LocalBrokerID || term.TopologyKey != "kubernetes.io/hostname" {
			t.Errorf("%s: affinity to pod %q on %s; local.broker.id %d is the broker of pod %v", where, brokerPod, term.TopologyKey, sp.cfg.LocalBrokerID, brokerPods)
		}
		// local.bootstrap.servers: that broker's own name and a listener
		// whose security matches the sidecar's.
		if len(sp.cfg.LocalBootstrapServers) != 1 {
			t.Fatalf("%s: local.bootstrap.servers %q, want its broker", where, sp.cfg.LocalBootstrapServers)
		}
		host, port := listenerPort(t, where, sp.cfg.LocalBootstrapServers[0])
		if want := fmt.Sprintf("%s.%s-kafka-brokers.%s.svc.cluster.local", brokerPod, cluster, ns); host != want {
			t.Errorf("%s: local.bootstrap.servers host %s, want %s", where, host, want)
		}
		var listener map[string]any
		for _, l := range listeners {
			if lm, _ := l.(map[string]any); lm != nil && lm["port"] == float64(port) {
				listener = lm
			}
		}
		if listener == nil {
			t.Fatalf("%s: Kafka %s has no listener on port %d", where, cluster, port)
		}
		proto := "SASL_PLAINTEXT"
		if listener["tls"] == true {
			proto = "SASL_SSL"
		}
		auth := strings.ToUpper(str(listener, "authentication", "type"))
		if sp.cfg.Destination.SecurityProtocol != proto || sp.cfg.Destination.SASLMechanism != auth {
			t.Errorf("%s: the sidecar uses %s %s, listener %v is %s %s", where, sp.cfg.Destination.SecurityProtocol, sp.cfg.Destination.SASLMechanism, listener["name"], proto, auth)
		}
		user := regexp.MustCompile(`username="([^"]+)"`).FindStringSubmatch(sp.cfg.Destination.SASLJAASConfig)
		if user == nil || !slices.Contains(superUsers, any(user[1])) {
			t.Errorf("%s: the sidecar's user %v is not a super user of Kafka %s (%v)", where, user, cluster, superUsers)
		}
		if sp.cfg.AllowEveryone != allow {
			t.Errorf("%s: readonly.allow.everyone.if.no.acl.found=%s, Kafka %s has %s", where, sp.cfg.AllowEveryone, cluster, allow)
		}
	}
	m.checkServices(t)
}

func nodeIDRange(t *testing.T, s string) (int, int) {
	t.Helper()
	mm := regexp.MustCompile(`^\[(\d+)-(\d+)\]$`).FindStringSubmatch(s)
	if mm == nil {
		t.Fatalf("strimzi.io/next-node-ids %q: want [lo-hi], the IDs raft.peers names", s)
	}
	lo, _ := strconv.Atoi(mm[1])
	hi, _ := strconv.Atoi(mm[2])
	return lo, hi
}

func get(o any, path ...string) any {
	for _, p := range path {
		m, ok := o.(map[string]any)
		if !ok {
			return nil
		}
		o = m[p]
	}
	return o
}

func str(o any, path ...string) string {
	s, _ := get(o, path...).(string)
	return s
}
