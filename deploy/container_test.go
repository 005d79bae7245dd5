package deploy

import (
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/tunnelbench/tunnelbench/bench"
	"github.com/tunnelbench/tunnelbench/core/agentk"
	"github.com/tunnelbench/tunnelbench/core/demo"
	"github.com/tunnelbench/tunnelbench/core/kas"
)

// imageBinDir is where deploy/Dockerfile puts the binaries (COPY --from=build /out/ /usr/local/bin/).
const imageBinDir = "/usr/local/bin"

// samplePodIP stands for status.podIP: parsed, never dialled.
const samplePodIP = "10.244.1.7"

// process is one pod's container of the tunnelbench image, its command line as kubelet hands it over
// and as the real parser reads it.
type process struct {
	w       *workload
	c       *corev1.Container
	podName string
	// binary is kas, agentk, "tunnelbench bench" or "tunnelbench demo-server".
	binary string
	// args are the container's arguments with $(VAR) expanded, paths as the pod sees them.
	args []string
	// root holds the pod's mounted volumes: a path P in the pod is root+P here.
	root string

	kas    *kas.Config
	agentk *agentk.Config
	bench  *bench.Args
	demo   *demo.ServerArgs
}

func (p *process) String() string { return p.podName + "/" + p.c.Name }

// flag returns the value of --name in the arguments, and whether it is there.
func (p *process) flag(name string) (string, bool) {
	for _, a := range p.args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// listens maps each port the process listens on to the flag that says so.
func (p *process) listens() map[int32]string {
	m := map[int32]string{}
	add := func(flag, addr string) {
		if addr == "" {
			return
		}
		_, port, err := net.SplitHostPort(addr)
		n, perr := strconv.ParseInt(port, 10, 32)
		if err != nil || perr != nil {
			m[-1] = flag + "=" + addr // reported by the caller as not a port
			return
		}
		m[int32(n)] = flag
	}
	switch {
	case p.kas != nil:
		add("--agent-listen", p.kas.AgentListen)
		add("--api-listen", p.kas.APIListen)
		add("--private-listen", p.kas.PrivateListen)
		add("--metrics-listen", p.kas.MetricsListen)
		add("--http-listen", p.kas.HTTPListen)
	case p.agentk != nil:
		add("--metrics-listen", p.agentk.MetricsListen)
	case p.demo != nil:
		add("--listen", p.demo.Listen)
	}
	return m
}

// listenAddrs are the addresses behind listens, for checking where they bind.
func (p *process) listenAddrs() []string {
	var out []string
	for _, f := range []string{"agent-listen", "api-listen", "private-listen", "metrics-listen", "http-listen", "listen"} {
		if v, ok := p.flag(f); ok && v != "" {
			out = append(out, "--"+f+"="+v)
		}
	}
	return out
}

// processes parses every container of the tunnelbench image in every pod the cluster runs (each
// replica of a StatefulSet has its own name, and so its own arguments).
func (c *cluster) processes(t *testing.T) []*process {
	t.Helper()
	var out []*process
	for _, w := range c.workloads {
		for i := range w.replicas {
			for ci := range w.pod.Spec.Containers {
				ct := &w.pod.Spec.Containers[ci]
				if !isOurImage(ct.Image) {
					continue
				}
				p, err := c.parse(t, w, ct, w.podName(i))
				if err != nil {
					t.Errorf("%s/%s: %v", w.podName(i), ct.Name, err)
					continue
				}
				out = append(out, p)
			}
		}
	}
	return out
}

func isOurImage(image string) bool {
	name, _, _ := strings.Cut(image, ":")
	return name == "tunnelbench" || strings.HasSuffix(name, "/tunnelbench")
}

// parse expands a container's arguments as kubelet does, lays its volumes out under a directory, and
// parses the result with the binary's own parser.
func (c *cluster) parse(t *testing.T, w *workload, ct *corev1.Container, podName string) (*process, error) {
	p := &process{w: w, c: ct, podName: podName, root: t.TempDir()}
	if len(ct.Command) != 1 || path.Dir(ct.Command[0]) != imageBinDir {
		return nil, fmt.Errorf("command %q: want one of the image's binaries in %s", ct.Command, imageBinDir)
	}
	env, err := c.env(w, ct, podName)
	if err != nil {
		return nil, err
	}
	mounts, err := c.layOut(w, ct, p.root)
	if err != nil {
		return nil, err
	}
	for _, a := range ct.Args {
		x, err := expand(a, env)
		if err != nil {
			return nil, err
		}
		p.args = append(p.args, x)
	}
	// Paths as the pod sees them become paths under root, and each must lie in a mounted volume:
	// the root filesystem is read-only and holds nothing but the binaries.
	local := slices.Clone(p.args)
	for i, a := range local {
		name, v, ok := strings.Cut(a, "=")
		if !ok || !strings.HasPrefix(v, "/") {
			continue
		}
		m := mountOf(mounts, v)
		if m == nil {
			return nil, fmt.Errorf("%s: %s is in no mounted volume", name, v)
		}
		if strings.HasSuffix(name, "-file") {
			if _, err := os.Stat(filepath.Join(p.root, v)); err != nil {
				return nil, fmt.Errorf("%s: %s is no key of volume %s (mounted at %s)", name, v, m.Name, m.MountPath)
			}
		}
		local[i] = name + "=" + filepath.Join(p.root, v)
	}
	flags := local
	if path.Base(ct.Command[0]) == "tunnelbench" && len(flags) > 0 {
		flags = flags[1:] // the command
	}
	for _, a := range flags {
		// Paths are found, and rewritten, as the values of --name=value.
		if !strings.HasPrefix(a, "--") {
			return nil, fmt.Errorf("argument %q: the manifests write every flag as --name=value", a)
		}
	}
	switch bin := path.Base(ct.Command[0]); bin {
	case "kas":
		cfg, err := kas.ParseArgs(local, io.Discard, io.Discard)
		if err != nil {
			return nil, fmt.Errorf("kas: %w", err)
		}
		p.binary, p.kas = bin, &cfg
	case "agentk":
		cfg, err := agentk.ParseArgs(local, io.Discard, io.Discard)
		if err != nil {
			return nil, fmt.Errorf("agentk: %w", err)
		}
		p.binary, p.agentk = bin, &cfg
	case "tunnelbench":
		if len(local) == 0 {
			return nil, fmt.Errorf("tunnelbench without a command")
		}
		switch local[0] {
		case "bench":
			a, _, err := bench.ParseArgs(local[1:], io.Discard)
			if err != nil {
				return nil, fmt.Errorf("tunnelbench bench: %w", err)
			}
			// Out as the pod sees it.
			a.Out = strings.TrimPrefix(a.Out, p.root)
			p.binary, p.bench = "tunnelbench bench", &a
		case "demo-server":
			a, err := demo.ParseServerArgs(local[1:], io.Discard)
			if err != nil {
				return nil, fmt.Errorf("tunnelbench demo-server: %w", err)
			}
			p.binary, p.demo = "tunnelbench demo-server", &a
		default:
			return nil, fmt.Errorf("tunnelbench %s: a command these checks do not know", local[0])
		}
	default:
		return nil, fmt.Errorf("%s: not a binary of the image", ct.Command[0])
	}
	return p, nil
}

// env is the container's environment as kubelet builds it for the pod called podName.
func (c *cluster) env(w *workload, ct *corev1.Container, podName string) (map[string]string, error) {
	env := map[string]string{}
	for _, e := range ct.Env {
		switch {
		case e.ValueFrom == nil:
			v, err := expand(e.Value, env)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			env[e.Name] = v
		case e.ValueFrom.FieldRef != nil:
			switch f := e.ValueFrom.FieldRef.FieldPath; f {
			case "metadata.name":
				env[e.Name] = podName
			case "metadata.namespace":
				env[e.Name] = c.namespace
			case "status.podIP":
				env[e.Name] = samplePodIP
			default:
				return nil, fmt.Errorf("env %s: field %s is not one these checks know", e.Name, f)
			}
		case e.ValueFrom.SecretKeyRef != nil:
			s, ok := c.secrets[e.ValueFrom.SecretKeyRef.Name]
			if !ok {
				return nil, fmt.Errorf("env %s: no secret %s", e.Name, e.ValueFrom.SecretKeyRef.Name)
			}
			v, ok := s.Data[e.ValueFrom.SecretKeyRef.Key]
			if !ok {
				return nil, fmt.Errorf("env %s: secret %s has no key %s", e.Name, s.Name, e.ValueFrom.SecretKeyRef.Key)
			}
			env[e.Name] = string(v)
		default:
			return nil, fmt.Errorf("env %s: a source these checks do not know", e.Name)
		}
	}
	return env, nil
}

var varRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand replaces $(NAME) with the variable's value and $$ with $, as kubelet does. kubelet leaves a
// reference to an undefined variable as it is, which is never what a manifest means: that is an error.
func expand(s string, env map[string]string) (string, error) {
	var missing []string
	out := varRef.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		name := m[2 : len(m)-1]
		v, ok := env[name]
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%q refers to %v, which the container's env does not define", s, missing)
	}
	return out, nil
}

