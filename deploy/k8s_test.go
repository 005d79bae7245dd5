package deploy

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	"github.com/tunnelbench/tunnelbench/deploy/secrets"
)

// TestManifestsDecodeStrictly: what kustomize builds, every manifest file as written (the results reader
// pod too, which no kustomization lists) and the kustomizations themselves decode into their API types
// without an unknown or duplicated field, and the deployment has the parts it is meant to have.
func TestManifestsDecodeStrictly(t *testing.T) {
	c := render(t)
	want := map[string]int{"Namespace": 1, "StatefulSet": 1, "Deployment": 3, "Job": 1, "Service": 4,
		"Secret": 6, "PersistentVolumeClaim": 1, "PodDisruptionBudget": 1}
	for k, n := range want {
		if c.objects[k] != n {
			t.Errorf("%d %s, want %d", c.objects[k], k, n)
		}
	}
	if c.namespace != secrets.DefaultNS {
		t.Errorf("namespace %q, but the generated certificate names Services in %q", c.namespace, secrets.DefaultNS)
	}
	if kas := c.workload(t, "kas"); kas.kind != "StatefulSet" || kas.replicas < 2 {
		t.Errorf("kas: %s with %d replicas, want a StatefulSet of several", kas, kas.replicas)
	}
	if a := c.workload(t, "agentk"); a.replicas < 2 {
		t.Errorf("agentk: %d replicas, want several", a.replicas)
	}

	for _, f := range manifestFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(f) == "kustomization.yaml" {
			var k types.Kustomization
			if err := yaml.UnmarshalStrict(b, &k); err != nil {
				t.Errorf("%s: %v", f, err)
			}
			continue
		}
		for i, doc := range strings.Split(string(b), "\n---\n") {
			var meta struct{ APIVersion, Kind string }
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Errorf("%s, document %d: %v", f, i+1, err)
				continue
			}
			if _, err := decodeStrict(meta.APIVersion, meta.Kind, []byte(doc)); err != nil {
				t.Errorf("%s, document %d: %v", f, i+1, err)
			}
		}
	}

	// A misspelled field fails: the decoding is strict.
	if _, err := decodeStrict("v1", "Service", []byte("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {selectr: {a: b}}\n")); err == nil {
		t.Error("a misspelled field decoded")
	}
}

// TestContainerArgs: every container of the tunnelbench image, in every pod (each kas replica with its
// own name), runs one of the image's binaries with arguments that its real parser accepts, after kubelet's
// $(VAR) expansion and with every file flag reading a key of a mounted Secret.
func TestContainerArgs(t *testing.T) {
	c := render(t)
	ps := c.processes(t)
	seen := map[string]int{}
	for _, p := range ps {
		seen[p.binary]++
	}
	kas := c.workload(t, "kas")
	want := map[string]int{"kas": kas.replicas, "agentk": c.workload(t, "agentk").replicas, "tunnelbench bench": 1, "tunnelbench demo-server": c.workload(t, "demo").replicas}
	for b, n := range want {
		if seen[b] != n {
			t.Errorf("%d pods run %s, want %d", seen[b], b, n)
		}
	}
	for _, p := range ps {
		switch {
		case p.kas != nil:
			if p.kas.TLS == nil || p.kas.Dev || p.kas.Redis == nil || p.kas.PrivateAPISecret == nil {
				t.Errorf("%s: kas without TLS, tracker or private API secret, or in --dev", p)
			}
		case p.agentk != nil:
			if p.agentk.TLS == nil {
				t.Errorf("%s: agentk dials kas in plaintext", p)
			}
		case p.bench != nil:
			if p.bench.Config.Target == "" {
				t.Errorf("%s: bench without --target would start its own topology", p)
			}
			for _, f := range []string{"kas-ca-file", "token-file"} {
				if _, ok := p.flag(f); !ok {
					t.Errorf("%s: no --%s: kas serves TLS and wants a caller token", p, f)
				}
			}
		}
	}

	// The checks catch what kubelet would hand over wrong.
	if _, err := expand("--private-url=grpcs://$(POD_NAM).kas-peers:8155", map[string]string{"POD_NAME": "kas-0"}); err == nil {
		t.Error("an undefined variable expanded")
	}
	if got, _ := expand("$$(POD_NAME)-$(POD_NAME)", map[string]string{"POD_NAME": "kas-0"}); got != "$(POD_NAME)-kas-0" {
		t.Errorf("expand: %q", got)
	}
	w := c.workload(t, "agentk")
	bad := w.pod.Spec.Containers[0].DeepCopy()
	bad.Args = append(bad.Args, "--token-file=/etc/agentk/token/missing")
	if _, err := c.parse(t, w, bad, "agentk-x"); err == nil || !strings.Contains(err.Error(), "no key of volume") {
		t.Errorf("a file flag outside the secret: %v", err)
	}
	bad.Args = append(bad.Args[:len(bad.Args)-1], "--min-idel=2")
	if _, err := c.parse(t, w, bad, "agentk-x"); err == nil {
		t.Error("a misspelled flag parsed")
	}
}

