;; env_import.wat: imports a function that is not WASI: refused at load.
(module
  (import "env" "foo" (func $foo (result i32)))
  (memory (export "memory") 1)
  (func (export "spangle_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "spangle_partition") (param i32 i32 i32) (result i32) (call $foo)))
