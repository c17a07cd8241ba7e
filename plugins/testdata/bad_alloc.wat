;; bad_alloc.wat: spangle_alloc returns a pointer beyond its memory.
(module
  (memory (export "memory") 1)
  (func (export "spangle_alloc") (param i32) (result i32) (i32.const 0x7ffffff0))
  (func (export "spangle_partition") (param i32 i32 i32) (result i32) (i32.const 0)))