// TestPortsAndServices: each container declares exactly the ports its process listens on, on every
// interface (a loopback listener in a pod is unreachable); every Service selects pods, and each of its
// ports leads to a declared container port; every probe's port is declared.
func TestPortsAndServices(t *testing.T) {
	c := render(t)
	for _, p := range c.processes(t) {
		listens := p.listens()
		if bad, ok := listens[-1]; ok {
			t.Errorf("%s: %s is not host:port", p, bad)
		}
		for _, a := range p.listenAddrs() {
			_, addr, _ := strings.Cut(a, "=")
			host, _, _ := net.SplitHostPort(addr)
			if host != "" && host != "0.0.0.0" && host != "::" {
				t.Errorf("%s: %s listens on %s only, which other pods cannot reach", p, a, host)
			}
		}
		declared := map[int32]bool{}
		for _, cp := range p.c.Ports {
			declared[cp.ContainerPort] = true
			if listens[cp.ContainerPort] == "" {
				t.Errorf("%s: declares port %d (%s), on which it does not listen", p, cp.ContainerPort, cp.Name)
			}
		}
		for port, flag := range listens {
			if port > 0 && !declared[port] {
				t.Errorf("%s: listens on %d (%s) but does not declare it", p, port, flag)
			}
		}
	}
	for _, w := range c.workloads {
		for _, ct := range w.pod.Spec.Containers {
			for _, pr := range []*corev1.Probe{ct.ReadinessProbe, ct.LivenessProbe, ct.StartupProbe} {
				if pr == nil {
					continue
				}
				var port intstr.IntOrString
				switch h := pr.ProbeHandler; {
				case h.HTTPGet != nil:
					port = h.HTTPGet.Port
				case h.TCPSocket != nil:
					port = h.TCPSocket.Port
				case h.GRPC != nil:
					port = intstr.FromInt32(h.GRPC.Port)
				default:
					t.Errorf("%s/%s: a probe these checks do not know", w, ct.Name)
					continue
				}
				if _, ok := containerPort(ct, port); !ok {
					t.Errorf("%s/%s: probe on port %s, which the container does not declare", w, ct.Name, port.String())
				}
			}
			if ct.ReadinessProbe == nil && w.job == nil {
				t.Errorf("%s/%s: no readiness probe", w, ct.Name)
			}
		}
	}
	for name, s := range c.services {
		if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
			t.Errorf("service %s: %v", name, errs)
		}
		sel := c.selected(s)
		if len(sel) == 0 {
			t.Errorf("service %s selects no pods", name)
		}
		for _, sp := range s.Spec.Ports {
			if errs := validation.IsValidPortName(sp.Name); len(errs) > 0 {
				t.Errorf("service %s port %s: %v", name, sp.Name, errs)
			}
			for _, w := range sel {
				if _, ok := w.port(sp.TargetPort); !ok {
					t.Errorf("service %s port %s: target port %s is no container port of %s", name, sp.Name, sp.TargetPort.String(), w)
				}
			}
		}
	}
}

