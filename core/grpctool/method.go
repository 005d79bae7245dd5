package grpctool

import (
	"fmt"
	"strings"

	"google.golang.org/grpc"
)

// SplitMethod splits a full method name "/pkg.Service/Method" into its service and method parts.
func SplitMethod(fullMethod string) (service, method string, err error) {
	if !strings.HasPrefix(fullMethod, "/") {
		return "", "", fmt.Errorf("method name %q does not start with /", fullMethod)
	}
	service, method, ok := strings.Cut(fullMethod[1:], "/")
	if !ok || service == "" || method == "" || strings.Contains(method, "/") {
		return "", "", fmt.Errorf("method name %q is not of the form /package.Service/Method", fullMethod)
	}
	return service, method, nil
}

// BidiStreamDesc is how proxies see every method, whatever its real shape: unary and streaming calls look
// the same on the wire, so one bidirectional handler serves them all.
var BidiStreamDesc = &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}

// ServiceMethods lists the method names of a service description, unary and streaming alike.
func ServiceMethods(desc *grpc.ServiceDesc) []string {
	names := make([]string, 0, len(desc.Methods)+len(desc.Streams))
	for _, m := range desc.Methods {
		names = append(names, m.MethodName)
	}
	for _, s := range desc.Streams {
		names = append(names, s.StreamName)
	}
	return names
}
