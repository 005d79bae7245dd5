package h2conn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/mem"
)

// transport is one HTTP/2 client connection: a reader goroutine that takes the server's frames, and
// writers that are the callers themselves. A stream's frames are written on its caller's goroutine
// under wmu, so that an idle stream costs no goroutine and no buffer: only what it received and has
// not read yet.
type transport struct {
	c    *Conn
	nc   net.Conn
	fr   *http2.Framer // the reader's only
	done chan struct{} // closed when the reader returned

	// wmu serialises writes to nc and the header encoder's state, which must follow the wire's order.
	wmu      sync.Mutex
	pending  *[]byte   // frames queued for the next write; nil when there are none
	flushing bool      // a writer is writing; others queue
	flushed  sync.Cond // on wmu: a write ended (signalled to one waiting writer, the longest waiting)
	hbuf     bytes.Buffer
	henc     *hpack.Encoder
	nextID   uint32

	mu               sync.Mutex
	slots            sync.Cond // a stream slot freed, or the transport failed
	streams          map[uint32]*clientStream
	active           int // streams created and not finished, with or without an ID yet
	err              error
	goAway           bool
	connSendWindow   int64
	streamSendWindow int64 // the server's SETTINGS_INITIAL_WINDOW_SIZE
	maxFrameSize     int   // the server's SETTINGS_MAX_FRAME_SIZE
	maxStreams       int   // the server's SETTINGS_MAX_CONCURRENT_STREAMS
	connRecvUnacked  int

	streamRecvWindow int // ours
	connRecvWindow   int

	lastRead  atomic.Int64 // monotonic nanoseconds of the last frame read
	keepalive *time.Timer
}

const (
	frameHeaderLen = 9
	// initialWindow is HTTP/2's window before SETTINGS say otherwise.
	initialWindow = 65535
	// readBufferSize is the read buffer of a connection that is not a socket (TLS, in-memory): large
	// enough for a few small frames per read.
	readBufferSize = 4 << 10
	// maxStreamID is the last client stream ID; a connection that used it takes no more streams.
	maxStreamID = 1<<31 - 1
)

var (
	clientPreface = []byte(http2.ClientPreface)
	epoch         = time.Now()
)

func monotonic() int64 { return int64(time.Since(epoch)) }

// newTransport starts HTTP/2 on nc: the preface, our settings and connection window, and the reader.
func newTransport(c *Conn, nc net.Conn) (*transport, error) {
	t := &transport{
		c:                c,
		nc:               nc,
		done:             make(chan struct{}),
		nextID:           1,
		streams:          make(map[uint32]*clientStream),
		connSendWindow:   initialWindow,
		streamSendWindow: initialWindow,
		maxFrameSize:     16 << 10,
		maxStreams:       math.MaxInt32,
		streamRecvWindow: c.opts.StreamWindow,
		connRecvWindow:   c.opts.ConnectionWindow,
	}
	t.slots.L = &t.mu
	t.flushed.L = &t.wmu
	t.henc = hpack.NewEncoder(&t.hbuf)
	t.fr = http2.NewFramer(nil, newConnReader(nc))
	t.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	t.fr.MaxHeaderListSize = c.opts.MaxHeaderListSize
	// A DATA frame's struct is reused from one read to the next: onData copies the payload out before
	// the reader reads on (a 1 MiB message is 64 frames, 64 allocations fewer).
	t.fr.SetReuseFrames()
	t.lastRead.Store(monotonic())

	// The preface and settings go out in one write.
	var b []byte
	b = append(b, clientPreface...)
	settings := []http2.Setting{
		{ID: http2.SettingEnablePush, Val: 0},
		{ID: http2.SettingInitialWindowSize, Val: uint32(t.streamRecvWindow)},
		{ID: http2.SettingMaxHeaderListSize, Val: c.opts.MaxHeaderListSize},
	}
	b = appendFrameHeader(b, 6*len(settings), http2.FrameSettings, 0, 0)
	for _, s := range settings {
		b = binary.BigEndian.AppendUint16(b, uint16(s.ID))
		b = binary.BigEndian.AppendUint32(b, s.Val)
	}
	if inc := t.connRecvWindow - initialWindow; inc > 0 {
		b = appendWindowUpdate(b, 0, uint32(inc))
	}
	if _, err := nc.Write(b); err != nil {
		return nil, err
	}
	go t.readLoop()
	if c.opts.KeepaliveTime > 0 {
		t.keepalive = time.AfterFunc(c.opts.KeepaliveTime, t.checkKeepalive)
	}
	return t, nil
}

