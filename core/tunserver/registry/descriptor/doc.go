// Package descriptor indexes what an agent's tunnel announced in its descriptor (the services and
// methods it serves, whether it is reusable), so that the registry answers "does this tunnel serve that
// method" in constant time, and counts the distinct descriptors of one agent's tunnels.
//
// It never decodes wire bytes (agentapi does, once per distinct descriptor) and never holds a lock:
// the registry's stripe lock guards a Set. An Index is bounded (MaxServices, MaxMethods) whatever the
// agent sends.
package descriptor
