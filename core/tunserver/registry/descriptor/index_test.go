package descriptor

import (
	"testing"

	"github.com/tunnelbench/tunnelbench/core/rpc"
)

func TestIndex(t *testing.T) {
	d, err := NewIndex(&rpc.AgentDescriptor{Services: []*rpc.Service{
		{Name: "a.A", Methods: []*rpc.Method{{Name: "X"}, {Name: "Y"}}},
		{Name: "b.B", AllMethods: true},
		{Name: "a.A", Methods: []*rpc.Method{{Name: "Z"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		svc, m string
		want   bool
	}{{"a.A", "X", true}, {"a.A", "Z", true}, {"a.A", "W", false}, {"b.B", "Anything", true}, {"c.C", "X", false}} {
		if got := d.Supports(c.svc, c.m); got != c.want {
			t.Errorf("Supports(%s, %s) = %v", c.svc, c.m, got)
		}
	}
	if _, err := NewIndex(&rpc.AgentDescriptor{Services: []*rpc.Service{{Name: ""}}}); err == nil {
		t.Error("a service without a name was accepted")
	}
	many := &rpc.AgentDescriptor{}
	for range MaxServices + 1 {
		many.Services = append(many.Services, &rpc.Service{Name: "s", AllMethods: true})
	}
	if _, err := NewIndex(many); err == nil {
		t.Error("an oversized descriptor was accepted")
	}
}
