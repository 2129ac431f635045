package wasmdec

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// MaxLimit is the most linear memory any instance may have whatever the
// caller asks: 2 GiB (wazero.RuntimeConfig.WithMemoryLimitPages of 32768
// pages of 64 KiB). The caller's own limit is usually far lower.
const MaxLimit = 32768 * pageSize

const pageSize = 64 << 10

// ErrMemoryLimit is wrapped by the error of a decode that asked for more
// linear memory than its limit.
var ErrMemoryLimit = errors.New("the decoder asked for more memory than its limit")

// module is one compiled WebAssembly module and its runtime, made once.
type module struct {
	gz   []byte
	once sync.Once
	rt   wazero.Runtime
	cm   wazero.CompiledModule
	err  error
}

func (m *module) init() error {
	m.once.Do(func() {
		ctx := context.Background()
		cfg := wazero.NewRuntimeConfig().
			WithMemoryLimitPages(MaxLimit / pageSize).
			WithCloseOnContextDone(true)
		m.rt = wazero.NewRuntimeWithConfig(ctx, cfg)
		zr, err := gzip.NewReader(bytes.NewReader(m.gz))
		if err != nil {
			m.err = err
			return
		}
		wasm, err := io.ReadAll(zr)
		if err != nil {
			m.err = err
			return
		}
		if _, err := wasi_snapshot_preview1.Instantiate(ctx, m.rt); err != nil {
			m.err = err
			return
		}
		m.cm, m.err = m.rt.CompileModule(ctx, wasm)
	})
	return m.err
}

// Compile compiles the HEIF and AVIF modules, once per process: the first
// decode does it otherwise, inside its own deadline (about a second of one
// core, far more under the race detector). It returns the error of either.
func Compile() error {
	if err := heif.init(); err != nil {
		return err
	}
	return avif.init()
}

// instance is one decode's module instance, its memory within limit.
type instance struct {
	mod api.Module
	mem *linear
}

// instantiate makes an instance whose linear memory is at most limit bytes
// (rounded down to whole pages, at most MaxLimit), ended when ctx is done.
func (m *module) instantiate(ctx context.Context, limit int64) (*instance, error) {
	if err := m.init(); err != nil {
		return nil, fmt.Errorf("compile the decoder: %w", err)
	}
	limit = min(max(limit, 0), MaxLimit) / pageSize * pageSize
	for _, d := range m.cm.ExportedMemories() {
		if need := int64(d.Min()) * pageSize; need > limit {
			// wazero needs the module's initial memory at once.
			return nil, fmt.Errorf("instantiate: %w (%d bytes; the module starts with %d)", ErrMemoryLimit, limit, need)
		}
	}
	mem := &linear{limit: uint64(limit)}
	actx := experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(func(_, _ uint64) experimental.LinearMemory { return mem }))
	cfg := wazero.NewModuleConfig().WithName("").WithStdout(io.Discard).WithStderr(io.Discard)
	mod, err := m.rt.InstantiateModule(actx, m.cm, cfg)
	if err != nil {
		if mem.refused.Load() {
			return nil, fmt.Errorf("instantiate: %w (%d bytes)", ErrMemoryLimit, limit)
		}
		return nil, fmt.Errorf("instantiate: %w", err)
	}
	return &instance{mod: mod, mem: mem}, nil
}

// call calls the exported function name, naming the limit when the
// decoder was refused memory, and ctx's error when it ended the call.
func (in *instance) call(ctx context.Context, name string, args ...uint64) (uint64, error) {
	res, err := in.mod.ExportedFunction(name).Call(ctx, args...)
	switch {
	case err == nil:
		return res[0], nil
	case ctx.Err() != nil:
		return 0, fmt.Errorf("%s: %w", name, ctx.Err())
	case in.mem.refused.Load():
		return 0, fmt.Errorf("%s: %w (%d bytes)", name, ErrMemoryLimit, in.mem.limit)
	}
	return 0, fmt.Errorf("%s: %w", name, err)
}

// refusal is the error of a call that returned failure: ErrMemoryLimit when
// the decoder was refused memory on the way (libheif and libavif fail
// cleanly when malloc returns NULL), else ErrDecode.
func (in *instance) refusal(lib string) error {
	if in.mem.refused.Load() {
		return fmt.Errorf("%s: %w (%d bytes)", lib, ErrMemoryLimit, in.mem.limit)
	}
	return fmt.Errorf("%s: %w", lib, ErrDecode)
}

// malloc allocates n bytes in the instance; 0 is a refusal.
func (in *instance) malloc(ctx context.Context, n uint64) (uint32, error) {
	p, err := in.call(ctx, "malloc", n)
	if err != nil {
		return 0, err
	}
	if p == 0 {
		return 0, fmt.Errorf("malloc of %d bytes: %w (%d bytes)", n, ErrMemoryLimit, in.mem.limit)
	}
	return uint32(p), nil
}

// write copies b into the instance's memory at p.
func (in *instance) write(p uint32, b []byte) error {
	if !in.mod.Memory().Write(p, b) {
		return errors.New("write past the module's memory")
	}
	return nil
}

// read returns a copy of n bytes of the instance's memory at p: the memory
// is unmapped when the instance closes.
func (in *instance) read(p, n uint32) ([]byte, error) {
	b, ok := in.mod.Memory().Read(p, n)
	if !ok {
		return nil, errors.New("read past the module's memory")
	}
	return bytes.Clone(b), nil
}

func (in *instance) u32(p uint32) (uint32, error) {
	v, ok := in.mod.Memory().ReadUint32Le(p)
	if !ok {
		return 0, errors.New("read past the module's memory")
	}
	return v, nil
}

// close closes the instance and unmaps its memory. wazero frees the memory
// of an instance it closed at its context's end only when the instance runs
// again; an instance that finished just as its deadline passed would keep
// it, so it is freed here too (Free is idempotent; no call runs any more).
func (in *instance) close(ctx context.Context) {
	in.mod.Close(context.WithoutCancel(ctx))
	in.mem.Free()
}

// Peak is the most linear memory, in bytes, one instance has had since the
// process started; TotalLinear the sum over instances of each one's most.
// Tests read them to check a bound.
func Peak() int64        { return peak.Load() }
func TotalLinear() int64 { return total.Load() }

var peak, total atomic.Int64

// linear is an instance's linear memory: it grows up to limit and no
// further (Reallocate returns nil, which the module sees as a failed
// memory.grow, its malloc as NULL).
type linear struct {
	limit   uint64
	buf     []byte
	backing backing
	high    uint64
	refused atomic.Bool
}

// Reallocate implements experimental.LinearMemory.
func (l *linear) Reallocate(size uint64) []byte {
	if size > l.limit {
		l.refused.Store(true)
		return nil
	}
	if l.backing == nil {
		b, err := reserve(l.limit)
		if err != nil {
			l.refused.Store(true)
			return nil
		}
		l.backing = b
	}
	buf := l.backing.grow(size)
	if buf == nil {
		l.refused.Store(true)
		return nil
	}
	if size > l.high {
		total.Add(int64(size - l.high))
		l.high = size
		for p := peak.Load(); int64(size) > p && !peak.CompareAndSwap(p, int64(size)); p = peak.Load() {
		}
	}
	l.buf = buf
	return buf
}

// Free implements experimental.LinearMemory.
func (l *linear) Free() {
	if l.backing != nil {
		l.backing.free()
		l.backing, l.buf = nil, nil
	}
}

// backing is the memory under a linear memory: grow returns its first size
// bytes, keeping what was written.
type backing interface {
	grow(size uint64) []byte
	free()
}
