package deploy

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/tunnelbench/tunnelbench/deploy/secrets"
)

// cluster is what `kubectl apply -k deploy/k8s/base` and then `-k deploy/k8s/bench` create, decoded into
// the Kubernetes API types: the model the checks run on.
type cluster struct {
	namespace string
	secrets   map[string]*corev1.Secret
	services  map[string]*corev1.Service
	pvcs      map[string]*corev1.PersistentVolumeClaim
	workloads []*workload
	// objects counts the decoded objects by kind.
	objects map[string]int
}

// workload is a pod template and how many pods run it.
type workload struct {
	kind, name string
	replicas   int
	pod        *corev1.PodTemplateSpec
	// serviceName is a StatefulSet's governing (headless) Service.
	serviceName string
	// job is set for a Job.
	job *batchv1.Job
}

func (w *workload) String() string { return w.kind + "/" + w.name }

// podName is what a pod of w is called: StatefulSet pods by ordinal, others by a made-up suffix.
func (w *workload) podName(ordinal int) string {
	if w.kind == "StatefulSet" {
		return fmt.Sprintf("%s-%d", w.name, ordinal)
	}
	return fmt.Sprintf("%s-7d9f8-x%dk2p", w.name, ordinal)
}

// render builds deploy/k8s/base and deploy/k8s/bench with kustomize, on a copy whose secrets/ holds what
// `go run ./deploy/secrets/gen` writes, and decodes every object strictly: a field the API does not
// have, or a duplicated one, fails.
func render(t *testing.T) *cluster {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "k8s")
	if err := os.CopyFS(dir, os.DirFS("k8s")); err != nil {
		t.Fatal(err)
	}
	// A copy of a checkout that ran gen already holds its secrets: replace them with fresh ones.
	if err := os.RemoveAll(filepath.Join(dir, "base", "secrets")); err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.Generate(secrets.Options{Dir: filepath.Join(dir, "base", "secrets")}); err != nil {
		t.Fatal(err)
	}
	c := &cluster{
		secrets:  map[string]*corev1.Secret{},
		services: map[string]*corev1.Service{},
		pvcs:     map[string]*corev1.PersistentVolumeClaim{},
		objects:  map[string]int{},
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	for _, kust := range []string{"base", "bench"} {
		m, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(dir, kust))
		if err != nil {
			t.Fatalf("kustomize build deploy/k8s/%s: %v", kust, err)
		}
		for _, r := range m.Resources() {
			y, err := r.AsYAML()
			if err != nil {
				t.Fatal(err)
			}
			if err := c.add(y); err != nil {
				t.Fatalf("deploy/k8s/%s: %s %s: %v", kust, r.GetKind(), r.GetName(), err)
			}
		}
	}
	return c
}

// add decodes one object strictly into its API type and files it.
func (c *cluster) add(y []byte) error {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(y, &meta); err != nil {
		return err
	}
	ns := meta.Metadata.Namespace
	if meta.Kind == "Namespace" {
		ns = ""
	}
	switch {
	case meta.Kind == "Namespace":
	case c.namespace == "":
		c.namespace = ns
	case ns != c.namespace:
		return fmt.Errorf("namespace %q, the others are in %q", ns, c.namespace)
	}
	into, err := decodeStrict(meta.APIVersion, meta.Kind, y)
	if err != nil {
		return err
	}
	c.objects[meta.Kind]++
	switch o := into.(type) {
	case *corev1.Secret:
		c.secrets[o.Name] = o
	case *corev1.Service:
		c.services[o.Name] = o
	case *corev1.PersistentVolumeClaim:
		c.pvcs[o.Name] = o
	case *appsv1.Deployment:
		c.workloads = append(c.workloads, &workload{kind: meta.Kind, name: o.Name, replicas: replicas(o.Spec.Replicas), pod: &o.Spec.Template})
	case *appsv1.StatefulSet:
		c.workloads = append(c.workloads, &workload{kind: meta.Kind, name: o.Name, replicas: replicas(o.Spec.Replicas), pod: &o.Spec.Template, serviceName: o.Spec.ServiceName})
	case *batchv1.Job:
		c.workloads = append(c.workloads, &workload{kind: meta.Kind, name: o.Name, replicas: 1, pod: &o.Spec.Template, job: o})
	}
	return nil
}

// decodeStrict decodes y into the API type of apiVersion and kind, refusing unknown and duplicated
// fields. Kinds the manifests do not use are an error, so that a new one gets its checks.
func decodeStrict(apiVersion, kind string, y []byte) (any, error) {
	var into any
	switch apiVersion + " " + kind {
	case "v1 Namespace":
		into = &corev1.Namespace{}
	case "v1 Secret":
		into = &corev1.Secret{}
	case "v1 Service":
		into = &corev1.Service{}
	case "v1 PersistentVolumeClaim":
		into = &corev1.PersistentVolumeClaim{}
	case "v1 Pod":
		into = &corev1.Pod{}
	case "apps/v1 Deployment":
		into = &appsv1.Deployment{}
	case "apps/v1 StatefulSet":
		into = &appsv1.StatefulSet{}
	case "batch/v1 Job":
		into = &batchv1.Job{}
	case "policy/v1 PodDisruptionBudget":
		into = &policyv1.PodDisruptionBudget{}
	default:
		return nil, fmt.Errorf("%s %s: a kind these checks do not know", apiVersion, kind)
	}
	if err := yaml.UnmarshalStrict(y, into); err != nil {
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	return into, nil
}

func replicas(n *int32) int {
	if n == nil {
		return 1 // the API's default
	}
	return int(*n)
}

// workload returns the workload called name.
func (c *cluster) workload(t *testing.T, name string) *workload {
	t.Helper()
	for _, w := range c.workloads {
		if w.name == name {
			return w
		}
	}
	t.Fatalf("no workload %s", name)
	return nil
}

// manifestFiles lists every YAML file under k8s/.
func manifestFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := fs.WalkDir(os.DirFS("k8s"), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") && !strings.Contains(p, "secrets/") {
			files = append(files, filepath.Join("k8s", p))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
