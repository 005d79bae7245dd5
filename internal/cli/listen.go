package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// ListenError is a failure to listen on addr, given to --flag, said so that the user knows which flag
// to change: "--agent-listen 127.0.0.1:8150: address already in use". It unwraps to err.
func ListenError(flagName, addr string, err error) error {
	cause := err
	if oe := (*net.OpError)(nil); errors.As(err, &oe) {
		cause = oe.Err // "listen tcp 127.0.0.1:8150: bind:" repeats what the flag says
		if se := (*os.SyscallError)(nil); errors.As(cause, &se) {
			cause = se.Err
		}
	}
	return &flagError{msg: fmt.Sprintf("--%s %s: %v", flagName, addr, cause), err: err}
}

// Listen listens on TCP addr, given to --flag; its error names the flag.
func Listen(flagName, addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, ListenError(flagName, addr, err)
	}
	return l, nil
}

// checkListenFlags checks that every set flag named listen or *-listen holds HOST:PORT (or is empty,
// which turns a listener off): a malformed address is a mistake on the command line, said before
// anything starts. Whether the port is free is only known when listening.
func checkListenFlags(fset *flag.FlagSet) error {
	var errs []error
	fset.Visit(func(f *flag.Flag) {
		if addr := f.Value.String(); (f.Name == "listen" || strings.HasSuffix(f.Name, "-listen")) && addr != "" {
			if err := CheckListenAddr(addr); err != nil {
				errs = append(errs, fmt.Errorf("--%s %q: %w", f.Name, addr, err))
			}
		}
	})
	return errors.Join(errs...)
}

// CheckListenAddr checks that addr is a listen address: HOST:PORT, where HOST may be empty (every
// interface) and PORT is a number (0 picks a free port) or a service name.
func CheckListenAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want HOST:PORT, for example 127.0.0.1:8150 or :8150")
	}
	// A service name ("http") is looked up in /etc/services, as net.Listen would; bounded all the same.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := net.DefaultResolver.LookupPort(ctx, "tcp", port); err != nil {
		return fmt.Errorf("port %q is not a port number (0-65535)", port)
	}
	return nil
}
