(module
  ;; Two pages: the host's buffer lives in the second.
  (memory (export "memory") 2)

  ;; The host holds one buffer at a time: a fixed one will do.
  (func (export "spangle_alloc") (param $size i32) (result i32)
    (if (result i32) (i32.le_u (local.get $size) (i32.const 65536))
      (then (i32.const 65536))
      (else (i32.const 0))))

  ;; sequins' hash: h = 31*h + b over the key bytes, then (h & 0x7fffffff) % n.
  (func (export "spangle_partition") (param $key i32) (param $len i32) (param $n i32) (result i32)
    (local $h i32) (local $end i32)
    (if (i32.le_s (local.get $n) (i32.const 0)) (then (return (i32.const -1))))
    (local.set $end (i32.add (local.get $key) (local.get $len)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $key) (local.get $end)))
        (local.set $h (i32.add (i32.mul (local.get $h) (i32.const 31))
                               (i32.load8_u (local.get $key))))
        (local.set $key (i32.add (local.get $key) (i32.const 1)))
        (br $next)))
    (i32.rem_u (i32.and (local.get $h) (i32.const 0x7fffffff)) (local.get $n))))
