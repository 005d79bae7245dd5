// Package presence is what this kas knows of an agent for one method (absent, served, unserved, as the
// registry reports it from its tunnels' descriptors), and the judgement made from it while a call
// waits: a call for a method that the agent's connected tunnels do not serve fails with Unimplemented
// after a grace, instead of waiting the whole find timeout.
//
// It never finds, holds or ends a tunnel: it only asks a Source, every grace, and never judges before
// two answers in a row agree; a watch ends with its context.
package presence
