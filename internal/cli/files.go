package cli

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// FileError is err, met reading path given to --flag, said so that the user knows which flag to fix:
// "--ca-file /x: no such file or directory". It unwraps to err.
func FileError(flagName, path string, err error) error {
	return fileError("--"+flagName, path, err)
}

// CheckFile checks that path, given as what ("scenario FILE"), names a readable file; the error says
// "WHAT PATH: no such file or directory".
func CheckFile(what, path string) error {
	if err := readable(path); err != nil {
		return fileError(what, path, err)
	}
	return nil
}

func fileError(what, path string, err error) error {
	cause := err
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) && pe.Path == path {
		cause = pe.Err // the path is said once, after the flag
	}
	return &flagError{msg: fmt.Sprintf("%s %s: %v", what, path, cause), err: err}
}

// flagError is an error said in terms of a flag, wrapping the error it comes from.
type flagError struct {
	msg string
	err error
}

func (e *flagError) Error() string { return e.msg }
func (e *flagError) Unwrap() error { return e.err }

// checkFileFlags checks that every set flag named *-file names a readable file: a missing file is a
// mistake on the command line, and is said as one, naming its flag, before anything starts. Every
// *-file flag of the binaries is an input; an output file flag must be named otherwise.
func checkFileFlags(fset *flag.FlagSet) error {
	var errs []error
	fset.Visit(func(f *flag.Flag) {
		path := f.Value.String()
		if !strings.HasSuffix(f.Name, "-file") || path == "" {
			return
		}
		if err := CheckFile("--"+f.Name, path); err != nil {
			errs = append(errs, err)
		}
	})
	return errors.Join(errs...)
}

func readable(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.IsDir() {
		return errors.New("is a directory, not a file")
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}
