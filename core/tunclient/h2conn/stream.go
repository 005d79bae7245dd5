package h2conn

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// errEOF is io.EOF: the end of a stream, as gRPC's streams report it.
var errEOF = io.EOF

// prefixLen is gRPC's message prefix: a compression flag and a 4-byte big-endian length.
const prefixLen = 5

// clientStream is one gRPC stream on a transport. Its request header goes out with its first message
// (or when the caller first waits for the server), so that both take one write. Nothing runs for it
// between calls of its methods: the transport's reader queues what the server sends, the caller's
// own goroutine writes.
type clientStream struct {
	ctx     context.Context
	cancel  context.CancelFunc
	stopCtx func() bool
	t       *transport
	fields  []hpack.HeaderField // the request header, until it was written
	codec   encoding.CodecV2
	maxRecv int
	maxSend int
	release sync.Once

	// Guarded by t.wmu, and t.mu to set.
	id     uint32      // 0 until the request header was written
	isOpen atomic.Bool // id is set: read without the locks

	// Guarded by t.mu.
	cond          sync.Cond
	sendWindow    int64
	waitingWindow bool
	sentEnd       bool
	gotHeader     bool
	trailersOnly  bool
	header        headerFields
	trailer       headerFields
	recv          []*[]byte // received data not read yet; recv[0] from recvOff on
	recvOff       int
	recvQueued    int
	recvDone      bool // END_STREAM received
	recvUsed      int  // of our window: received and not yet returned by a window update
	recvUnacked   int  // read (or padding), to return with the next window update
	want          int  // what the waiting reader waits for: no wake-up before it is queued
	err           error

	// The receiver's.
	recvErr error
	prefix  [prefixLen]byte
	mdTrail metadata.MD
}

func newClientStream(ctx context.Context, t *transport, fields []hpack.HeaderField, opts []grpc.CallOption) (*clientStream, error) {
	cs := &clientStream{
		t:       t,
		fields:  fields,
		codec:   encoding.GetCodecV2(proto.Name),
		maxRecv: defaultMaxRecvMsgSize,
		maxSend: math.MaxInt32,
	}
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.MaxRecvMsgSizeCallOption:
			cs.maxRecv = o.MaxRecvMsgSize
		case grpc.MaxSendMsgSizeCallOption:
			cs.maxSend = o.MaxSendMsgSize
		case grpc.ForceCodecV2CallOption:
			cs.codec = o.CodecV2
		case grpc.EmptyCallOption, grpc.StaticMethodCallOption:
		default:
			return nil, status.Errorf(codes.Internal, "h2conn: call option %T is not supported", o)
		}
	}
	cs.cond.L = &t.mu
	if err := t.takeSlot(ctx); err != nil {
		return nil, err
	}
	cs.ctx, cs.cancel = context.WithCancel(ctx)
	cs.stopCtx = context.AfterFunc(cs.ctx, func() {
		cs.fail(status.FromContextError(context.Cause(cs.ctx)).Err())
		cs.end()
	})
	return cs, nil
}

// takeSlot waits for the server's limit of concurrent streams to allow one more.
func (t *transport) takeSlot(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		t.mu.Lock()
		t.slots.Broadcast()
		t.mu.Unlock()
	})
	defer stop()
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.err == nil && !t.goAway && t.active >= t.maxStreams && ctx.Err() == nil {
		t.slots.Wait()
	}
	switch {
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	case t.err != nil:
		return statusFromTransport(t.err)
	case t.goAway:
		return errRetry
	}
	t.active++
	return nil
}

// errRetry is a transport that took no stream: the connection takes the next one.
var errRetry = errors.New("h2conn: the connection is going away")

func (cs *clientStream) Context() context.Context { return cs.ctx }

