package httptunnel_test

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/internal/testtier"
)

const (
	// largeBody is the size of the body sent each way.
	largeBody = 256 << 20
	// heapBound is how far above its baseline the heap in use may grow while a large body streams:
	// client, kas, agent and upstream all live in this process. It is far below the body size.
	heapBound = 64 << 20
	// largeTimeout bounds one large transfer: the race detector slows every copied byte about tenfold,
	// and every hop copies.
	largeTimeout = 2 * time.Minute
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// generator is n bytes, never held in memory, whose checksum is known once read: a pseudo-random
// block of a length that no chunk size divides, repeated. Copying is cheap even with the race detector.
func generator(seed uint64, n int64) (io.Reader, *crc32Sum) {
	block := make([]byte, 1<<20+17)
	_, _ = rand.NewChaCha8([32]byte{byte(seed)}).Read(block)
	sum := &crc32Sum{h: crc32.New(crcTable)}
	return io.TeeReader(io.LimitReader(&cycle{block: block}, n), sum), sum
}

// cycle repeats block forever.
type cycle struct {
	block []byte
	off   int
}

func (c *cycle) Read(p []byte) (int, error) {
	n := copy(p, c.block[c.off:])
	c.off = (c.off + n) % len(c.block)
	return n, nil
}

type crc32Sum struct {
	mu sync.Mutex
	h  interface {
		io.Writer
		Sum32() uint32
	}
	n int64
}

func (s *crc32Sum) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n += int64(len(p))
	return s.h.Write(p)
}

func (s *crc32Sum) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%d bytes crc %08x", s.n, s.h.Sum32())
}

// heapPeak samples HeapInuse until stop is called and reports the peak above the baseline taken after
// a GC at the start.
func heapPeak(t *testing.T) (stop func() uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	peak.Store(base)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-stopped
		return peak.Load() - base
	}
}

// TestLargeBodiesFlatMemory streams hundreds of MiB each way; it is in the full tier only (testtier).
func TestLargeBodiesFlatMemory(t *testing.T) {
	testtier.Full(t, "streams 256 MiB each way")
	const size = largeBody
	f := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/upload":
			sum := &crc32Sum{h: crc32.New(crcTable)}
			if _, err := io.Copy(sum, r.Body); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			_, _ = io.WriteString(w, sum.String())
		case "/download":
			body, sum := generator(2, size)
			w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
			_, _ = io.Copy(w, body)
			_ = sum
		}
	}), fixtureConfig{})

	t.Run("upload", func(t *testing.T) {
		stop := heapPeak(t)
		body, sent := generator(1, size)
		req, err := http.NewRequestWithContext(largeCtx(t), http.MethodPost, f.url("/upload"), body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = size
		resp, err := f.h1.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		peak := stop()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d, %q, %v", resp.StatusCode, got, err)
		}
		if string(got) != sent.String() {
			t.Fatalf("upstream received %s, client sent %s", got, sent)
		}
		t.Logf("%d MiB upload: peak heap in use %.1f MiB above baseline", size>>20, float64(peak)/(1<<20))
		if peak > heapBound {
			t.Errorf("peak heap %d MiB above baseline, want below %d MiB", peak>>20, heapBound>>20)
		}
	})

	t.Run("download", func(t *testing.T) {
		stop := heapPeak(t)
		req, err := http.NewRequestWithContext(largeCtx(t), http.MethodGet, f.url("/download"), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := f.h1.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got := &crc32Sum{h: crc32.New(crcTable)}
		_, err = io.Copy(got, resp.Body)
		_ = resp.Body.Close()
		peak := stop()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d, %v", resp.StatusCode, err)
		}
		if resp.ContentLength != size {
			t.Errorf("content length %d, want %d", resp.ContentLength, size)
		}
		// The expected checksum: read the same generator without sending it anywhere.
		wantBody, want := generator(2, size)
		if _, err := io.Copy(io.Discard, wantBody); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Fatalf("client received %s, upstream sent %s", got, want)
		}
		t.Logf("%d MiB download: peak heap in use %.1f MiB above baseline", size>>20, float64(peak)/(1<<20))
		if peak > heapBound {
			t.Errorf("peak heap %d MiB above baseline, want below %d MiB", peak>>20, heapBound>>20)
		}
	})
}

func largeCtx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), largeTimeout)
	t.Cleanup(cancel)
	return c
}