// TestAddresses: what each process dials is a Service of the deployment, on a port that leads to the
// listener meant for it: agents to kas's agent API, tunnelbench to kas's public API and to the demo
// server, kas to Redis, and each kas replica's private URL to that very replica's private API, through
// the headless Service that gives it a name of its own.
func TestAddresses(t *testing.T) {
	c := render(t)
	ps := c.processes(t)
	listenerOf := func(target *process, port int32) string { return target.listens()[port] }
	check := func(p *process, what, addr, wantWorkload, wantFlag, wantPod string) {
		t.Helper()
		w, pod, port, err := c.resolve(addr)
		if err != nil {
			t.Errorf("%s: %s %s: %v", p, what, addr, err)
			return
		}
		if w.name != wantWorkload || (wantPod != "" && pod != wantPod) {
			t.Errorf("%s: %s %s reaches %s %s, want %s %s", p, what, addr, w, pod, wantWorkload, wantPod)
			return
		}
		if wantFlag == "" {
			return
		}
		for _, target := range ps {
			if target.w == w && (pod == "" || target.podName == pod) {
				if got := listenerOf(target, port); got != wantFlag {
					t.Errorf("%s: %s %s reaches %s's %q listener, want %s", p, what, addr, target, got, wantFlag)
				}
			}
		}
	}
	privateURLs := map[string]string{}
	for _, p := range ps {
		switch {
		case p.agentk != nil:
			check(p, "--kas-address", p.agentk.KasAddress, "kas", "--agent-listen", "")
		case p.kas != nil:
			check(p, "--redis-address", p.kas.Redis.Address, "redis", "", "")
			u := strings.TrimPrefix(p.kas.PrivateURL, "grpcs://")
			if u == p.kas.PrivateURL {
				t.Errorf("%s: --private-url %s is not grpcs://, but kas serves TLS", p, p.kas.PrivateURL)
			}
			check(p, "--private-url", u, "kas", "--private-listen", p.podName)
			if other, dup := privateURLs[u]; dup {
				t.Errorf("%s and %s both advertise %s", other, p, u)
			}
			privateURLs[u] = p.podName
		case p.bench != nil:
			check(p, "--target", p.bench.Config.Target, "kas", "--api-listen", "")
			check(p, "--target-direct", p.bench.Config.TargetDirect, "demo", "--listen", "")
		}
	}
	// Redis listens where its Service leads.
	redis := c.workload(t, "redis")
	ct := redis.pod.Spec.Containers[0]
	if !strings.Contains(strings.Join(ct.Args, " "), "--port 6379") {
		t.Errorf("redis: not started on --port 6379: %q", ct.Args)
	}
	if _, ok := containerPort(ct, intstr.FromInt32(6379)); !ok {
		t.Error("redis does not declare port 6379")
	}

	if _, _, _, err := c.resolve("kas-9.kas-peers:8155"); err == nil {
		t.Error("a replica that does not exist resolved")
	}
	if _, _, _, err := c.resolve("kas:8155"); err == nil {
		t.Error("a port Service kas does not have resolved")
	}
}

