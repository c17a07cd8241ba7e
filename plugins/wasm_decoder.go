package plugins

import (
	"context"
	"fmt"
	"mime"

	"github.com/tetratelabs/wazero/api"
)

// maxContentType bounds the media type a decoder may name.
const maxContentType = 256

// WasmDecoder turns stored values into what clients receive, with a Wasm
// module (ABI spangle/v1, see ABI.md). Safe for concurrent use: calls run on
// a pool of at most Config.PoolSize instances.
type WasmDecoder struct {
	h           *host
	contentType string
}

// OpenDecoder loads the decoder module at path: it reads and checks it,
// compiles it (or loads it from Config.CacheDir), starts one instance and
// reads its content type, all bounded by ctx. The caller closes it with
// Close.
func OpenDecoder(ctx context.Context, path string, cfg Config) (*WasmDecoder, error) {
	h, err := loadHost(ctx, path, cfg, fnDecode)
	if err != nil {
		return nil, err
	}
	d := &WasmDecoder{h: h}
	if h.exported[fnContentType] {
		if d.contentType, err = d.readContentType(ctx); err != nil {
			_ = h.close(ctx)
			return nil, err
		}
	}
	return d, nil
}

func (d *WasmDecoder) readContentType(ctx context.Context) (string, error) {
	in, err := d.h.acquire(ctx)
	if err != nil {
		return "", err
	}
	defer d.h.release(in)
	if err := in.call(ctx, fnContentType); err != nil {
		return "", err
	}
	packed := in.stack[0]
	if int64(packed) < 0 {
		return "", in.guestError(fnContentType, int64(packed))
	}
	if uint32(packed) > maxContentType {
		return "", in.badResult(fnContentType, "content type of %d bytes, over %d", uint32(packed), maxContentType)
	}
	b, err := in.readPacked(fnContentType, packed)
	if err != nil {
		return "", err
	}
	ct := string(b)
	if _, _, err := mime.ParseMediaType(ct); err != nil {
		return "", in.badResult(fnContentType, "content type %q: %v", ct, err)
	}
	return ct, nil
}

// Identity returns "wasm:sha256:<hex>", the SHA-256 of the module bytes.
func (d *WasmDecoder) Identity() string { return d.h.identity }

// ContentType returns the media type the module names for its output
// (spangle_content_type, read once at load), or "" when it names none.
func (d *WasmDecoder) ContentType() string { return d.contentType }

// Decode returns the decoded form of val. The caller retains ownership of
// val and owns the result. It blocks while PoolSize calls are running, until
// ctx is done; ctx also stops the guest (the error then wraps ctx.Err()). A
// value the guest rejects is an ErrPluginError; a fault is an error of this
// call only (see errors.go).
func (d *WasmDecoder) Decode(ctx context.Context, val []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("plugins: %s: %w", d.h.path, err)
	}
	in, err := d.h.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer d.h.release(in)
	ptr, err := in.write(val)
	if err != nil {
		return nil, err
	}
	s := in.stack
	s[0], s[1] = api.EncodeU32(ptr), api.EncodeU32(uint32(len(val)))
	if err := in.call(ctx, fnDecode); err != nil {
		return nil, err
	}
	if packed := int64(s[0]); packed < 0 {
		return nil, in.guestError(fnDecode, packed)
	}
	return in.readPacked(fnDecode, s[0])
}

// Close releases the module: see host.close. Idempotent; calls after it
// return ErrClosed.
func (d *WasmDecoder) Close(ctx context.Context) error { return d.h.close(ctx) }
