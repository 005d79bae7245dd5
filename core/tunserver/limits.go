package tunserver

// Limit names: the values of the limit label of tunnel_limit_rejections_total. Each part of kas that
// refuses something for a limit reports it under one of these names.
const (
	LimitTunnelsPerAgent = "tunnels_per_agent"
	LimitWaitingPerAgent = "waiting_calls_per_agent"
	LimitWaiting         = "waiting_calls"
	LimitWaitingByCaller = "waiting_calls_per_caller"
	LimitTunnelRate      = "tunnel_rate"
	LimitMessageSize     = "message_size"
	LimitDescriptorSize  = "descriptor_size"
	LimitMetadataSize    = "metadata_size"
)

// OnLimit is told the name of a limit that bit. It must return at once (it may run under a lock).
type OnLimit func(limit string)

// Hit reports limit to f, if f is set.
func (f OnLimit) Hit(limit string) {
	if f != nil {
		f(limit)
	}
}