// TestTLSAndTokens: the deployment's secrets fit together. kas's certificate verifies, with the CA that
// agentk, tunnelbench and the other replicas trust, for every name they dial it at; agentk's token is an
// agent's that kas knows, and tunnelbench's caller token may reach that very agent; kas and Redis share
// one password.
func TestTLSAndTokens(t *testing.T) {
	c := render(t)
	ps := c.processes(t)
	var kasCert *x509.Certificate
	for _, p := range ps {
		if p.kas != nil {
			kasCert = parseCert(t, p.read(t, p.kas.TLS.CertFile))
			break
		}
	}
	if kasCert == nil {
		t.Fatal("no kas")
	}
	verify := func(p *process, what, caFile, addr string) {
		t.Helper()
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(p.read(t, caFile)) {
			t.Errorf("%s: %s holds no certificate", p, caFile)
			return
		}
		host, _, _ := net.SplitHostPort(addr)
		if _, err := kasCert.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
			t.Errorf("%s: %s %s: kas's certificate does not verify with %s: %v", p, what, addr, caFile, err)
		}
	}
	var agentID int64
	var kasProc *process
	for _, p := range ps {
		switch {
		case p.kas != nil:
			kasProc = p
			verify(p, "--private-url", p.kas.TLS.PeerCAFile, strings.TrimPrefix(p.kas.PrivateURL, "grpcs://"))
		case p.agentk != nil:
			ca, _ := p.flag("kas-ca-file")
			verify(p, "--kas-address", ca, p.agentk.KasAddress)
		case p.bench != nil:
			ca, _ := p.flag("kas-ca-file")
			verify(p, "--target", ca, p.bench.Config.Target)
		}
	}
	ctx := context.Background()
	for _, p := range ps {
		if p.agentk == nil {
			continue
		}
		id, err := kasProc.kas.Authenticator.AuthenticateAgent(ctx, p.agentk.Token)
		if err != nil {
			t.Fatalf("%s: kas refuses agentk's token: %v", p, err)
		}
		agentID = id
	}
	for _, p := range ps {
		if p.bench == nil {
			continue
		}
		if p.bench.Config.TargetAgent != agentID {
			t.Errorf("%s: --target-agent %d, but agentk is agent %d", p, p.bench.Config.TargetAgent, agentID)
		}
		f, _ := p.flag("token-file")
		caller, err := kasProc.kas.Callers.AuthenticateCaller(ctx, strings.TrimSpace(string(p.read(t, f))))
		if err != nil {
			t.Errorf("%s: kas refuses tunnelbench's caller token: %v", p, err)
		} else if !caller.MayReach(agentID) {
			t.Errorf("%s: the caller token may not reach agent %d", p, agentID)
		}
	}
	kasRedis := secretKeyOf(kasProc.w.pod, kasProc.c, strings.TrimPrefix(kasProc.kas.Redis.PasswordFile, kasProc.root))
	redis := c.workload(t, "redis")
	redisPW := secretKeyOf(redis.pod, &redis.pod.Spec.Containers[0], "/etc/redis/auth/password")
	if kasRedis == "" || kasRedis != redisPW {
		t.Errorf("kas reads the Redis password from %q, Redis from %q", kasRedis, redisPW)
	}
	if !strings.Contains(strings.Join(redis.pod.Spec.Containers[0].Args, " "), "/etc/redis/auth/password") {
		t.Error("redis does not read its password file")
	}
}

