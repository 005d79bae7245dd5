package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tunnelbench/tunnelbench/chaos/scenario"
)

// LoadSuite loads the scenario files (*.yaml) of dir in name order, as tunnelbench chaos runs them;
// with only, just the scenarios of those names. Every problem is in the one error: a directory (--dir)
// without scenario files, each file that is not a valid scenario, and each name of only (--only) that
// no file has.
func LoadSuite(dir string, only []string) ([]*scenario.Scenario, error) {
	files, err := suiteFiles(dir)
	if err != nil {
		return nil, err
	}
	var (
		scs  []*scenario.Scenario
		errs []error
	)
	want, found := map[string]bool{}, map[string]bool{}
	for _, n := range only {
		want[n] = true
	}
	for _, f := range files {
		sc, err := scenario.Load(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(want) == 0 || want[sc.Name] {
			scs = append(scs, sc)
			found[sc.Name] = true
		}
	}
	for _, n := range only {
		if !found[n] {
			errs = append(errs, fmt.Errorf("--only: no scenario named %s in %s", n, dir))
			found[n] = true // said once
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return scs, nil
}

// suiteFiles lists dir's *.yaml files in name order.
func suiteFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	var files []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".yaml") {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	if len(files) == 0 {
		if err != nil {
			return nil, fmt.Errorf("--dir %s: no scenario files (*.yaml): %w", dir, err)
		}
		return nil, fmt.Errorf("--dir %s: no scenario files (*.yaml)", dir)
	}
	return files, nil
}
