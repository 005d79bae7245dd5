package httptunnel_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestStreamingResponseFlushed: a server-sent event reaches the client while the upstream is still
// waiting to send the next one.
func TestStreamingResponseFlushed(t *testing.T) {
	release := make(chan struct{}, 1)
	f := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: first\n\n")
		http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		case <-time.After(testTimeout):
			return
		}
		_, _ = io.WriteString(w, "data: second\n\n")
	}), fixtureConfig{})
	for proto, client := range f.clients() {
		t.Run(proto, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx(t), http.MethodGet, f.url("/events"), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("Content-Type %q", ct)
			}
			br := bufio.NewReader(resp.Body)
			// The upstream has not finished: it waits for release, which only comes after this read.
			if ev := readEvent(t, br); ev != "data: first" {
				t.Fatalf("first event %q", ev)
			}
			release <- struct{}{}
			if ev := readEvent(t, br); ev != "data: second" {
				t.Fatalf("second event %q", ev)
			}
			if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
				t.Fatalf("after the events: %q, %v", rest, err)
			}
		})
	}
}

func readEvent(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	var lines []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("read event: %v (so far %q)", err, lines)
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			return strings.Join(lines, "\n")
		}
		lines = append(lines, line)
	}
}

// TestClientDisconnectReachesUpstream: a client that goes away cancels the request at the upstream,
// whether it waited for the response header, read part of the body, or was still uploading.
func TestClientDisconnectReachesUpstream(t *testing.T) {
	type hit struct {
		started   chan struct{}
		cancelled chan error
	}
	hits := make(chan hit, 1)
	f := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := <-hits
		switch r.URL.Path {
		case "/before-header":
			close(h.started)
		case "/mid-body":
			_, _ = io.WriteString(w, "part one\n")
			http.NewResponseController(w).Flush()
			close(h.started)
		case "/mid-upload":
			close(h.started)
			_, err := io.Copy(io.Discard, r.Body)
			if err == nil {
				err = errors.New("the request body ended cleanly")
			}
			h.cancelled <- err
			return
		}
		select {
		case <-r.Context().Done():
			h.cancelled <- r.Context().Err()
		case <-time.After(testTimeout):
			h.cancelled <- errors.New("never cancelled")
		}
	}), fixtureConfig{})
	for proto, client := range f.clients() {
		for _, path := range []string{"/before-header", "/mid-body", "/mid-upload"} {
			t.Run(proto+path, func(t *testing.T) {
				h := hit{started: make(chan struct{}), cancelled: make(chan error, 1)}
				hits <- h
				reqCtx, cancel := context.WithCancel(ctx(t))
				defer cancel()
				method, body := http.MethodGet, io.Reader(nil)
				giveUp := cancel
				if path == "/mid-upload" {
					pr, pw := io.Pipe()
					go func() {
						// Part of a body, then nothing until the client gives up.
						_, _ = pw.Write([]byte(strings.Repeat("x", 1000)))
					}()
					method, body = http.MethodPost, pr
					// The HTTP/1.1 client waits for a pending body read before it returns.
					giveUp = func() {
						cancel()
						_ = pw.CloseWithError(errors.New("client gave up"))
					}
				}
				req, err := http.NewRequestWithContext(reqCtx, method, f.url(path), body)
				if err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() {
					resp, err := client.Do(req)
					if err == nil {
						_, err = io.ReadAll(resp.Body)
						_ = resp.Body.Close()
					}
					done <- err
				}()
				wait(t, h.started, "the upstream handler to start")
				if path == "/mid-body" {
					time.Sleep(10 * time.Millisecond) // let the first part travel; the test does not depend on it
				}
				giveUp()
				if err := wait(t, done, "the client to give up"); err == nil {
					t.Error("the client request succeeded after it was cancelled")
				}
				err = wait(t, h.cancelled, "the upstream to see the cancellation")
				if path == "/mid-upload" {
					if err == nil || err.Error() == "the request body ended cleanly" {
						t.Fatalf("the upstream read a truncated body without an error: %v", err)
					}
				} else if !errors.Is(err, context.Canceled) {
					t.Fatalf("upstream handler: %v, want its context cancelled", err)
				}
			})
		}
	}
}