// TestSecretsAndVolumes: every Secret and claim that a pod mounts exists, secrets are readable by
// the pod's user and nobody else, and every Secret the kustomization makes is mounted somewhere.
func TestSecretsAndVolumes(t *testing.T) {
	c := render(t)
	used := map[string]bool{}
	for _, w := range c.workloads {
		for _, v := range w.pod.Spec.Volumes {
			switch {
			case v.Secret != nil:
				used[v.Secret.SecretName] = true
				if _, err := c.secretFiles(v.Secret); err != nil {
					t.Errorf("%s volume %s: %v", w, v.Name, err)
				}
				if m := v.Secret.DefaultMode; m == nil || *m&^0o440 != 0 {
					t.Errorf("%s volume %s: mode %o, want at most 0440 (YAML octal needs a leading 0)", w, v.Name, ptrVal(m))
				}
				if w.pod.Spec.SecurityContext == nil || w.pod.Spec.SecurityContext.FSGroup == nil {
					t.Errorf("%s: no fsGroup, so its user cannot read secret volume %s", w, v.Name)
				}
			case v.PersistentVolumeClaim != nil:
				if c.pvcs[v.PersistentVolumeClaim.ClaimName] == nil {
					t.Errorf("%s volume %s: no claim %s", w, v.Name, v.PersistentVolumeClaim.ClaimName)
				}
			case v.EmptyDir != nil:
				if v.EmptyDir.SizeLimit == nil {
					t.Errorf("%s volume %s: an emptyDir without a size limit", w, v.Name)
				}
			default:
				t.Errorf("%s volume %s: a kind these checks do not know", w, v.Name)
			}
		}
		for _, ct := range w.pod.Spec.Containers {
			for _, m := range ct.VolumeMounts {
				if v := volume(w.pod, m.Name); v != nil && v.Secret != nil && !m.ReadOnly {
					t.Errorf("%s/%s: secret volume %s mounted writable", w, ct.Name, m.Name)
				}
			}
		}
	}
	for name := range c.secrets {
		if !used[name] {
			t.Errorf("secret %s is mounted by no pod", name)
		}
	}
	// The results of a run land on the claim, which outlives the Job.
	for _, p := range c.processes(t) {
		if p.bench == nil {
			continue
		}
		m := mountOf(p.c.VolumeMounts, p.bench.Out)
		if m == nil || m.ReadOnly || volume(p.w.pod, m.Name).PersistentVolumeClaim == nil {
			t.Errorf("%s: --out %s is not on a writable persistent volume", p, p.bench.Out)
		}
	}
	reader := readReader(t)
	if cl := reader.Spec.Volumes[0].PersistentVolumeClaim; cl == nil || c.pvcs[cl.ClaimName] == nil || reader.Namespace != c.namespace {
		t.Errorf("the results reader mounts %+v in %s, not the Job's claim", reader.Spec.Volumes[0], reader.Namespace)
	}
}

// TestPodSecurity: no pod runs as root, gains privileges or writes its root filesystem; the image's
// user is the one the pods run as; memory is bounded; the Job and the reader pod end by themselves.
func TestPodSecurity(t *testing.T) {
	c := render(t)
	uid, gid := imageUser(t)
	reader := readReader(t)
	pods := map[string]*corev1.PodSpec{"pod/tunnelbench-results": &reader.Spec}
	for _, w := range c.workloads {
		pods[w.String()] = &w.pod.Spec
	}
	for name, pod := range pods {
		sc := pod.SecurityContext
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
			t.Errorf("%s: may run as root", name)
			continue
		}
		if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: no RuntimeDefault seccomp profile", name)
		}
		for _, ct := range pod.Containers {
			s := ct.SecurityContext
			if s == nil || s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation || s.ReadOnlyRootFilesystem == nil ||
				!*s.ReadOnlyRootFilesystem || s.Capabilities == nil || !slices.Equal(s.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("%s/%s: want no privilege escalation, a read-only root filesystem and no capabilities", name, ct.Name)
			}
			if ct.Resources.Limits.Memory().IsZero() || ct.Resources.Requests.Cpu().IsZero() {
				t.Errorf("%s/%s: no memory limit or CPU request", name, ct.Name)
			}
			if isOurImage(ct.Image) && (*sc.RunAsUser != uid || sc.RunAsGroup == nil || *sc.RunAsGroup != gid) {
				t.Errorf("%s/%s: runs as %d:%d, the image's user is %d:%d", name, ct.Name, *sc.RunAsUser, ptrVal(sc.RunAsGroup), uid, gid)
			}
			if errs := validation.IsDNS1123Label(ct.Name); len(errs) > 0 {
				t.Errorf("%s/%s: %v", name, ct.Name, errs)
			}
		}
	}
	if reader.Spec.ActiveDeadlineSeconds == nil {
		t.Error("the results reader pod never ends by itself")
	}
	job := c.workload(t, "tunnelbench-bench").job
	if job.Spec.ActiveDeadlineSeconds == nil || job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit != 0 {
		t.Errorf("job: want a deadline and no retries over a failed run's results")
	}
}

// selected are the workloads whose pods the Service selects.
func (c *cluster) selected(s *corev1.Service) []*workload {
	if len(s.Spec.Selector) == 0 {
		return nil
	}
	var out []*workload
	for _, w := range c.workloads {
		if labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(w.pod.Labels)) {
			out = append(out, w)
		}
	}
	return out
}

