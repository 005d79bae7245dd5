package dashboards_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/tunnelbench/tunnelbench/dashboards"
)

// TestCommittedDashboardsAreGenerated checks that the JSON files are what the generator writes now.
func TestCommittedDashboardsAreGenerated(t *testing.T) {
	for _, d := range dashboards.All() {
		want, err := dashboards.Render(d)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(d.File)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale or edited by hand: run go run ./dashboards/gen", d.File)
		}
	}
}

// TestOnlyDashboardJSON: Grafana's file provider loads every .json file below the mounted folder, so
// the folder must hold no other JSON.
func TestOnlyDashboardJSON(t *testing.T) {
	var want, got []string
	for _, d := range dashboards.All() {
		want = append(want, d.File)
	}
	err := filepath.WalkDir(".", func(path string, _ fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".json") {
			got = append(got, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("JSON files %v, want only the dashboards %v", got, want)
	}
}

// TestDashboardStructure checks what Grafana and the provisioning rely on: unique uids and panel ids,
// a prometheus datasource variable that defaults to the provisioned datasource, and every panel, query
// and query variable using that variable.
func TestDashboardStructure(t *testing.T) {
	uids := map[string]string{}
	for _, db := range dashboards.All() {
		d := readDashboard(t, db.File)
		uid := str(d["uid"])
		if uid == "" || str(d["title"]) == "" {
			t.Errorf("%s: uid %q, title %q", db.File, uid, d["title"])
		}
		if other, ok := uids[uid]; ok {
			t.Errorf("%s and %s share uid %s", db.File, other, uid)
		}
		uids[uid] = db.File

		templating, _ := d["templating"].(map[string]any)
		var dsVar map[string]any
		for _, v := range list(templating["list"]) {
			vm := v.(map[string]any)
			if str(vm["name"]) == dashboards.DatasourceVar {
				dsVar = vm
			}
			if str(vm["type"]) == "query" {
				checkDatasourceRef(t, db.File, "variable "+str(vm["name"]), vm["datasource"])
			}
		}
		switch {
		case dsVar == nil:
			t.Errorf("%s: no %s variable", db.File, dashboards.DatasourceVar)
		case str(dsVar["type"]) != "datasource" || str(dsVar["query"]) != "prometheus":
			t.Errorf("%s: %s variable is %v/%v, want a datasource variable of type prometheus", db.File, dashboards.DatasourceVar, dsVar["type"], dsVar["query"])
		default:
			current, _ := dsVar["current"].(map[string]any)
			if str(current["value"]) != dashboards.DatasourceUID {
				t.Errorf("%s: %s variable defaults to %v, want %s", db.File, dashboards.DatasourceVar, current["value"], dashboards.DatasourceUID)
			}
		}

		ids := map[float64]string{}
		for _, p := range panels(d) {
			title := str(p["title"])
			id, ok := p["id"].(float64)
			if !ok {
				t.Errorf("%s / %s: no id", db.File, title)
			} else if other, dup := ids[id]; dup {
				t.Errorf("%s: panels %q and %q share id %v", db.File, title, other, id)
			}
			ids[id] = title
			if str(p["type"]) == "row" {
				continue
			}
			if len(list(p["targets"])) == 0 {
				t.Errorf("%s / %s: no query", db.File, title)
			}
			checkDatasourceRef(t, db.File, title, p["datasource"])
			for _, tg := range list(p["targets"]) {
				checkDatasourceRef(t, db.File, title+" target", tg.(map[string]any)["datasource"])
			}
		}
		annotations, _ := d["annotations"].(map[string]any)
		for _, a := range list(annotations["list"]) {
			am := a.(map[string]any)
			checkDatasourceRef(t, db.File, "annotation "+str(am["name"]), am["datasource"])
		}
	}
}

func checkDatasourceRef(t *testing.T, file, where string, ref any) {
	t.Helper()
	m, _ := ref.(map[string]any)
	if str(m["type"]) != "prometheus" || str(m["uid"]) != "${"+dashboards.DatasourceVar+"}" {
		t.Errorf("%s / %s: datasource %v, want the prometheus ${%s} variable", file, where, ref, dashboards.DatasourceVar)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// promConfig is the part of prometheus.yml the tests read and rewrite.
type promConfig struct {
	Global struct {
		ScrapeInterval string `yaml:"scrape_interval"`
	} `yaml:"global"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

// defaultTargets are the loopback listeners prometheus.yml must scrape, by job.
var defaultTargets = map[string]string{
	"kas":         "127.0.0.1:8151",
	"agentk":      "127.0.0.1:8152",
	"tunnelbench": "127.0.0.1:8160",
}

// TestProvisioning checks that prometheus.yml, the Grafana provisioning and docker-compose.yml agree
// with each other and with the dashboards.
func TestProvisioning(t *testing.T) {
	var prom promConfig
	readYAML(t, "prometheus.yml", &prom)
	jobs := map[string][]string{}
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			jobs[sc.JobName] = append(jobs[sc.JobName], st.Targets...)
		}
	}
	for job, target := range defaultTargets {
		if !slices.Equal(jobs[job], []string{target}) {
			t.Errorf("prometheus.yml job %s scrapes %v, want [%s]", job, jobs[job], target)
		}
	}

	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name, UID, Type, URL string
			IsDefault            bool `yaml:"isDefault"`
			JSONData             struct {
				TimeInterval string `yaml:"timeInterval"`
			} `yaml:"jsonData"`
		}
	}
	readYAML(t, "provisioning/datasources/prometheus.yaml", &ds)
	if ds.APIVersion != 1 || len(ds.Datasources) != 1 {
		t.Fatalf("datasources: apiVersion %d, %d datasources; want 1 and 1", ds.APIVersion, len(ds.Datasources))
	}
	d := ds.Datasources[0]
	if d.UID != dashboards.DatasourceUID || d.Type != "prometheus" || !d.IsDefault || d.URL == "" {
		t.Errorf("datasource %+v: want uid %s, type prometheus, default, with a url", d, dashboards.DatasourceUID)
	}
	if d.JSONData.TimeInterval != prom.Global.ScrapeInterval {
		t.Errorf("datasource timeInterval %q, want prometheus.yml's scrape_interval %q ($__rate_interval depends on it)",
			d.JSONData.TimeInterval, prom.Global.ScrapeInterval)
	}

	var providers struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Name, Type string
			Options    struct {
				Path string
			}
		}
	}
	readYAML(t, "provisioning/dashboards/tunnelbench.yaml", &providers)
	if providers.APIVersion != 1 || len(providers.Providers) != 1 || providers.Providers[0].Type != "file" {
		t.Fatalf("dashboard providers: %+v, want one file provider", providers)
	}
	dashPath := providers.Providers[0].Options.Path

	var compose struct {
		Services map[string]struct {
			Image       string
			NetworkMode string `yaml:"network_mode"`
			Command     []string
			Volumes     []string
		}
	}
	readYAML(t, "docker-compose.yml", &compose)
	mounts := func(service string) map[string]string {
		s, ok := compose.Services[service]
		if !ok {
			t.Fatalf("docker-compose.yml has no %s service", service)
		}
		if s.Image == "" || strings.HasSuffix(s.Image, ":latest") || !strings.Contains(s.Image, ":") {
			t.Errorf("%s image %q: pin a version", service, s.Image)
		}
		if s.NetworkMode != "host" {
			t.Errorf("%s network_mode %q, want host (the targets and the datasource url are loopback addresses)", service, s.NetworkMode)
		}
		out := map[string]string{}
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) >= 2 {
				out[parts[1]] = parts[0]
			}
		}
		return out
	}
	pm := mounts("prometheus")
	configPath := ""
	for _, arg := range compose.Services["prometheus"].Command {
		if v, ok := strings.CutPrefix(arg, "--config.file="); ok {
			configPath = v
		}
	}
	if configPath == "" || pm[configPath] != "./prometheus.yml" {
		t.Errorf("prometheus: config file %q is not ./prometheus.yml mounted (%v)", configPath, pm)
	}
	gm := mounts("grafana")
	if gm["/etc/grafana/provisioning"] != "./provisioning" {
		t.Errorf("grafana: /etc/grafana/provisioning is %q, want ./provisioning", gm["/etc/grafana/provisioning"])
	}
	if src := gm[dashPath]; src != "./" && src != "." {
		t.Errorf("grafana: the provider's path %s is %q, want this folder (./)", dashPath, src)
	}
}