func appendFrameHeader(b []byte, length int, typ http2.FrameType, flags http2.Flags, id uint32) []byte {
	return append(b, byte(length>>16), byte(length>>8), byte(length), byte(typ), byte(flags),
		byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
}

func appendWindowUpdate(b []byte, id, inc uint32) []byte {
	b = appendFrameHeader(b, 4, http2.FrameWindowUpdate, 0, id)
	return binary.BigEndian.AppendUint32(b, inc)
}

// usable is whether a new stream may start here.
func (t *transport) usable() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err == nil && !t.goAway && t.nextID <= maxStreamID
}

// fail ends the transport: every stream gets err, the connection is closed.
func (t *transport) fail(err error) {
	t.mu.Lock()
	if t.err != nil {
		t.mu.Unlock()
		return
	}
	t.err = err
	streams := t.streams
	t.streams = map[uint32]*clientStream{}
	t.mu.Unlock()
	_ = t.nc.Close()
	if t.keepalive != nil {
		t.keepalive.Stop()
	}
	for _, s := range streams {
		s.fail(err)
	}
	t.slots.Broadcast()
	t.c.forget(t)
}

// write queues b and writes what is queued. Call with wmu held. wmu is released during the write
// itself, so that other writers queue meanwhile and go out with the next write: under load, frames
// of many streams share a system call. A writer that finds a write under way leaves its frames to it.
func (t *transport) write(b []byte) error {
	t.queueLocked(b)
	return t.flushLocked()
}

// queueLocked appends parts to what the next write sends. Call with wmu held.
func (t *transport) queueLocked(parts ...[]byte) {
	if t.pending == nil {
		t.pending = pendingBufs.Get().(*[]byte)
	}
	for _, p := range parts {
		*t.pending = append(*t.pending, p...)
	}
}

// pendingBufs hold queued frames between writes; a connection holds none while it has nothing to
// write.
var pendingBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// flushLocked writes what is queued, unless a write is under way. Call with wmu held.
func (t *transport) flushLocked() error {
	if t.flushing {
		return nil
	}
	t.flushing = true
	defer func() {
		t.flushing = false
		// One waiting writer takes the connection next; its write's end wakes the one after. Waking
		// them all would make every large writer of a busy connection run (and wait again) per write.
		t.flushed.Signal()
	}()
	// Before the first write, other goroutines that are ready to run get the processor: under load
	// their frames join this write (as gRPC-go's writer goroutine finds them queued); alone, this
	// costs a return from the scheduler.
	t.wmu.Unlock()
	runtime.Gosched()
	t.wmu.Lock()
	for t.pending != nil {
		b := t.pending
		t.pending = nil
		t.wmu.Unlock()
		_, err := t.nc.Write(*b)
		*b = (*b)[:0]
		if cap(*b) <= maxPooledPending {
			pendingBufs.Put(b)
		}
		t.wmu.Lock()
		if err != nil {
			t.fail(fmt.Errorf("write: %w", err))
			return t.failure()
		}
	}
	return nil
}

// maxPooledPending is the largest queue buffer kept for the next writes.
const maxPooledPending = 1 << 20

func (t *transport) failure() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// writeControl writes a frame that no stream waits for (settings ack, ping ack, window updates,
// resets).
func (t *transport) writeControl(b []byte) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	_ = t.write(b)
}