// resolve follows host:port the way cluster DNS and a Service do: to the Service's pods (a headless
// Service's NAME.SERVICE to one pod of its StatefulSet) and the container port behind the Service port.
func (c *cluster) resolve(addr string) (w *workload, pod string, port int32, err error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, "", 0, err
	}
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		return nil, "", 0, fmt.Errorf("port %q: %w", p, err)
	}
	suffixes := []string{"", "." + c.namespace, "." + c.namespace + ".svc", "." + c.namespace + ".svc.cluster.local"}
	var svc *corev1.Service
	for _, sfx := range suffixes {
		name, ok := strings.CutSuffix(host, sfx)
		if !ok || name == "" {
			continue
		}
		parts := strings.Split(name, ".")
		switch len(parts) {
		case 1:
			svc = c.services[parts[0]]
		case 2:
			svc, pod = c.services[parts[1]], parts[0]
		}
		if svc != nil {
			break
		}
	}
	if svc == nil {
		return nil, "", 0, fmt.Errorf("%s is neither a Service of the deployment nor POD.SERVICE", host)
	}
	sel := c.selected(svc)
	if len(sel) != 1 {
		return nil, "", 0, fmt.Errorf("service %s selects %d workloads, want 1", svc.Name, len(sel))
	}
	w = sel[0]
	if pod != "" {
		if svc.Spec.ClusterIP != corev1.ClusterIPNone || w.serviceName != svc.Name {
			return nil, "", 0, fmt.Errorf("%s: pods have DNS names only under their StatefulSet's headless Service", host)
		}
		found := false
		for i := range w.replicas {
			found = found || w.podName(i) == pod
		}
		if !found {
			return nil, "", 0, fmt.Errorf("%s: %s runs no pod %s", host, w, pod)
		}
	}
	for _, sp := range svc.Spec.Ports {
		if sp.Port == int32(n) {
			cp, ok := w.port(sp.TargetPort)
			if !ok {
				return nil, "", 0, fmt.Errorf("service %s port %d leads nowhere", svc.Name, n)
			}
			return w, pod, cp, nil
		}
	}
	return nil, "", 0, fmt.Errorf("service %s has no port %d", svc.Name, n)
}

// port is the container port that a Service's target port names in w's pods.
func (w *workload) port(target intstr.IntOrString) (int32, bool) {
	for _, ct := range w.pod.Spec.Containers {
		if p, ok := containerPort(ct, target); ok {
			return p, true
		}
	}
	return 0, false
}

func containerPort(ct corev1.Container, target intstr.IntOrString) (int32, bool) {
	for _, cp := range ct.Ports {
		if (target.Type == intstr.String && cp.Name == target.StrVal) || (target.Type == intstr.Int && cp.ContainerPort == target.IntVal) {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

// secretKeyOf names the secret and key that a file path in the container reads, "" if none.
func secretKeyOf(pod *corev1.PodTemplateSpec, ct *corev1.Container, file string) string {
	m := mountOf(ct.VolumeMounts, file)
	if m == nil {
		return ""
	}
	v := volume(pod, m.Name)
	if v == nil || v.Secret == nil {
		return ""
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(file, m.MountPath), "/")
	for _, it := range v.Secret.Items {
		if it.Path == rel {
			return v.Secret.SecretName + "/" + it.Key
		}
	}
	return v.Secret.SecretName + "/" + rel
}

// read returns a file as the process sees it (path in the pod).
func (p *process) read(t *testing.T, podPath string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(p.root, strings.TrimPrefix(podPath, p.root)))
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return b
}

func parseCert(t *testing.T, b []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatal("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func readReader(t *testing.T) *corev1.Pod {
	t.Helper()
	b, err := os.ReadFile("k8s/bench/results-reader.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(b, &pod); err != nil {
		t.Fatal(err)
	}
	return &pod
}

func ptrVal[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