// layOut writes the container's mounted volumes under root: secrets as their files, other volumes as
// directories. It returns the mounts.
func (c *cluster) layOut(w *workload, ct *corev1.Container, root string) ([]corev1.VolumeMount, error) {
	for _, m := range ct.VolumeMounts {
		v := volume(w.pod, m.Name)
		if v == nil {
			return nil, fmt.Errorf("volumeMount %s: no such volume", m.Name)
		}
		if m.SubPath != "" {
			// kubelet does not update subPath mounts, and kas reloads certificates from updated files.
			return nil, fmt.Errorf("volumeMount %s: subPath mounts are never updated", m.Name)
		}
		dir := filepath.Join(root, m.MountPath)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		if v.Secret == nil {
			continue
		}
		files, err := c.secretFiles(v.Secret)
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		for name, data := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				return nil, err
			}
			if err := os.WriteFile(p, data, 0o600); err != nil {
				return nil, err
			}
		}
	}
	return ct.VolumeMounts, nil
}

// secretFiles are the files a secret volume holds: every key, or the items it lists.
func (c *cluster) secretFiles(v *corev1.SecretVolumeSource) (map[string][]byte, error) {
	s, ok := c.secrets[v.SecretName]
	if !ok {
		return nil, fmt.Errorf("no secret %s in the kustomizations", v.SecretName)
	}
	files := map[string][]byte{}
	if len(v.Items) == 0 {
		for k, d := range s.Data {
			files[k] = d
		}
		return files, nil
	}
	for _, it := range v.Items {
		d, ok := s.Data[it.Key]
		if !ok {
			return nil, fmt.Errorf("secret %s has no key %s", s.Name, it.Key)
		}
		files[it.Path] = d
	}
	return files, nil
}

func volume(pod *corev1.PodTemplateSpec, name string) *corev1.Volume {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return &pod.Spec.Volumes[i]
		}
	}
	return nil
}

// mountOf is the mount that p lies in, if any.
func mountOf(mounts []corev1.VolumeMount, p string) *corev1.VolumeMount {
	for i, m := range mounts {
		if p == m.MountPath || strings.HasPrefix(p, strings.TrimSuffix(m.MountPath, "/")+"/") {
			return &mounts[i]
		}
	}
	return nil
}
