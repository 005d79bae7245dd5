// Command gen writes the files behind the Kubernetes deployment's Secrets (see package secrets):
//
//	go run ./deploy/secrets/gen            # into deploy/k8s/base/secrets/ (git ignores them)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/tunnelbench/tunnelbench/deploy/secrets"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

func main() {
	cli.Main("gen", func(_ context.Context, args []string) error {
		fs := flag.NewFlagSet("gen", flag.ContinueOnError)
		cli.SetUsage(fs, `
gen writes a throwaway CA, kas's certificate and random tokens and secrets, the files that
deploy/k8s/base's Secrets are made of. Run it from the repository root.

Usage: go run ./deploy/secrets/gen [flags]`)
		var o secrets.Options
		fs.StringVar(&o.Dir, "out", secrets.DefaultDir, "directory for the files")
		fs.StringVar(&o.Namespace, "namespace", secrets.DefaultNS, "namespace of the deployment (kas's certificate names its Services there)")
		fs.Int64Var(&o.AgentID, "agent-id", secrets.DefaultAgentID, "id of the agent whose token the agentk pods share")
		fs.DurationVar(&o.Validity, "validity", secrets.DefaultValidity, "how long the certificates are valid")
		fs.BoolVar(&o.Force, "force", false, "overwrite existing files (a running deployment then needs a restart)")
		if err := cli.Parse(fs, args, os.Stdout); err != nil {
			return err
		}
		if o.AgentID <= 0 || o.Validity <= 0 || o.Namespace == "" || o.Dir == "" {
			return cli.Usagef("--agent-id and --validity must be positive, --namespace and --out not empty")
		}
		files, err := secrets.Generate(o)
		if err != nil {
			return err
		}
		for _, f := range files {
			fmt.Println(f)
		}
		return nil
	})
}
