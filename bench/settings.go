package bench

// Settings record how a run measured, so that two runs are compared only when they measured the same
// way (see Comparable). Durations are in seconds.
type Settings struct {
	WarmupS   float64 `json:"warmup_s"`
	DurationS float64 `json:"duration_s"`
	Rounds    int     `json:"rounds"`
	// Topology is in-process, processes or target (an existing deployment, see Target).
	Topology string `json:"topology"`
	// Transport is how callers and agents reached kas in this process: tcp or bufconn; empty for a
	// target, whose network is its own.
	Transport string `json:"transport,omitempty"`
	// Kas, Agents and TunnelsPerAgent are the started topology's; zero for a target.
	Kas             int `json:"kas,omitempty"`
	Agents          int `json:"agents,omitempty"`
	TunnelsPerAgent int `json:"tunnels_per_agent,omitempty"`
	// HTTPRate is the HTTP cases' requests/s; zero when they did not run.
	HTTPRate float64 `json:"http_rate"`
	// MaxErrorRate is the share of failed calls a case tolerated before it was marked failed.
	MaxErrorRate float64         `json:"max_error_rate"`
	Quick        bool            `json:"quick,omitempty"`
	Target       *TargetSettings `json:"target,omitempty"`
}

// TargetSettings record the deployment a --target run measured and how it reached it. The caller
// token itself is never recorded: only that one was sent, and the file it came from.
type TargetSettings struct {
	Address        string `json:"address"`
	Direct         string `json:"direct,omitempty"`
	Metrics        string `json:"metrics,omitempty"`
	Agent          int64  `json:"agent"`
	TLS            bool   `json:"tls"`
	CAFile         string `json:"ca_file,omitempty"`
	ServerName     string `json:"server_name,omitempty"`
	ClientCertFile string `json:"client_cert_file,omitempty"`
	CallerToken    bool   `json:"caller_token"`
	TokenFile      string `json:"token_file,omitempty"`
}

// Topology kinds of Settings.Topology.
const (
	TopologyInProcess = "in-process"
	TopologyProcesses = "processes"
	TopologyTarget    = "target"
)

// settings are the Settings of a run of opts on a topology configured as tc (defaults filled in).
func (o Options) settings(tc TopologyConfig) *Settings {
	s := &Settings{
		WarmupS:      o.Warmup.Seconds(),
		DurationS:    o.Duration.Seconds(),
		Rounds:       max(o.Rounds, 1),
		HTTPRate:     o.HTTPRate,
		MaxErrorRate: o.MaxErrorRate,
		Quick:        o.Quick,
	}
	switch {
	case tc.Target != "":
		s.Topology = TopologyTarget
		sec := tc.TargetSecurity
		s.Target = &TargetSettings{
			Address: tc.Target, Direct: tc.TargetDirect, Metrics: tc.TargetMetrics, Agent: max(o.AgentID, 1),
			TLS: sec.TLSOn(), CAFile: sec.CAFile, ServerName: sec.ServerName, ClientCertFile: sec.CertFile,
			CallerToken: sec.TokenFile != "", TokenFile: sec.TokenFile,
		}
		s.HTTPRate = 0
		return s
	case tc.Processes:
		s.Topology = TopologyProcesses
	default:
		s.Topology = TopologyInProcess
		s.Transport = string(tc.Transport)
	}
	s.Kas, s.Agents, s.TunnelsPerAgent = tc.Kas, tc.Agents, tc.TunnelsPerAgent
	return s
}