// fail ends the stream with err for its caller, unless it ended already or the server ended it: then
// what it sent is whole and still read, even once the connection is gone.
func (cs *clientStream) fail(err error) {
	cs.t.mu.Lock()
	if cs.err == nil && !cs.recvDone {
		cs.err = err
	}
	cs.t.mu.Unlock()
	cs.cond.Broadcast()
}

// end releases the stream once: a stream the server or we did not end both ways is reset, what it
// received is freed, and its slot is the transport's again.
func (cs *clientStream) end() {
	cs.release.Do(func() {
		cs.stopCtx()
		cs.cancel()
		t := cs.t
		t.wmu.Lock()
		id := cs.id
		t.mu.Lock()
		open := id != 0 && !(cs.sentEnd && cs.recvDone) && t.streams[id] == cs
		code := http2.ErrCodeCancel
		if cs.recvDone {
			code = http2.ErrCodeNo
		}
		for _, b := range cs.recv {
			mem.DefaultBufferPool().Put(b)
		}
		cs.recv, cs.recvQueued = nil, 0
		if id != 0 && t.streams[id] == cs {
			delete(t.streams, id)
		}
		t.mu.Unlock()
		if open && t.failure() == nil {
			b := appendFrameHeader(make([]byte, 0, frameHeaderLen+4), 4, http2.FrameRSTStream, 0, id)
			_ = t.write(binary.BigEndian.AppendUint32(b, uint32(code)))
		}
		t.wmu.Unlock()
		t.streamDone(cs)
	})
}

// openLocked writes nothing yet: it gives the stream its ID, registers it and encodes its header
// frames. Call with t.wmu held; the frames must be written before t.wmu is released.
func (cs *clientStream) openLocked() ([]byte, error) {
	t := cs.t
	t.mu.Lock()
	switch {
	case cs.err != nil:
		err := cs.err
		t.mu.Unlock()
		return nil, err
	case t.err != nil:
		err := t.err
		t.mu.Unlock()
		return nil, err
	case t.goAway || t.nextID > maxStreamID:
		t.mu.Unlock()
		return nil, errRefused
	}
	cs.id = t.nextID
	cs.isOpen.Store(true)
	t.nextID += 2
	cs.sendWindow = t.streamSendWindow
	t.streams[cs.id] = cs
	maxFrame := t.maxFrameSize
	t.mu.Unlock()

	t.hbuf.Reset()
	for _, f := range cs.fields {
		_ = t.henc.WriteField(f)
	}
	cs.fields = nil
	block := t.hbuf.Bytes()
	var b []byte
	typ, flags := http2.FrameHeaders, http2.Flags(0)
	for first := true; first || len(block) > 0; first = false {
		n := min(len(block), maxFrame)
		if n == len(block) {
			flags |= http2.FlagHeadersEndHeaders // the same bit as CONTINUATION's END_HEADERS
		}
		b = appendFrameHeader(b, n, typ, flags, cs.id)
		b = append(b, block[:n]...)
		block = block[n:]
		typ, flags = http2.FrameContinuation, 0
	}
	return b, nil
}

// open writes the request header if it was not written yet.
func (cs *clientStream) open() error {
	if cs.isOpen.Load() {
		return nil
	}
	t := cs.t
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if cs.id != 0 {
		return nil
	}
	hdr, err := cs.openLocked()
	if err != nil {
		return err
	}
	return t.write(hdr)
}

