;; bad_signature.wat: exports spangle_partition with the wrong type.
(module
  (memory (export "memory") 1)
  (func (export "spangle_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "spangle_partition") (param i32 i32) (result i64) (i64.const 0)))
