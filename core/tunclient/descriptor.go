package tunclient

import (
	"slices"

	"google.golang.org/grpc"

	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// descriptorFor lists every service and method registered on the agent's in-memory server, plus the
// services advertised with all their methods (forwarded to upstreams the agent does not know). A method
// whose caller sends one request says so, so that kas may batch the request (rpc.Method.one_request).
func descriptorFor(info map[string]grpc.ServiceInfo, allMethods []string) *rpc.Descriptor {
	names := make([]string, 0, len(info))
	for name := range info {
		names = append(names, name)
	}
	slices.Sort(names)
	d := &rpc.AgentDescriptor{}
	for _, name := range names {
		s := &rpc.Service{Name: name}
		for _, m := range info[name].Methods {
			s.Methods = append(s.Methods, &rpc.Method{Name: m.Name, OneRequest: !m.IsClientStream})
		}
		d.Services = append(d.Services, s)
	}
	for _, name := range allMethods {
		d.Services = append(d.Services, &rpc.Service{Name: name, AllMethods: true})
	}
	return &rpc.Descriptor{AgentDescriptor: d}
}
