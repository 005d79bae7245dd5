package kas_test

import (
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
)

// TestPublicAPIFixedWindows reads the public API's first SETTINGS: a fixed stream window of
// kas.PublicStreamWindow, which also turns off gRPC's bandwidth-delay probing (a PING and its ACK per
// call) and bounds what a waiting call can make kas buffer.
func TestPublicAPIFixedWindows(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c, err := net.DialTimeout("tcp", env.Kas.Addrs().API.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var connIncrement uint32
	var streamWindow uint32 = 65535 // HTTP/2's initial window when SETTINGS does not say
	for seen := false; !seen; {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				continue
			}
			if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
				streamWindow = v
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				connIncrement += f.Increment
				seen = true // gRPC sends the connection's window right after its SETTINGS
			}
		}
	}
	if streamWindow != kas.PublicStreamWindow {
		t.Errorf("stream window %d, want %d", streamWindow, kas.PublicStreamWindow)
	}
	if got := connIncrement + 65535; got != grpctool.ConnectionWindow {
		t.Errorf("connection window %d, want %d", got, grpctool.ConnectionWindow)
	}
}
