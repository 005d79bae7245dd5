// Command gen writes the Grafana dashboards as JSON files. Run it from the module root:
//
//	go run ./dashboards/gen
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tunnelbench/tunnelbench/dashboards"
)

func main() {
	out := flag.String("out", "dashboards", "folder to write the dashboards to")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	// A typo in -out, or running from the wrong folder, must not scatter JSON files around.
	if _, err := os.Stat(filepath.Join(out, "gen", "main.go")); err != nil {
		return fmt.Errorf("%s is not the dashboards folder (run from the module root or pass -out): %w", out, err)
	}
	for _, d := range dashboards.All() {
		b, err := dashboards.Render(d)
		if err != nil {
			return err
		}
		path := filepath.Join(out, d.File)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", path)
	}
	return nil
}
