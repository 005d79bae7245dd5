package main

import (
	"io"
	"os"
)

// writeFile creates path and lets write fill it; a failed write or close is the error.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
