package plugins

import (
	"bytes"
	"errors"
	"fmt"
)

// wasmImport is one entry of a module's import section.
type wasmImport struct {
	module, name string
	kind         byte // importFunc, ...
}

// Import kinds of the binary format.
const (
	importFunc   = 0x00
	importTable  = 0x01
	importMemory = 0x02
	importGlobal = 0x03
	importTag    = 0x04
)

var kindNames = map[byte]string{
	importFunc:   "function",
	importTable:  "table",
	importMemory: "memory",
	importGlobal: "global",
	importTag:    "tag",
}

var errTruncated = errors.New("truncated")

// moduleInfo is what the host checks of a binary before instantiating it.
type moduleInfo struct {
	// imports lists the imports up to and including the first that is not
	// a function (whose description is not decoded).
	imports []wasmImport
	// memMin is the initial size of the module's own memory, in pages;
	// hasMem says whether it defines one.
	memMin uint32
	hasMem bool
	// hasStart says whether the module has a start section (a function
	// that runs at every instantiation).
	hasStart bool
}

// sectionOrder is the rank of each known non-custom section id in a
// module: the tag section (13) comes after memory, the data count section
// (12) before code.
var sectionOrder = [...]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

// scanModule reads a Wasm binary's preamble and its sections up to the
// start section: it decodes the import and memory sections, and notes the
// start section. wazero validates the rest.
func scanModule(bin []byte) (moduleInfo, error) {
	var info moduleInfo
	if len(bin) < 8 || !bytes.Equal(bin[:4], []byte("\x00asm")) {
		return info, errors.New("not a wasm binary")
	}
	r := wasmReader{b: bin[8:]}
	var last byte // id of the last non-custom section
	for len(r.b) > 0 {
		id := r.byte()
		size := r.u32()
		if r.err != nil || uint64(size) > uint64(len(r.b)) {
			return info, fmt.Errorf("section %d: %w", id, errTruncated)
		}
		if id != 0 && int(id) < len(sectionOrder) && sectionOrder[id] != 0 {
			if last != 0 && sectionOrder[id] <= sectionOrder[last] {
				return info, fmt.Errorf("section %d after section %d", id, last)
			}
			last = id
		}
		body := wasmReader{b: r.b[:size]}
		r.b = r.b[size:]
		switch id {
		case 2:
			if err := body.imports(&info); err != nil {
				return info, fmt.Errorf("import section: %w", err)
			}
		case 5:
			if body.u32() > 0 {
				flags := body.byte()
				if flags <= 3 { // not memory64
					info.memMin, info.hasMem = body.u32(), true
				}
			}
			if body.err != nil {
				return info, fmt.Errorf("memory section: %w", body.err)
			}
		case 8:
			info.hasStart = true
			return info, nil
		case 0, 1, 3, 4, 6, 7, 13: // custom, type, function, table, global, export, tag: before start
		default: // element, data count, code, data, unknown: after start
			return info, nil
		}
	}
	return info, nil
}

func (r *wasmReader) imports(info *moduleInfo) error {
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		im := wasmImport{module: r.name(), name: r.name(), kind: r.byte()}
		if r.err != nil {
			break
		}
		info.imports = append(info.imports, im)
		if im.kind != importFunc {
			return nil
		}
		r.u32() // type index
	}
	return r.err
}

// wasmReader decodes the binary format's primitives; the first error sticks.
type wasmReader struct {
	b   []byte
	err error
}

func (r *wasmReader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.err = errTruncated
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// u32 reads an unsigned LEB128 of at most 5 bytes.
func (r *wasmReader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.err = errors.New("bad LEB128")
	return 0
}

func (r *wasmReader) name() string {
	n := r.u32()
	if r.err != nil {
		return ""
	}
	if uint64(n) > uint64(len(r.b)) {
		r.err = errTruncated
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}