// send writes data (pieces, in order) in DATA frames as the flow-control windows allow, the request
// header first if it was not written yet; end ends the request.
func (cs *clientStream) send(pieces [][]byte, end bool) error {
	t := cs.t
	total := 0
	for _, p := range pieces {
		total += len(p)
	}
	for {
		if cs.opened() && total > 0 {
			if err := cs.awaitWindow(); err != nil {
				return err
			}
		}
		t.wmu.Lock()
		var hdr []byte
		if cs.id == 0 {
			var err error
			if hdr, err = cs.openLocked(); err != nil {
				t.wmu.Unlock()
				return err
			}
		}
		n, maxFrame, err := cs.reserve(total)
		if err != nil {
			t.wmu.Unlock()
			return err
		}
		last := n == total
		if n == 0 && !last && hdr == nil {
			t.wmu.Unlock() // another stream took the connection's window first
			continue
		}
		frames := n/maxFrame + 1
		bufs := make([][]byte, 0, 2+len(pieces)+2*frames)
		// The frames' headers share one allocation; writeBuffers is done with them when it returns.
		hdrs := make([]byte, 0, frameHeaderLen*frames)
		if hdr != nil {
			bufs = append(bufs, hdr)
		}
		// A batch's worth of frames goes out in one write.
		for rest := n; rest > 0 || (end && last); {
			size := min(rest, maxFrame)
			endFrame := end && last && size == rest
			var flags http2.Flags
			if endFrame {
				flags = http2.FlagDataEndStream
			}
			at := len(hdrs)
			hdrs = appendFrameHeader(hdrs, size, http2.FrameData, flags, cs.id)
			bufs = append(bufs, hdrs[at:len(hdrs):len(hdrs)])
			for part := size; part > 0; {
				p := pieces[0]
				if len(p) > part {
					bufs = append(bufs, p[:part])
					pieces[0] = p[part:]
					break
				}
				bufs = append(bufs, p)
				pieces = pieces[1:]
				part -= len(p)
			}
			rest -= size
			if endFrame {
				break
			}
		}
		err = t.writeBuffers(bufs)
		if err == nil && end && last {
			t.mu.Lock()
			cs.sentEnd = true
			t.mu.Unlock()
		}
		t.wmu.Unlock()
		if err != nil || last {
			return err
		}
		total -= n
	}
}

// copyLimit is the most a writer copies into the queue: larger writes wait for their turn and go out
// from the caller's buffers, with what is queued in front.
const copyLimit = 32 << 10

// writeBuffers writes bufs, in order with every other writer. Call with t.wmu held.
func (t *transport) writeBuffers(bufs [][]byte) error {
	size := 0
	for _, b := range bufs {
		size += len(b)
	}
	if size <= copyLimit {
		t.queueLocked(bufs...)
		return t.flushLocked()
	}
	for t.flushing {
		t.flushed.Wait()
	}
	t.flushing = true
	queued := t.pending
	t.pending = nil
	t.wmu.Unlock()
	out := make(net.Buffers, 0, 1+len(bufs))
	if queued != nil {
		out = append(out, *queued)
	}
	out = append(out, bufs...)
	_, err := out.WriteTo(t.nc)
	if queued != nil {
		*queued = (*queued)[:0]
		pendingBufs.Put(queued)
	}
	t.wmu.Lock()
	t.flushing = false
	if err != nil {
		t.flushed.Broadcast()
		t.fail(fmt.Errorf("write: %w", err))
		return t.failure()
	}
	return t.flushLocked() // what others queued meanwhile
}

func (cs *clientStream) opened() bool {
	return cs.isOpen.Load()
}

// awaitWindow waits until the stream and the connection may send a byte.
func (cs *clientStream) awaitWindow() error {
	t := cs.t
	t.mu.Lock()
	defer t.mu.Unlock()
	for cs.err == nil && t.err == nil && !cs.recvDone && (cs.sendWindow <= 0 || t.connSendWindow <= 0) {
		cs.waitingWindow = true
		cs.cond.Wait()
	}
	cs.waitingWindow = false
	return cs.sendErrLocked()
}

// sendErrLocked is why the stream cannot send: its error, or the end the server gave it.
func (cs *clientStream) sendErrLocked() error {
	switch {
	case cs.err != nil:
		return cs.err
	case cs.t.err != nil:
		return cs.t.err
	case cs.recvDone || cs.sentEnd:
		return errEOF
	}
	return nil
}

// sendBatch is the most a stream writes in one turn: large messages leave room for other streams'
// frames between their batches.
const sendBatch = 256 << 10