// readLoop reads frames until the connection breaks.
func (t *transport) readLoop() {
	defer close(t.done)
	for {
		f, err := t.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				t.resetStream(se.StreamID, se.Code, fmt.Errorf("h2conn: the server's frame broke stream %d: %w", se.StreamID, err))
				continue
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				// Not io's errors: a stream would take them for its own end.
				err = errors.New("the server closed the connection")
			}
			t.fail(fmt.Errorf("read: %v", err))
			return
		}
		t.lastRead.Store(monotonic())
		switch f := f.(type) {
		case *http2.DataFrame:
			t.onData(f)
		case *http2.MetaHeadersFrame:
			t.onHeaders(f)
		case *http2.RSTStreamFrame:
			t.onReset(f)
		case *http2.SettingsFrame:
			if err := t.onSettings(f); err != nil {
				t.fail(err)
				return
			}
		case *http2.WindowUpdateFrame:
			t.onWindowUpdate(f)
		case *http2.PingFrame:
			if !f.IsAck() {
				b := appendFrameHeader(make([]byte, 0, frameHeaderLen+8), 8, http2.FramePing, http2.FlagPingAck, 0)
				t.writeControl(append(b, f.Data[:]...))
			}
		case *http2.GoAwayFrame:
			t.onGoAway(f)
		}
	}
}

func (t *transport) stream(id uint32) *clientStream {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.streams[id]
}

func (t *transport) onData(f *http2.DataFrame) {
	n := int(f.Header().Length)
	data := f.Data()
	t.mu.Lock()
	t.connRecvUnacked += n
	var connInc int
	if t.connRecvUnacked >= t.connRecvWindow/4 {
		connInc, t.connRecvUnacked = t.connRecvUnacked, 0
	}
	s := t.streams[f.StreamID]
	var overflow bool
	if s != nil {
		s.recvUsed += n
		// Padding is never read: it is returned to the window with the next update.
		s.recvUnacked += n - len(data)
		if s.recvUsed > t.streamRecvWindow {
			overflow = true
		} else if len(data) > 0 && !s.recvDone && s.err == nil {
			buf := mem.DefaultBufferPool().Get(len(data))
			copy(*buf, data)
			s.recv = append(s.recv, buf)
			s.recvQueued += len(data)
		}
		if f.StreamEnded() {
			s.recvDone = true
		}
		if s.recvQueued >= s.want || s.recvDone || overflow {
			s.cond.Broadcast()
		}
	}
	t.mu.Unlock()
	if connInc > 0 {
		t.writeControl(appendWindowUpdate(nil, 0, uint32(connInc)))
	}
	if overflow {
		t.resetStream(f.StreamID, http2.ErrCodeFlowControl, errors.New("h2conn: the server sent more than the stream's flow-control window"))
	}
}

func (t *transport) onHeaders(f *http2.MetaHeadersFrame) {
	if f.Truncated {
		t.resetStream(f.StreamID, http2.ErrCodeProtocol, fmt.Errorf("h2conn: the server's header list is larger than %d bytes", t.c.opts.MaxHeaderListSize))
		return
	}
	t.mu.Lock()
	s := t.streams[f.StreamID]
	if s == nil {
		t.mu.Unlock()
		return
	}
	fields := make(headerFields, len(f.Fields))
	for _, hf := range f.Fields {
		fields[hf.Name] = append(fields[hf.Name], hf.Value)
	}
	if !s.gotHeader {
		s.gotHeader = true
		s.header = fields
		s.trailersOnly = f.StreamEnded()
	} else {
		s.trailer = fields
	}
	if f.StreamEnded() {
		s.recvDone = true
	}
	s.cond.Broadcast()
	t.mu.Unlock()
}

func (t *transport) onReset(f *http2.RSTStreamFrame) {
	t.mu.Lock()
	s := t.streams[f.StreamID]
	delete(t.streams, f.StreamID)
	// A server that ended its response resets the stream to stop the request (gRPC-go does so when
	// a handler returns before the client's end): what it sent is still read, and the sender sees
	// the end.
	ended := s != nil && s.recvDone
	t.mu.Unlock()
	if s == nil {
		return
	}
	if ended {
		s.cond.Broadcast()
		return
	}
	s.fail(http2.StreamError{StreamID: f.StreamID, Code: f.ErrCode})
}

// resetStream ends a stream from our side: it is told RST_STREAM with code, and its caller err.
func (t *transport) resetStream(id uint32, code http2.ErrCode, err error) {
	t.mu.Lock()
	s := t.streams[id]
	delete(t.streams, id)
	t.mu.Unlock()
	if s != nil {
		s.fail(err)
	}
	t.writeReset(id, code)
}

