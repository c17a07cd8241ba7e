;; command.wat: a WASI command (_start), not a reactor.
(module
  (memory (export "memory") 1)
  (func (export "_start"))
  (func (export "spangle_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "spangle_partition") (param i32 i32 i32) (result i32) (i32.const 0)))