// reserve takes up to total bytes (a batch at most) of both windows, without waiting. It returns the
// server's frame size too.
func (cs *clientStream) reserve(total int) (n, maxFrame int, err error) {
	t := cs.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := cs.sendErrLocked(); err != nil {
		return 0, 0, err
	}
	m := int64(min(total, sendBatch))
	m = max(0, min(m, cs.sendWindow, t.connSendWindow))
	cs.sendWindow -= m
	t.connSendWindow -= m
	return int(m), t.maxFrameSize, nil
}

// read reads what the server sent on the stream, waiting for it; io.EOF once the server ended it.
func (cs *clientStream) read(p []byte) (int, error) {
	t := cs.t
	t.mu.Lock()
	if err := cs.awaitQueuedLocked(len(p)); err != nil {
		t.mu.Unlock()
		return 0, err
	}
	n := 0
	for n < len(p) && len(cs.recv) > 0 {
		b := *cs.recv[0]
		c := copy(p[n:], b[cs.recvOff:])
		n += c
		cs.recvOff += c
		if cs.recvOff == len(b) {
			mem.DefaultBufferPool().Put(cs.recv[0])
			cs.popLocked()
		}
	}
	cs.consumedLocked(n)
	return n, nil
}

// readBuffers reads the next n bytes as buffers: the received frames' own buffers where the bytes
// fill them, and copies only where the n bytes begin or end inside one. A large message then costs
// no copy beyond the one out of the socket's buffer, as with gRPC-go's client.
func (cs *clientStream) readBuffers(n int) (mem.BufferSlice, error) {
	t := cs.t
	pool := mem.DefaultBufferPool()
	var out mem.BufferSlice
	for n > 0 {
		t.mu.Lock()
		if err := cs.awaitQueuedLocked(n); err != nil {
			t.mu.Unlock()
			out.Free()
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		taken := 0
		for taken < n && len(cs.recv) > 0 {
			b := cs.recv[0]
			rest := (*b)[cs.recvOff:]
			if cs.recvOff == 0 && len(rest) <= n-taken {
				out = append(out, mem.NewBuffer(b, pool)) // the buffer is the message's now
				taken += len(rest)
				cs.popLocked()
				continue
			}
			c := min(len(rest), n-taken)
			out = append(out, mem.Copy(rest[:c], pool))
			taken += c
			cs.recvOff += c
			if cs.recvOff == len(*b) {
				pool.Put(b)
				cs.popLocked()
			}
		}
		cs.consumedLocked(taken)
		n -= taken
	}
	return out, nil
}

// AwaitReceived waits until the stream has something to receive: a message's bytes, its end or an
// error (see rpc.Awaiter). It receives nothing.
func (cs *clientStream) AwaitReceived() {
	cs.t.mu.Lock()
	if cs.recvErr == nil { // a finished stream has nothing more to wait for
		_ = cs.awaitQueuedLocked(1)
	}
	cs.t.mu.Unlock()
}

// awaitQueuedLocked waits until n bytes are queued (up to half the window, which a server fills
// without our updates: one wake-up per message rather than one per frame) or the stream ended. It
// returns the stream's error, or io.EOF when nothing is left to read. Call with t.mu held.
func (cs *clientStream) awaitQueuedLocked(n int) error {
	want := max(1, min(n, cs.t.streamRecvWindow/2))
	for cs.recvQueued < want && !cs.recvDone && cs.err == nil {
		cs.want = want
		cs.cond.Wait()
	}
	cs.want = 0
	if cs.err != nil {
		return cs.err
	}
	if cs.recvQueued == 0 {
		return io.EOF
	}
	return nil
}

// popLocked drops the first queued buffer, whose bytes were all taken. Call with t.mu held.
func (cs *clientStream) popLocked() {
	cs.recv[0] = nil
	cs.recv = cs.recv[1:]
	cs.recvOff = 0
	if len(cs.recv) == 0 {
		cs.recv = nil
	}
}

// consumedLocked counts n bytes taken off the queue and unlocks t.mu, then returns the stream's window
// to the server once a quarter of it was read. Call with t.mu held.
func (cs *clientStream) consumedLocked(n int) {
	t := cs.t
	cs.recvQueued -= n
	cs.recvUnacked += n
	var inc int
	if !cs.recvDone && cs.recvUnacked >= t.streamRecvWindow/4 {
		inc = cs.recvUnacked
		cs.recvUsed -= inc
		cs.recvUnacked = 0
	}
	id := cs.id
	t.mu.Unlock()
	if inc > 0 {
		t.writeControl(appendWindowUpdate(nil, id, uint32(inc)))
	}
}

// readFull reads len(p) bytes; io.EOF if the stream ended before the first, io.ErrUnexpectedEOF if
// after it.
func (cs *clientStream) readFull(p []byte) error {
	n := 0
	for n < len(p) {
		m, err := cs.read(p[n:])
		n += m
		if err != nil {
			if errors.Is(err, io.EOF) && n > 0 {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// gatherMin is the smallest message read as the received frames' buffers (readBuffers) rather than
// copied into one: below it the copy is cheaper than a buffer object per frame.
const gatherMin = 16 << 10

// SendMsg sends m. It returns io.EOF once the stream ended; RecvMsg then returns its status.
func (cs *clientStream) SendMsg(m any) error {
	data, err := cs.codec.Marshal(m)
	if err != nil {
		return status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
	}
	defer data.Free()
	size := data.Len()
	if size > cs.maxSend {
		return status.Errorf(codes.ResourceExhausted, "grpc: trying to send message larger than max (%d vs. %d)", size, cs.maxSend)
	}
	if uint64(size) > math.MaxUint32 {
		return status.Errorf(codes.ResourceExhausted, "grpc: message of %d bytes does not fit gRPC's length prefix", size)
	}
	var prefix [prefixLen]byte
	binary.BigEndian.PutUint32(prefix[1:], uint32(size))
	var arr [4][]byte
	pieces := append(arr[:0], prefix[:])
	for _, b := range data {
		if d := b.ReadOnlyData(); len(d) > 0 {
			pieces = append(pieces, d)
		}
	}
	if err := cs.send(pieces, false); err != nil {
		return cs.sendError(err)
	}
	return nil
}

// sendError is what SendMsg returns for err: io.EOF when the stream ended (RecvMsg gives the status),
// as gRPC's streams do.
func (cs *clientStream) sendError(err error) error {
	if errors.Is(err, errEOF) {
		return errEOF
	}
	cs.fail(err)
	return errEOF
}

// CloseSend ends the request.
func (cs *clientStream) CloseSend() error {
	cs.t.mu.Lock()
	done := cs.sentEnd
	cs.t.mu.Unlock()
	if done {
		return nil
	}
	if err := cs.send(nil, true); err != nil && !errors.Is(err, errEOF) {
		cs.fail(err)
	}
	return nil // as gRPC's: a failure shows in RecvMsg
}

// awaitHeader writes the request header if it is still queued, and waits for the server's.
func (cs *clientStream) awaitHeader() error {
	if err := cs.open(); err != nil {
		cs.fail(err)
	}
	t := cs.t
	t.mu.Lock()
	defer t.mu.Unlock()
	for !cs.gotHeader && cs.err == nil {
		cs.cond.Wait()
	}
	if !cs.gotHeader {
		return cs.err
	}
	return nil
}

// Header waits for the response header.
func (cs *clientStream) Header() (metadata.MD, error) {
	if err := cs.awaitHeader(); err != nil {
		return nil, cs.finish(cs.streamError(err))
	}
	if err := cs.checkHeader(); err != nil {
		return nil, cs.finish(err)
	}
	if cs.trailersOnly {
		return metadata.MD{}, nil
	}
	md, err := toMetadata(cs.header)
	if err != nil {
		return nil, cs.finish(err)
	}
	return md, nil
}

// Trailer is the response trailer, once RecvMsg returned an error.
func (cs *clientStream) Trailer() metadata.MD {
	return cs.mdTrail
}

// checkHeader checks the response header: the HTTP status and gRPC's content type, unless the
// response is trailers-only (its status is then the stream's).
func (cs *clientStream) checkHeader() error {
	h := cs.header
	if cs.trailersOnly && len(h["grpc-status"]) > 0 {
		return nil
	}
	if code := h.get(":status"); code != "200" {
		return httpStatusError(code)
	}
	if ct := h.get("content-type"); !isGRPCContentType(ct) {
		return status.Errorf(codes.Unknown, "h2conn: the server answered with content type %q, not gRPC's", ct)
	}
	return nil
}

// RecvMsg reads the next message into m; at the end of the stream it returns io.EOF for an OK status
// and the status otherwise.
func (cs *clientStream) RecvMsg(m any) error {
	if cs.recvErr != nil {
		return cs.recvErr
	}
	if err := cs.awaitHeader(); err != nil {
		return cs.finish(cs.streamError(err))
	}
	if err := cs.checkHeader(); err != nil {
		return cs.finish(err)
	}
	if cs.trailersOnly {
		return cs.finishWithTrailer(cs.header)
	}
	if err := cs.readFull(cs.prefix[:]); err != nil {
		if errors.Is(err, io.EOF) {
			cs.t.mu.Lock()
			trailer := cs.trailer
			cs.t.mu.Unlock()
			if trailer == nil {
				return cs.finish(status.Error(codes.Internal, "h2conn: the server closed the stream without sending trailers"))
			}
			return cs.finishWithTrailer(trailer)
		}
		return cs.finish(cs.streamError(err))
	}
	if cs.prefix[0] != 0 {
		return cs.finish(status.Errorf(codes.Internal, "grpc: the server sent a message with flags %#x, and no compression was negotiated", cs.prefix[0]))
	}
	n := binary.BigEndian.Uint32(cs.prefix[1:])
	if uint64(n) > uint64(cs.maxRecv) {
		return cs.finish(status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, cs.maxRecv))
	}
	var data mem.BufferSlice
	switch {
	case n >= gatherMin:
		var err error
		if data, err = cs.readBuffers(int(n)); err != nil {
			return cs.finish(cs.streamError(err))
		}
	case n > 0:
		pool := mem.DefaultBufferPool()
		buf := pool.Get(int(n))
		if err := cs.readFull(*buf); err != nil {
			pool.Put(buf)
			return cs.finish(cs.streamError(err))
		}
		data = mem.BufferSlice{mem.NewBuffer(buf, pool)}
	}
	err := cs.codec.Unmarshal(data, m)
	data.Free()
	if err != nil {
		return cs.finish(status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err))
	}
	return nil
}

func (cs *clientStream) finishWithTrailer(h headerFields) error {
	md, err := toMetadata(h)
	if err != nil {
		return cs.finish(err)
	}
	cs.mdTrail = md
	return cs.finish(statusFromTrailer(h))
}

// streamError is gRPC's status for why the stream broke off.
func (cs *clientStream) streamError(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return status.Error(codes.Internal, "h2conn: the server ended the stream inside a message")
	}
	if ctxErr := cs.ctx.Err(); ctxErr != nil {
		return status.FromContextError(context.Cause(cs.ctx)).Err()
	}
	return statusFromTransport(err)
}

// finish ends the stream with err (io.EOF for an OK status) for the receiver.
func (cs *clientStream) finish(err error) error {
	cs.recvErr = err
	if cs.mdTrail == nil {
		cs.mdTrail = metadata.MD{}
	}
	cs.end()
	return err
}