func (t *transport) writeReset(id uint32, code http2.ErrCode) {
	b := appendFrameHeader(make([]byte, 0, frameHeaderLen+4), 4, http2.FrameRSTStream, 0, id)
	t.writeControl(binary.BigEndian.AppendUint32(b, uint32(code)))
}

func (t *transport) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	var tableSize uint32
	var setTable bool
	t.mu.Lock()
	err := f.ForeachSetting(func(s http2.Setting) error {
		switch s.ID {
		case http2.SettingInitialWindowSize:
			delta := int64(s.Val) - t.streamSendWindow
			t.streamSendWindow = int64(s.Val)
			for _, st := range t.streams {
				st.sendWindow += delta
				st.cond.Broadcast()
			}
		case http2.SettingMaxFrameSize:
			t.maxFrameSize = int(s.Val)
		case http2.SettingMaxConcurrentStreams:
			t.maxStreams = int(min(s.Val, math.MaxInt32))
			t.slots.Broadcast()
		case http2.SettingHeaderTableSize:
			tableSize, setTable = s.Val, true
		}
		return nil
	})
	t.mu.Unlock()
	if err != nil {
		return err
	}
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if setTable {
		t.henc.SetMaxDynamicTableSizeLimit(tableSize)
	}
	return t.write(appendFrameHeader(nil, 0, http2.FrameSettings, http2.FlagSettingsAck, 0))
}

func (t *transport) onWindowUpdate(f *http2.WindowUpdateFrame) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if f.StreamID == 0 {
		t.connSendWindow += int64(f.Increment)
		for _, s := range t.streams {
			if s.waitingWindow {
				s.cond.Broadcast()
			}
		}
		return
	}
	if s := t.streams[f.StreamID]; s != nil {
		s.sendWindow += int64(f.Increment)
		s.cond.Broadcast()
	}
}

func (t *transport) onGoAway(f *http2.GoAwayFrame) {
	t.mu.Lock()
	t.goAway = true
	var refused []*clientStream
	for id, s := range t.streams {
		if id > f.LastStreamID {
			refused = append(refused, s)
			delete(t.streams, id)
		}
	}
	idle := t.active == 0
	t.slots.Broadcast()
	t.mu.Unlock()
	t.c.forget(t)
	for _, s := range refused {
		s.fail(errRefused)
	}
	if idle {
		t.fail(errGoAway)
	}
}

var (
	errRefused = errors.New("h2conn: the server sent GOAWAY before it took the stream")
	errGoAway  = errors.New("h2conn: the server sent GOAWAY")
)

// checkKeepalive pings a server that has sent nothing for KeepaliveTime, and closes the connection
// when the ping is not answered within KeepaliveTimeout. It runs on the timer's goroutine, only when
// the timer fires.
func (t *transport) checkKeepalive() {
	o := t.c.opts
	last := t.lastRead.Load()
	if quiet := time.Duration(monotonic() - last); quiet < o.KeepaliveTime {
		t.keepalive.Reset(o.KeepaliveTime - quiet)
		return
	}
	// Armed before the ping is written: a write that blocks (a server that stopped reading) ends too.
	deadline := time.AfterFunc(o.KeepaliveTimeout, func() {
		if t.lastRead.Load() == last {
			t.fail(fmt.Errorf("keepalive: no answer to a ping within %v", o.KeepaliveTimeout))
		}
	})
	b := appendFrameHeader(make([]byte, 0, frameHeaderLen+8), 8, http2.FramePing, 0, 0)
	t.writeControl(append(b, "h2conn\x00\x00"...))
	if t.failure() != nil {
		deadline.Stop()
		return
	}
	t.keepalive.Reset(o.KeepaliveTime)
}

// streamDone forgets a finished stream's slot; a transport after GOAWAY closes with its last stream.
func (t *transport) streamDone(s *clientStream) {
	t.mu.Lock()
	if t.streams[s.id] == s {
		delete(t.streams, s.id)
	}
	t.active--
	idle := t.goAway && t.active == 0
	t.slots.Broadcast()
	t.mu.Unlock()
	if idle {
		t.fail(errGoAway)
	}
}
